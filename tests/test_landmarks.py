"""sparkml.kernel.landmarks: the class-stratified, partitioning-independent landmark sample."""

import os
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from support.data_helpers import imbalanced_arrays, labeled_frame

from sparkml.gpu.kmeans import kmeans
from sparkml.kernel.landmarks import (
    _KMEANS_ITERS,
    BlockRows,
    FrameRows,
    choose_landmarks,
    class_quotas,
    sample_landmarks,
)


def _summary(x, y):
    return SimpleNamespace(rows=len(y), n_features=x.shape[1], class_weights=np.bincount(y.astype(int)).astype(float))


@pytest.fixture(params=["frame", "blocks"])
def training_rows(request, spark):
    """make(frame, weight_col=None): the rows to sample, as the DataFrame (``FrameRows``) or as its conversion's
    float64 blocks (``BlockRows``: ``row_sample.sample_blocks``, the path of a classic session's dense input)."""
    from sparkml.data.row_sample import samples_blocks
    from sparkml.data.training_data import TrainingData

    made = []

    def make(frame, weight_col=None):
        if request.param == "frame":
            return FrameRows(frame, "features", "label", weight_col)
        data = TrainingData.prepare(frame, "features", "label", weight_col, dtype="float64")
        made.append(data)
        assert samples_blocks(data)
        return BlockRows(data)

    yield make
    for data in made:
        data.release()


def test_sample_is_stratified_and_the_same_whatever_the_partitioning(spark, training_rows):
    x, y = imbalanced_arrays()
    summary = _summary(x, y)
    quota = class_quotas(summary, 40)
    assert quota == {0.0: round(40 * np.mean(y == 0)), 1.0: round(40 * np.mean(y == 1))}
    one = sample_landmarks(training_rows(labeled_frame(spark, x, y).coalesce(1)), summary, quota, 3)
    many = sample_landmarks(training_rows(labeled_frame(spark, x[::-1], y[::-1], partitions=5)), summary, quota, 3)
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
    other_seed = sample_landmarks(training_rows(labeled_frame(spark, x, y)), summary, quota, 4)[0]
    assert not np.array_equal(np.sort(other_seed, axis=0), np.sort(picked, axis=0))


def test_all_rows_when_the_quota_covers_the_data(spark, training_rows):
    x, y = imbalanced_arrays(n=30)
    rows = training_rows(labeled_frame(spark, x, y))
    summary = _summary(x, y)
    picked, labels, _ = sample_landmarks(rows, summary, class_quotas(summary, 100), 0)
    assert picked.shape == x.shape
    np.testing.assert_array_equal(np.sort(picked, axis=0), np.sort(x, axis=0))
    assert sorted(labels) == sorted(y)


def test_block_keys_are_uniform_and_a_function_of_the_row():
    """``row_sample.row_keys``: a row's key depends on (seed, label, features) only, not on where the row is; keys are
    uniform on [0, 1) (Kolmogorov-Smirnov on 100k rows), and a seed, a label or a feature's last bit changes them."""
    from scipy.stats import kstest

    from sparkml.data.row_sample import row_keys

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(100_000, 5)).astype(np.float32), rng.integers(0, 3, 100_000).astype(float)
    u = row_keys(x, y, 7)
    assert 0 <= u.min() and u.max() < 1 and kstest(u, "uniform").pvalue > 1e-3
    order = rng.permutation(len(y))
    np.testing.assert_array_equal(row_keys(x[order], y[order], 7), u[order])
    assert np.mean(row_keys(x, y, 8) == u) < 1e-3 and np.mean(row_keys(x, (y + 1) % 3, 7) == u) < 1e-3
    nudged = x.copy()
    nudged[:, 4] = np.nextafter(nudged[:, 4], np.float32(np.inf))
    assert np.mean(row_keys(nudged, y, 7) == u) < 1e-3


