"""sparkml.kernel.landmarks: the class-stratified, partitioning-independent landmark sample."""
from types import SimpleNamespace

import numpy as np

from data_helpers import imbalanced_arrays, labeled_frame
from sparkml.gpu.kmeans import kmeans
from sparkml.kernel.landmarks import choose_landmarks, class_quotas, sample_landmarks


def _summary(x, y):
    return SimpleNamespace(rows=len(y), n_features=x.shape[1], class_weights=np.bincount(y.astype(int)).astype(float))


def test_sample_is_stratified_and_the_same_whatever_the_partitioning(spark):
    x, y = imbalanced_arrays()
    summary = _summary(x, y)
    quota = class_quotas(summary, 40)
    assert quota == {0.0: round(40 * np.mean(y == 0)), 1.0: round(40 * np.mean(y == 1))}
    one = sample_landmarks(labeled_frame(spark, x, y).coalesce(1), "features", "label", summary, quota, 3)
    many = sample_landmarks(labeled_frame(spark, x[::-1], y[::-1], partitions=5), "features", "label", summary,
                            quota, 3)
    np.testing.assert_array_equal(one[0], many[0])
    np.testing.assert_array_equal(one[1], many[1])
    picked, labels, weights = one
    assert np.all(weights == 1.0)  # no weight column
    assert picked.dtype == np.float64 and picked.shape == (sum(quota.values()), 3)
    assert {c: int(np.sum(labels == c)) for c in quota} == quota
    # every picked row is a training row with its own label, none twice
    index = {tuple(row): label for row, label in zip(x, y)}
    assert all(index[tuple(row)] == label for row, label in zip(picked, labels))
    assert len({tuple(row) for row in picked}) == len(picked)
    other_seed = sample_landmarks(labeled_frame(spark, x, y), "features", "label", summary, quota, 4)[0]
    assert not np.array_equal(np.sort(other_seed, axis=0), np.sort(picked, axis=0))


def test_all_rows_when_the_quota_covers_the_data(spark):
    x, y = imbalanced_arrays(n=30)
    frame = labeled_frame(spark, x, y)
    summary = _summary(x, y)
    picked, labels, _ = sample_landmarks(frame, "features", "label", summary, class_quotas(summary, 100), 0)
    assert picked.shape == x.shape
    np.testing.assert_array_equal(np.sort(picked, axis=0), np.sort(x, axis=0))
    assert sorted(labels) == sorted(y)


def test_weighted_rows_sample_and_kmeans(spark):
    """weightCol: rows of weight 0 are never sampled nor landmarks; the others keep their weights, and the
    k-means centres are the weighted ones (gpu.kmeans with those weights over the same sample)."""
    x, y = imbalanced_arrays(n=900, seed=1)
    w = np.random.default_rng(2).integers(0, 3, len(y)).astype(float)  # a third of the rows weigh 0
    frame = labeled_frame(spark, x, y, w=w, partitions=3)
    summary = _summary(x, y)
    weight_of = {tuple(row): wi for row, wi in zip(x, w)}
    picked, labels, weights = sample_landmarks(frame, "features", "label", summary, class_quotas(summary, 60), 0,
                                               "w")
    assert len(picked) == 60 and np.all(weights > 0)
    np.testing.assert_array_equal(weights, [weight_of[tuple(row)] for row in picked])
    unweighted = sample_landmarks(frame, "features", "label", summary, class_quotas(summary, 60), 0)[0]
    assert any(weight_of[tuple(row)] == 0 for row in unweighted)  # the filter is what keeps them out
    random, _ = choose_landmarks(frame, "features", "label", summary, 60, "random", 0, "w")
    np.testing.assert_array_equal(random, picked)
    centres, _ = choose_landmarks(frame, "features", "label", summary, 30, "kmeans", 0, "w")
    quota = class_quotas(summary, 30)
    rows, labels, weights = sample_landmarks(frame, "features", "label", summary,
                                             {c: q * 10 for c, q in quota.items()}, 0, "w")
    expected = np.concatenate([kmeans(rows[labels == c], q, iters=10, seed=0, weights=weights[labels == c]).numpy()
                               for c, q in quota.items()])
    np.testing.assert_allclose(centres, expected, rtol=0, atol=1e-12)
    plain = np.concatenate([kmeans(rows[labels == c], q, iters=10, seed=0).numpy() for c, q in quota.items()])
    assert not np.allclose(centres, plain, atol=1e-3)
