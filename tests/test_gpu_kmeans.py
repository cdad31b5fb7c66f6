"""gpu.kmeans against scikit-learn's Lloyd iterations from the same starting centres."""

import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans
from support.devices import DEVICES

import sparkml.gpu.kmeans as km


def _blobs(n=600, d=5, centres=8, seed=0):
    rng = np.random.default_rng(seed)
    means = rng.normal(0.0, 4.0, (centres, d))
    return means[rng.integers(0, centres, n)] + rng.normal(0.0, 1.0, (n, d))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("iters", [1, 3, 50])
def test_lloyd_iterations_are_sklearns_from_the_same_start(iters, device):
    x = _blobs()
    init = x[np.random.default_rng(1).choice(len(x), 8, replace=False)]
    ref = KMeans(8, init=init, n_init=1, max_iter=iters, tol=0.0, algorithm="lloyd").fit(x)
    ours = km.kmeans(torch.from_numpy(x).to(device), 8, iters=iters, init=init).cpu().numpy()
    np.testing.assert_allclose(ours, ref.cluster_centers_, rtol=0, atol=1e-10)


@pytest.mark.parametrize("iters", [1, 50])
def test_weighted_lloyd_is_sklearns_with_sample_weight_and_repeated_rows(iters):
    """Row weights: scikit-learn's weighted Lloyd iterations from the same start, and integer weights
    give the centres of the rows repeated that often."""
    x = _blobs()
    w = np.random.default_rng(2).integers(0, 4, len(x)).astype(float)  # a quarter of the rows weigh 0
    init = x[np.random.default_rng(1).choice(len(x), 8, replace=False)]
    ref = KMeans(8, init=init, n_init=1, max_iter=iters, tol=0.0, algorithm="lloyd").fit(x, sample_weight=w)
    ours = km.kmeans(x, 8, iters=iters, init=init, weights=w).numpy()
    np.testing.assert_allclose(ours, ref.cluster_centers_, rtol=0, atol=1e-10)
    repeated = km.kmeans(np.repeat(x, w.astype(int), axis=0), 8, iters=iters, init=init).numpy()
    np.testing.assert_allclose(ours, repeated, rtol=0, atol=1e-10)
    assert not np.allclose(ours, km.kmeans(x, 8, iters=iters, init=init).numpy(), atol=1e-3)  # the weights matter
    # drawn starting centres are rows of positive weight; with at most k of them, those rows
    start = km.kmeans(x, 40, iters=0, seed=3, weights=w).numpy()
    assert all(w[np.all(x == c, axis=1)].max() > 0 for c in start)
    few = np.zeros(len(x))
    few[[3, 9]] = 1.0
    np.testing.assert_array_equal(km.kmeans(x, 5, weights=few).numpy(), x[[3, 9]])
    with pytest.raises(ValueError, match="weights must be 600 values >= 0"):
        km.kmeans(x, 5, weights=-w)


def test_centres_are_the_means_of_their_rows_and_lower_the_sum_of_squares(monkeypatch):
    x = torch.from_numpy(_blobs(n=2000, d=7, centres=30, seed=2))
    start = km.kmeans(x, 40, iters=0, seed=5)
    assert len(np.unique(start.numpy(), axis=0)) == 40  # 40 distinct rows of x
    assert all(any(torch.equal(c, row) for row in x) for c in start[:5])
    centres = km.kmeans(x, 40, iters=200, seed=5)  # to a fixed point
    assign = km.nearest(x, centres)
    for j in range(40):
        if (assign == j).any():
            np.testing.assert_allclose(centres[j].numpy(), x[assign == j].mean(0).numpy(), atol=1e-12)

    def sum_of_squares(c):
        return float(((x - c[km.nearest(x, c)]) ** 2).sum())

    assert sum_of_squares(centres) < 0.5 * sum_of_squares(start)
    # the assignment over chunks of a few rows is the one-shot assignment
    monkeypatch.setattr(km, "_CHUNK_PAIRS", 97)
    assert torch.equal(km.nearest(x, centres), assign)
    assert torch.equal(km.kmeans(x, 40, iters=200, seed=5), centres)


def test_few_rows_and_bad_arguments():
    x = torch.arange(12.0).reshape(4, 3)
    assert torch.equal(km.kmeans(x, 4), x.double()) and torch.equal(km.kmeans(x, 9), x.double())
    with pytest.raises(ValueError, match="k must be >= 1"):
        km.kmeans(x, 0)
    with pytest.raises(ValueError, match="init must hold k=2 centres of 3 features"):
        km.kmeans(x, 2, init=np.zeros((2, 4)))


def test_float32_assignment_lands_where_float64_does_on_separated_rows():
    """``assign_dtype=torch.float32``: the same Lloyd iterations up to ties within float32 rounding, which
    separated blobs do not have (the landmark k-means: ``sparkml.kernel.landmarks``)."""
    from sklearn.datasets import make_blobs

    x, _ = make_blobs(n_samples=3000, centers=12, n_features=20, random_state=4)
    exact = km.kmeans(x, 40, iters=10, seed=1)
    fast = km.kmeans(x, 40, iters=10, seed=1, assign_dtype=torch.float32)
    assert fast.dtype == torch.float64
    torch.testing.assert_close(fast, exact, rtol=0, atol=1e-9)