def test_a_sample_travels_as_arrow_bytes_and_back():
    """A Spark Connect job returns each partition's sample as one Arrow row of bytes (``row_sample.sample_batch``);
    ``unpack`` gives back the stored values, float32 rows included."""
    from sparkml.data.row_sample import sample_batch, unpack

    rng = np.random.default_rng(1)
    parts = [
        (rng.normal(size=(n, 3)).astype(dtype), rng.integers(0, 2, n) * 1.0, rng.uniform(size=n), rng.uniform(size=n))
        for n, dtype in ((5, np.float32), (0, np.float32), (3, np.float64))
    ]
    for part, row in zip(parts, sample_batch(parts).to_pylist()):
        back = unpack(row)
        assert back[0].dtype == part[0].dtype
        for a, b in zip(back, part):
            np.testing.assert_array_equal(a, np.ravel(b))


def test_weighted_rows_sample_and_kmeans(spark, training_rows):
    """weightCol: rows of weight 0 are never sampled nor landmarks; the others keep their weights, and the
    k-means centres are the weighted ones (gpu.kmeans with those weights over the same sample)."""
    x, y = imbalanced_arrays(n=900, seed=1)
    w = np.random.default_rng(2).integers(0, 3, len(y)).astype(float)  # a third of the rows weigh 0
    frame = labeled_frame(spark, x, y, w=w, partitions=3)
    summary = _summary(x, y)
    weight_of = {tuple(row): wi for row, wi in zip(x, w)}
    weighted = training_rows(frame, "w")
    picked, labels, weights = sample_landmarks(weighted, summary, class_quotas(summary, 60), 0)
    assert len(picked) == 60 and np.all(weights > 0)
    np.testing.assert_array_equal(weights, [weight_of[tuple(row)] for row in picked])
    unweighted = sample_landmarks(training_rows(frame), summary, class_quotas(summary, 60), 0)[0]
    assert any(weight_of[tuple(row)] == 0 for row in unweighted)  # the filter is what keeps them out
    random, _ = choose_landmarks(weighted, summary, 60, "random", 0)
    np.testing.assert_array_equal(random, picked)
    centres, _ = choose_landmarks(weighted, summary, 30, "kmeans", 0)
    quota = class_quotas(summary, 30)
    rows, labels, weights = sample_landmarks(weighted, summary, {c: q * 10 for c, q in quota.items()}, 0)
    expected = np.concatenate(
        [
            kmeans(
                rows[labels == c],
                q,
                iters=_KMEANS_ITERS,
                seed=0,
                weights=weights[labels == c],
                assign_dtype=torch.float32,
            ).numpy()
            for c, q in quota.items()
        ]
    )
    np.testing.assert_allclose(centres, expected, rtol=0, atol=1e-12)
    plain = np.concatenate(
        [kmeans(rows[labels == c], q, iters=_KMEANS_ITERS, seed=0).numpy() for c, q in quota.items()]
    )
    assert not np.allclose(centres, plain, atol=1e-3)


def _grow(
    spark,
    residuals,
    tol=0.05,
    cap=2000,
    selection="random",
    n=3000,
    hinges=None,
    gain_tol=0.002,
    probes=None,
    noise=None,
):
    """grow_landmarks on n rows of 2 classes, with a stand-in residual by landmark count (and a stand-in held-out
    hinge by landmark count: ``hinges``); ``probes``: a list that gets the stand-in's number of probe rows;
    ``noise``: the standard deviation of the stand-in's per-row hinges about their mean (reported as its
    ``row_hinges``, independent between steps; None: not reported)."""
    from sparkml.kernel.landmarks import GAIN_TRAIN_ROWS, grow_landmarks

    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(n, 4)), (rng.random(n) < 0.3).astype(float)
    seen = []

    def residual(landmarks, probe):
        seen.append((len(landmarks), len(probe)))
        return residuals[len(landmarks)]

    class Hinge:
        def __init__(self, train, train_labels, probe, probe_labels):
            # the sampled rows that are not probe rows, at most: the stand-in's steps' landmarks or its training rows
            pool = max(min(cap, 1000), GAIN_TRAIN_ROWS) if selection == "random" else n
            assert abs(len(train) - min(GAIN_TRAIN_ROWS, n - len(probe), pool)) <= 2 and len(probe) == len(probe_labels)
            assert not {tuple(r) for r in train} & {tuple(r) for r in probe}
            if probes is not None:
                probes.append(len(probe))

        def loss(self, landmarks):
            if noise is not None:
                e = np.random.default_rng(len(landmarks)).normal(scale=noise, size=1000)
                self.row_hinges = hinges[len(landmarks)] + e - e.mean()
            return hinges[len(landmarks)]

    landmarks, rows, trail = grow_landmarks(
        FrameRows(labeled_frame(spark, x, y), "features", "label"),
        _summary(x, y),
        selection,
        0,
        residual,
        tol,
        cap,
        gain=None if hinges is None else Hinge,
        gain_tol=gain_tol,
    )
    probes = {p for _, p in seen}
    measured = trail if trail[-1][1] is not None else trail[:-1]  # the target's residual is not measured
    assert [t[:2] for t in measured] == [(m, residuals[m]) for m, _ in seen]
    assert len(probes) == 1 and abs(probes.pop() - 1000) <= 1
    probe_free = {tuple(r) for r in landmarks}
    return landmarks, rows, trail, probe_free


def test_unset_num_landmarks_doubles_until_the_residual_is_small_or_the_target(spark):
    # below landmarkTol at 1000
    landmarks, rows, trail, _ = _grow(spark, {250: 0.4, 500: 0.2, 1000: 0.04, 2000: 0.01})
    assert [m for m, _, _ in trail] == [250, 500, 1000] and len(landmarks) == 1000 and rows is None
    # a residual that stops falling does not stop the search: the target (2000 for 3000 rows) does, unmeasured
    landmarks, _, trail, _ = _grow(spark, {250: 0.4, 500: 0.2, 1000: 0.19, 2000: 0.1})
    assert trail == [(250, 0.4, None), (500, 0.2, None), (1000, 0.19, None), (2000, None, None)]
    assert len(landmarks) == 2000
    # the cap: the last step is the cap itself
    landmarks, _, trail, _ = _grow(spark, {250: 0.4, 500: 0.3, 700: 0.2}, cap=700)
    assert trail == [(250, 0.4, None), (500, 0.3, None), (700, None, None)] and len(landmarks) == 700
    # k-means centres: the preconditioner's rows come with them
    landmarks, rows, trail, _ = _grow(spark, {250: 0.01}, selection="kmeans")
    assert len(landmarks) == 250 and rows.shape == (1000, 4)


def test_unset_num_landmarks_stops_growing_when_twice_as_many_buy_the_classifier_nothing(spark):
    residuals = {250: 0.4, 500: 0.3, 1000: 0.25, 2000: 0.2}
    # 500 landmarks lower the held-out hinge by 0.0015 (at most landmarkGainTol, 0.002): 250 are kept
    landmarks, _, trail, _ = _grow(spark, residuals, hinges={250: 0.02, 500: 0.0185})
    assert trail == [(250, 0.4, 0.02), (500, 0.3, 0.0185)] and len(landmarks) == 250
    # a worse hinge stops it too (the stand-in overfits: more landmarks than its rows support)
    landmarks, _, trail, _ = _grow(spark, residuals, hinges={250: 0.3, 500: 0.2, 1000: 0.21})
    assert [m for m, _, _ in trail] == [250, 500, 1000] and len(landmarks) == 500
    # a hard problem keeps gaining: the hinge is measured up to GAIN_MAX_LANDMARKS, then the residual alone rules
    # and the target ends the search. 3000 rows: the stand-in's probe is the residual's (1000), so that the target's
    # landmarks are all there; 12,000: it takes GAIN_PROBE_ROWS (4000), the residual still reads 1000 of them
    for n, probe_rows in ((3000, 1000), (12000, 4000)):
        probes: list[int] = []
        landmarks, _, trail, _ = _grow(spark, residuals, hinges={250: 0.6, 500: 0.5, 1000: 0.45}, n=n, probes=probes)
        assert trail == [(250, 0.4, 0.6), (500, 0.3, 0.5), (1000, 0.25, 0.45), (2000, None, None)]
        assert len(landmarks) == 2000 and abs(probes[0] - probe_rows) <= 2
    # a fall above landmarkGainTol that the probe's noise explains is no gain: 0.0035 from 500 to 1000 with per-row
    # hinges scattered by 0.05 (1.5 standard errors of the paired fall on 1000 rows: about 0.0034) keeps 500; the same
    # fall measured with little noise, and the larger falls before it, still grow the landmarks
    falls = {250: 0.1, 500: 0.09, 1000: 0.0865}
    landmarks, _, trail, _ = _grow(spark, residuals, hinges=falls, noise=0.05)
    assert [m for m, _, _ in trail] == [250, 500, 1000] and len(landmarks) == 500
    landmarks, _, trail, _ = _grow(spark, residuals, hinges=falls, noise=0.001)
    assert [m for m, _, _ in trail] == [250, 500, 1000, 2000] and len(landmarks) == 2000
    # landmarkGainTol 0: the check is off, the stand-in is never built
    landmarks, _, trail, _ = _grow(spark, residuals, hinges={}, gain_tol=0.0)
    assert [h for _, _, h in trail] == [None] * 4 and len(landmarks) == 2000
    # the residual still stops the search where it comes first
    landmarks, _, trail, _ = _grow(spark, {250: 0.04}, hinges={250: 0.6})
    assert trail == [(250, 0.04, 0.6)] and len(landmarks) == 250


def test_the_stand_ins_steps_sample_for_themselves_and_the_target_samples_again(spark, monkeypatch):
    """Easy data stops within the stand-in's steps (up to 1000 landmarks) on one sample sized for them; a search
    that goes on to the target samples again, for the target's k-means pool, whose first rows are the same."""
    from sparkml.kernel import landmarks as module

    quotas = []
    sample = module.sample_landmarks

    def counted(*args, **kwargs):
        quotas.append(sum(args[2].values()))
        return sample(*args, **kwargs)

    monkeypatch.setattr(module, "sample_landmarks", counted)
    residuals = {250: 0.4, 500: 0.3, 1000: 0.25, 2000: 0.2}  # the target of 12,000 rows: 2000
    _, _, trail, _ = _grow(spark, residuals, hinges={250: 0.02, 500: 0.0185}, n=12000, selection="kmeans")
    assert [m for m, _, _ in trail] == [250, 500] and len(quotas) == 1
    first = quotas[0]
    quotas.clear()
    _, _, trail, _ = _grow(spark, residuals, hinges={250: 0.6, 500: 0.5, 1000: 0.45}, n=12000, selection="kmeans")
    assert [m for m, _, _ in trail] == [250, 500, 1000, 2000] and quotas[0] == first
    assert len(quotas) == 2 and quotas[1] > first  # the target's pool: 2000 landmarks' k-means rows


def test_the_landmark_target_is_every_row_to_2000_then_1_5_sqrt_n_ln_n_within_the_cap():
    from sparkml.kernel.landmarks import landmark_target

    assert landmark_target(1257, 4000) == 1257  # every row: the exact kernel machine
    assert landmark_target(5000, 4000) == 2000  # 1.5 sqrt(5000) ln(5000) = 903: the floor
    assert landmark_target(100_000, 10_000) == 5462  # ceil(1.5 * 316.23 * 11.513)
    assert landmark_target(100_000, 4000) == 4000  # maxLandmarks
    assert landmark_target(5000, 300) == 300


def test_unset_num_landmarks_on_a_smooth_kernel_stops_early(spark, caplog):
    """A wide rbf kernel (gamma 0.01) on 2-D blobs is nearly low-rank: 250 landmarks capture it, and the fit
    says so; numLandmarks set keeps its number; at most maxLandmarks rows are all landmarks."""
    import logging

    from sklearn import datasets

    from sparkml.classification import KernelSVC

    x, y = datasets.make_blobs(n_samples=2000, centers=2, n_features=2, random_state=1)
    frame = labeled_frame(spark, x, y.astype(float)).cache()  # the three fits on one cached frame
    with caplog.at_level(logging.INFO, logger="sparkml"):
        model = KernelSVC(gamma=0.01, maxIter=20, maxLandmarks=1000).fit(frame)
    assert not model.isSet("numLandmarks") and model.numLandmarksUsed <= 250
    (line,) = [r.getMessage() for r in caplog.records if "numLandmarks unset" in r.getMessage()]
    assert "held-out hinge: 250: 0.0" in line  # the residual at 250 landmarks: below landmarkTol
    # the landmarks are chosen before the solve: one Newton round is enough to see them (2000 of them: the
    # costliest fit of the module at maxIter 20)
    assert KernelSVC(gamma=0.01, maxIter=1, numLandmarks=300).fit(frame).numLandmarksUsed == 300
    assert KernelSVC(gamma=0.01, maxIter=1).fit(frame).landmarks.numRows == 2000
    frame.unpersist()


@pytest.mark.parametrize(
    "problem,reg,landmarks", [("twonorm", 1e-4, 250), ("synthetic", 1e-4, 2000), ("synthetic", 1e-6, 2000)]
)
def test_unset_num_landmarks_stop_early_on_easy_data_and_reach_the_target_on_hard_data(spark, problem, reg, landmarks):
    """5000 rows x 20 (the target: 2000): two Gaussians (Bayes accuracy 97.7%) need few landmarks, and the
    stand-in classifier's held-out hinge says so at 500 although the kernel's residual is far above landmarkTol
    there; the curved boundary of the benchmarks' synthetic problem keeps gaining and goes to the target, at the
    default regParam and at 1e-6, a fit of 1M rows at C = 1, where the stand-in fitted at the fit's regParam overfits
    its 4000 rows and stopped at 500 (``GAIN_MAX_C``). landmarkGainTol 0 grows the easy one to the target too
    (maxIter 1: the landmarks are chosen before the solve)."""
    from support.helpers import ROOT

    from sparkml.classification import KernelSVC

    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import datasets  # the benchmarks' problems

    x, y = datasets.twonorm(5000, seed=3) if problem == "twonorm" else datasets.synthetic(5000, 20, seed=3)
    frame = labeled_frame(spark, x, y).cache()
    assert KernelSVC(maxIter=1, regParam=reg).fit(frame).numLandmarksUsed == landmarks
    if problem == "twonorm":
        assert KernelSVC(maxIter=1, landmarkGainTol=0.0).fit(frame).numLandmarksUsed == 2000
    frame.unpersist()


def test_unset_num_landmarks_on_a_small_data_set_keeps_half_of_each_class_for_landmarks(spark):
    """400 rows, at most 300 landmarks: the probe takes at most half of each class's rows, the landmarks come
    from the other half."""
    from sparkml.kernel.landmarks import grow_landmarks

    x, y = imbalanced_arrays(n=400)
    probes = []

    def residual(landmarks, probe):
        probes.append(probe)
        assert not {tuple(r) for r in landmarks} & {tuple(r) for r in probe}
        return 0.5

    landmarks, _, trail = grow_landmarks(
        FrameRows(labeled_frame(spark, x, y), "features", "label"), _summary(x, y), "random", 0, residual, 0.05, 300
    )
    assert [m for m, _, _ in trail] == [len(landmarks)] * len(trail) and 0 < len(landmarks) <= 200
    for c in (0.0, 1.0):
        rows_of_c = {tuple(v) for v in x[y == c]}
        assert 0 < sum(tuple(r) in rows_of_c for r in probes[0]) <= int(np.sum(y == c)) // 2


def test_start_coefficients_carry_the_stand_ins_decision_to_the_nystroem_features():
    """theta = R^+ alpha: the fit's features K(x, L) R give the stand-in's decision K(x, L) alpha + b, a one-vs-one
    pair half the difference of its classes'; no start where the problems' classes are not the stand-in's or there
    is no intercept to carry b."""
    import torch

    from sparkml.gpu.feature_maps import NystroemSpec
    from sparkml.gpu.kernels import kernel_matrix
    from sparkml.gpu.nystroem import NystroemMap
    from sparkml.kernel.feature_map import start_coefficients

    rng = np.random.default_rng(8)
    landmarks, rows = rng.normal(size=(30, 3)), rng.normal(size=(200, 3))
    nystroem = NystroemMap("rbf", torch.from_numpy(landmarks), rcond=1e-10, gamma=0.3)
    spec = NystroemSpec("rbf", landmarks, nystroem.projection.numpy(), 0.3, 3, 0.0)
    alpha, b = rng.normal(size=(2, 30)), np.array([0.5, -1.0])
    theta = start_coefficients(spec, ([0.0, 1.0], alpha, b), [0.0, 1.0], fit_intercept=True)
    k = kernel_matrix("rbf", torch.from_numpy(rows), torch.from_numpy(landmarks), gamma=0.3).numpy()
    features = k @ spec.projection
    np.testing.assert_allclose(features @ theta[:, :-1].T + theta[:, -1], k @ alpha.T + b, rtol=1e-6, atol=1e-6)
    # one-vs-one: (f_0 - f_1) / 2 for the pair (0, 1)
    (pair,) = start_coefficients(spec, ([0.0, 1.0], alpha, b), [0.0, 1.0], True, pairs=[(0.0, 1.0)])
    np.testing.assert_allclose(
        features @ pair[:-1] + pair[-1], (k @ (alpha[0] - alpha[1]) + b[0] - b[1]) / 2, rtol=1e-6, atol=1e-6
    )
    assert start_coefficients(spec, ([0.0, 1.0], alpha, b), [0.0, 1.0, 2.0], fit_intercept=True) is None
    assert start_coefficients(spec, ([0.0, 1.0], alpha, b), [0.0, 1.0, 2.0], True, pairs=[(0.0, 2.0)]) is None
    assert start_coefficients(spec, ([0.0, 1.0], alpha, b), [0.0, 1.0], fit_intercept=False) is None
    assert start_coefficients(spec, None, [1.0], fit_intercept=True) is None


@pytest.mark.parametrize("problem", ["twonorm", "waveform"])
def test_a_fit_after_the_landmark_search_starts_from_the_stand_in(spark, monkeypatch, problem):
    """numLandmarks unset on 5000 rows of two Gaussians, or of waveform's three classes (one-vs-one): the search
    stops at 250 landmarks, where its stand-in classifiers were trained, and the Newton rounds start from them (a
    pair from its two classes'; no squared-hinge rounds from 0): fewer rounds to the optimum of the fit started from
    0, within the rounds' stopping rule, and the same predictions but a few."""
    from support.helpers import ROOT

    import sparkml.kernel.kernel_svc as kernel_svc
    from sparkml.classification import KernelSVC

    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import datasets  # the benchmarks' problems

    x, y = getattr(datasets, problem)(5000, seed=3)
    frame = labeled_frame(spark, x, y).cache()
    started = KernelSVC(regParam=1e-4).fit(frame)
    monkeypatch.setattr(kernel_svc, "start_coefficients", lambda *args: None)
    cold = KernelSVC(regParam=1e-4).fit(frame)
    assert started.numLandmarksUsed == cold.numLandmarksUsed and started.numLandmarksUsed <= 251
    np.testing.assert_array_equal(started.landmarks.toArray(), cold.landmarks.toArray())
    # measured (twonorm): 9 rounds against 13 (2 of them the squared hinge's), objectives 0.061901 and 0.061894:
    # each stops where a round lowers it by less than tol (1e-4) relative
    rounds = [sum(s.totalIterations for s in model.summaries) for model in (started, cold)]
    assert rounds[0] < rounds[1], rounds
    for a, b in zip(started.summaries, cold.summaries):
        assert a.objectiveHistory[-1] == pytest.approx(b.objectiveHistory[-1], rel=1e-3)
    agree = np.mean(
        started.transform(frame).select("prediction").toPandas().to_numpy()
        == cold.transform(frame).select("prediction").toPandas().to_numpy()
    )
    assert agree > 0.995, agree
    frame.unpersist()
