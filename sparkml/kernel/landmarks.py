"""Nystroem landmarks for KernelSVC, chosen on Spark: a class-stratified sample of the training rows,
and optionally the k-means centres of a larger sample (``sparkml.gpu.kmeans``)."""

import math

import numpy as np
import torch
from pyspark.sql import functions as F

from sparkml.gpu.kmeans import kmeans
from sparkml.runtime.compat import to_arrow

# k-means landmarks: the centres of a sample of about this many rows per landmark, capped at this many
# values collected to the driver (2^23 float64: 64 MB), and this many Lloyd iterations (5: the test accuracy
# of 10 at 5k and 100k rows, ``benchmarks/bench_kernel_svc.py``, in half the time)
_KMEANS_OVERSAMPLE, _KMEANS_SAMPLE_ELEMENTS, _KMEANS_ITERS = 10, 1 << 23, 5
# k-means assigns rows to centres by float32 distances (twice as fast; ties within rounding are immaterial to
# where the centres land)
_ASSIGN = torch.float32
# sampled rows whose features estimate the diagonal of the rows' average phi phi^T (k-means landmarks)
_PRECONDITIONER_ROWS = 1000
# numLandmarks unset (``grow_landmarks``): the first count tried, and the sampled rows held out to measure the
# residual on; the most tried for n rows is AUTO_SCALE sqrt(n) ln(n), at least AUTO_FLOOR (``landmark_target``)
AUTO_START, AUTO_PROBE_ROWS = 250, 1000
AUTO_SCALE, AUTO_FLOOR = 1.5, 2000
# the held-out gain of more landmarks (``grow_landmarks(gain_tol=...)``): its stand-in classifier trains on this many
# of the sampled rows, and is measured up to this many landmarks (its cost grows as their square: at 1000 landmarks
# it takes about 0.3 s a class on 2 cores; a step beyond it would cost more than the smaller fit saves)
GAIN_TRAIN_ROWS, GAIN_MAX_LANDMARKS = 4000, 1000
# ... and is regularized at least as a C of this on its own rows, regParam >= 1 / (GAIN_MAX_C n_train): at the
# regParam of a fit of 1M rows at C = 1 (1e-6), 4000 rows fit 1000 landmarks' features almost freely and the held-out
# hinge rose from 500 to 1000 landmarks on the benchmarks' hard problem, which then stopped at 500 (84.5% held out
# against 92.7% at the target); 25 is what a fit of 100k rows at C = 1 gives it, where the choices were measured
GAIN_MAX_C = 25.0
# ... and scored on this many sampled rows (the residual on the first AUTO_PROBE_ROWS of them): on 1000 the standard
# error of the hinge's change from 500 to 1000 landmarks on hard data was about 0.012, and one draw in 1.6M rows saw
# it rise by 0.016 where it falls by 0.01 to 0.05 (the search stopped at 500: 84.6% held out); on 4000, every one of
# five draws saw it fall
GAIN_PROBE_ROWS = 4000
# ... and a doubling counts as a gain only when the held-out hinge falls by more than gain_tol plus this many standard
# errors of the fall (paired over the probe rows): on ten-class digits, 100k rows, the fall from 500 to 1000
# landmarks was 0.0035 +- 0.0015 in one draw and -0.003 to -0.001 in two others (a draw above 0.002 took the search to
# the target, 4000, and the fit from 13 s to over 10 minutes: 1.0 standard error above gain_tol); on the hard
# synthetic problem 0.034 to 0.051 +- 0.007 at 100k rows and 0.027 +- 0.012 at 5000 (2.0 above it)
GAIN_STANDARD_ERRORS = 1.5


def class_quotas(summary, m):
    """Landmarks per class label: about m in all, each class's share as in the data (at least one)."""
    share = summary.class_weights / summary.class_weights.sum()
    return {float(c): max(1, int(round(m * p))) for c, p in enumerate(share) if p > 0}


class FrameRows:
    """The training rows as a DataFrame (sparse vectors): each row keyed by Spark's xxhash64 of
    (seed, label, features), the rows below their class's bound collected through Arrow (several times faster than
    Rows of vectors). ``weight_col``: the rows' weights (1 without it); rows of weight 0 are left out."""

    def __init__(self, dataset, features_col, label_col, weight_col=None):
        self.dataset, self.features_col, self.label_col, self.weight_col = dataset, features_col, label_col, weight_col

    def keyed(self, bounds, seed, n_features):
        """(x float64 (n', d), labels, keys, weights) of the rows of positive weight below their class's bound
        (``bounds``: {label: fraction}; None: every row)."""
        from pyspark.ml.functions import vector_to_array

        label, x = F.col(self.label_col).cast("double"), vector_to_array(F.col(self.features_col), "float64")
        key = F.xxhash64(F.lit(int(seed)), label, x).bitwiseAND(F.lit((1 << 53) - 1)).cast("double") / float(1 << 53)
        weight = F.col(self.weight_col).cast("double") if self.weight_col else F.lit(1.0)
        rows = self.dataset.select(x.alias("x"), label.alias("label"), key.alias("u"), weight.alias("w"))
        if self.weight_col:
            rows = rows.where(F.col("w") > 0)
        if bounds is not None:
            bound = F.lit(0.0)
            for c, fraction in bounds.items():
                bound = F.when(F.col("label") == c, F.lit(fraction)).otherwise(bound)
            rows = rows.where(F.col("u") < bound)
        table = to_arrow(rows)
        labels, keys, weights = (table.column(c).to_numpy() for c in ("label", "u", "w"))
        x = table.column("x").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        return x.reshape(len(labels), n_features), labels, keys, weights


class BlockRows:
    """The training rows as a conversion's dense blocks (``sparkml.data.row_sample.sample_blocks``): keyed by a hash
    of (seed, label, the stored features) where they are stored, one Python job that returns only the rows below
    their class's bound (no pass of the JVM over the DataFrame). Their weights are the training weights
    (``weightCol`` times ``classWeight``: within a class, the same k-means centres as ``weightCol`` alone)."""

    def __init__(self, data):
        self.data = data

    def keyed(self, bounds, seed, n_features):
        from sparkml.data.row_sample import sample_blocks

        x, labels, weights, keys = sample_blocks(self.data, bounds, seed)
        return x, labels, keys, weights


def sample_landmarks(rows, summary, quota, seed):
    """(rows, labels, weights): up to ``quota[c]`` training rows of each class c as a float64 (m', d)
    array, their labels and their weights; every row when the data has at most sum(quota) rows. Rows of weight 0
    are not training rows and are never sampled. ``rows``: ``BlockRows`` or ``FrameRows``.

    Each row gets a pseudo-random key u in [0, 1), a hash of (seed, label, features): the same rows
    are picked whatever the partitioning or row order (a ``rand``-based sample is not, after a
    shuffle). Rows with u below a bound that gives about 1.5 times each class's quota are collected, and the quota
    of each class is filled with its smallest keys; the rows are in key order.
    """
    everything = summary.rows <= sum(quota.values())
    bounds = None
    if not everything:
        share = summary.class_weights / summary.class_weights.sum()
        bounds = {
            float(c): min(1.0, (1.5 * q + 3 * q**0.5 + 10) / max(1.0, share[int(c)] * summary.rows))
            for c, q in quota.items()
        }
    x, labels, keys, weights = rows.keyed(bounds, seed, summary.n_features)
    order = np.lexsort((labels, keys))  # key order, ties by label
    if not everything:
        rank = np.empty(len(order), dtype=np.int64)  # each row's place among its class's rows in key order
        for c in np.unique(labels):
            members = order[labels[order] == c]
            rank[members] = np.arange(len(members))
        quotas = np.array([quota.get(float(c), 0) for c in labels])
        order = order[rank[order] < quotas[order]]
    return (
        np.ascontiguousarray(x[order], dtype=np.float64),
        labels[order].astype(np.float64),
        weights[order].astype(np.float64),
    )


def choose_landmarks(rows, summary, m, selection, seed):
    """(landmarks, rows): about m landmarks as a float64 (m', d) array, each class's share as in the
    data, every training row when there are at most m; and training rows that represent the data
    when the landmarks do not (else None), for the Newton-CG preconditioner's shape; sampled from ``rows``
    (``BlockRows`` or ``FrameRows``).

    ``selection="random"``: the sampled rows themselves (``sample_landmarks``). ``"kmeans"``: a sample
    ``_KMEANS_OVERSAMPLE`` times larger (fewer when wide, see ``_kmeans_sample_factor``), and per class
    the centres of Lloyd's k-means over that class's sample (``sparkml.gpu.kmeans``, weighted by the rows' weights),
    as many as its quota. Rows of weight 0 are never landmarks nor pull a centre.
    Centres sit closer together than rows, so their own features misstate the rows' average
    phi phi^T; the first ``_PRECONDITIONER_ROWS`` sampled rows (a hash-random subset, classes in
    proportion) are returned for it.
    """
    quota = class_quotas(summary, m)
    if selection == "random" or summary.rows <= m:
        return sample_landmarks(rows, summary, quota, seed)[0], None
    factor = _kmeans_sample_factor(m, summary.n_features)
    sample, labels, weights = sample_landmarks(rows, summary, {c: q * factor for c, q in quota.items()}, seed)
    centres = [
        kmeans(
            sample[labels == c], q, iters=_KMEANS_ITERS, seed=seed, weights=weights[labels == c], assign_dtype=_ASSIGN
        ).numpy()
        for c, q in quota.items()
        if np.any(labels == c)
    ]
    return np.concatenate(centres), sample[:_PRECONDITIONER_ROWS]


def _kmeans_sample_factor(m, d):
    """Rows sampled per k-means centre: ``_KMEANS_OVERSAMPLE``, fewer when the sample would pass
    ``_KMEANS_SAMPLE_ELEMENTS`` values (wide data), at least 2."""
    return int(max(2, min(_KMEANS_OVERSAMPLE, _KMEANS_SAMPLE_ELEMENTS // max(1, m * d))))


def landmark_target(n, cap):
    """The most landmarks ``grow_landmarks`` tries for n training rows: ``AUTO_SCALE`` sqrt(n) ln(n), at least
    ``AUTO_FLOOR``, at most ``cap`` and n.

    Why sqrt(n) log(n): with landmarks sampled from the rows, on the order of sqrt(n) log(n) of them already
    give the learning rate of the exact kernel machine (Rudi, Camoriano and Rosasco, "Less is more: Nystrom
    computational regularization", NIPS 2015); fewer cost accuracy on data whose kernel spectrum decays
    slowly (many informative features), where the residual never falls to ``landmarkTol``. The floor: below
    it the m^3 eigendecomposition and the m-wide passes are cheaper than Spark's own overhead, so a data set
    of at most 2000 rows is all landmarks (the exact kernel machine). 1.5 and 2000 are measured, not derived
    (``benchmarks/bench_kernel_svc.py``: within half a point of SVC at 5k and 100k rows)."""
    n = max(1, int(n))
    return int(min(int(cap), n, max(AUTO_FLOOR, math.ceil(AUTO_SCALE * math.sqrt(n) * math.log(n)))))


def grow_landmarks(rows, summary, selection, seed, residual, tol, cap, gain=None, gain_tol=0.0):
    """(landmarks, rows, trail) as ``choose_landmarks`` gives them, for a number of landmarks chosen here:
    m = ``AUTO_START``, 2 AUTO_START, 4 AUTO_START, ... up to ``landmark_target(n, cap)``, stopping at the
    first m whose landmarks leave a relative residual ``residual(landmarks, probe)``
    (``sparkml.gpu.nystroem.residual_fraction``) of at most ``tol`` on ``AUTO_PROBE_ROWS`` rows sampled from ``rows``
    (``BlockRows`` or ``FrameRows``) that no
    landmark comes from (a kernel the landmarks already capture: low-dimensional data, a wide kernel); with ``gain``
    the probe holds ``GAIN_PROBE_ROWS`` rows, and the residual is measured on the first ``AUTO_PROBE_ROWS``.

    ``gain``: None, or ``gain(train, train_labels, probe, probe_labels)`` -> a measure whose ``loss(landmarks)`` is
    what landmarks buy a classifier (``sparkml.gpu.landmark_gain.HeldOutHinge``: the held-out mean hinge, on the
    probe, of a squared-hinge SVM on their Nystroem features, each step warm-started from the last). It is built
    once, on the first ``GAIN_TRAIN_ROWS`` sampled rows that are not probe rows, and measured at each step up to
    ``GAIN_MAX_LANDMARKS`` landmarks; when doubling the landmarks lowers it by at most ``gain_tol`` (an absolute
    amount: the mean hinge bounds the error rate, so 0.002 is about 0.2 points of accuracy) plus
    ``GAIN_STANDARD_ERRORS`` standard errors of the fall (the probe rows' paired changes, where the measure reports
    its ``row_hinges``), the search stops and keeps the last step's landmarks: the doubling bought nothing that the
    probe's noise does not explain (easy data, where the classifier's boundary is simple even though the kernel's
    residual stays high). Past ``GAIN_MAX_LANDMARKS`` a doubling is not priced, and only the residual or the target
    stops the search.

    ``trail``: [(m, residual, held-out hinge)], the residual None at the target (not measured: it ends the search
    anyway), the hinge None where it is not measured; after a stop on the gain, the last entry is the step that
    bought nothing and the landmarks are those of the entry before it.

    One sample serves the steps the stand-in prices (collected for their landmarks plus the probe rows), and a
    second, larger one the steps beyond them (for the target's landmarks; taken only when the search goes on past
    ``GAIN_MAX_LANDMARKS``): a step's landmarks come from the first rows of each class's share of it (hash-random,
    as ``sample_landmarks``; the smaller sample's first rows are the larger one's), as ``choose_landmarks`` would
    pick them for that m; the probe leaves each class what its landmarks need at the sample's last step, or half its
    sampled rows when there are fewer. A data set of at most the target's
    rows is all landmarks (the exact kernel machine)."""
    cap = landmark_target(summary.rows, max(1, int(cap)))
    if summary.rows <= cap or cap <= AUTO_START:  # every row, or the cap itself
        m = min(summary.rows, cap)
        landmarks, represent = choose_landmarks(rows, summary, m, selection, seed)
        return landmarks, represent, [(len(landmarks), None, None)]
    factor = 1 if selection == "random" else _kmeans_sample_factor(cap, summary.n_features)
    gaining = gain is not None and gain_tol > 0
    probe_quota = class_quotas(summary, AUTO_PROBE_ROWS)
    gain_quota = class_quotas(summary, GAIN_PROBE_ROWS if gaining else AUTO_PROBE_ROWS)
    # the steps the stand-in prices first, from a sample for them only: easy data stops there, without collecting
    # the pool the target's landmarks would need (a third of 100k rows at 4000 landmarks)
    first = min(cap, GAIN_MAX_LANDMARKS) if gaining else cap

    train_quota = class_quotas(summary, GAIN_TRAIN_ROWS) if gaining else {}

    def search_sample(m):
        """(probe, its labels, pool, its labels, its weights) of one sample for the steps up to m landmarks: the
        k-means pool at m, and at least the stand-in's training rows."""
        need = {c: max(q * factor, train_quota.get(c, 0)) for c, q in class_quotas(summary, m).items()}
        quota = {c: n + gain_quota[c] for c, n in need.items()}
        sample, labels, weights = sample_landmarks(rows, summary, quota, seed)
        held = np.zeros(len(labels), dtype=bool)  # the probe: the largest keys of each class's sample
        for c, q in probe_quota.items():
            members = np.flatnonzero(labels == c)
            kept = min(need.get(c, 0), len(members) // 2)  # for the landmarks: what m needs, or half
            # the stand-in's larger probe only from rows the landmarks do not need
            take = min(max(q, min(gain_quota[c], len(members) - need.get(c, 0))), len(members) - kept)
            held[members[len(members) - take :]] = True
        return sample[held], labels[held], sample[~held], labels[~held], weights[~held]

    probe, probe_labels, pool, pool_labels, pool_weights = search_sample(first)
    stand_in = None
    if gaining:
        train = slice(0, GAIN_TRAIN_ROWS)  # the pool is in key order: a hash-random subset, classes in proportion
        stand_in = gain(pool[train], pool_labels[train], probe, probe_labels)
    trail, m, last = [], AUTO_START, None
    while True:
        if m > first:  # past the stand-in's steps: the sample for the target (its first rows are the same rows)
            probe, probe_labels, pool, pool_labels, pool_weights = search_sample(cap)
            first = cap
        landmarks = _step_landmarks(summary, m, selection, factor, seed, pool, pool_labels, pool_weights)
        r = None if m >= cap else residual(landmarks, probe[:AUTO_PROBE_ROWS])  # the target ends it whatever it is
        h = stand_in.loss(landmarks) if stand_in is not None and m < cap and m <= GAIN_MAX_LANDMARKS else None
        rows_h = getattr(stand_in, "row_hinges", None) if h is not None else None  # each probe row's hinge
        trail.append((len(landmarks), r, h))
        preconditioner = None if selection == "random" else pool[:_PRECONDITIONER_ROWS]
        if h is not None and last is not None and last[1] - h <= gain_tol + _fall_noise(last[2], rows_h):
            return last[0], preconditioner, trail  # twice the landmarks bought nothing we can tell from noise
        if m >= cap or r <= tol:
            return landmarks, preconditioner, trail
        last = (landmarks, h, rows_h) if h is not None else None
        m = min(2 * m, cap)


def _fall_noise(before, after):
    """``GAIN_STANDARD_ERRORS`` standard errors of the change in the held-out mean hinge between two steps over the same
    probe rows (their per-row hinges; 0 where a stand-in does not report them)."""
    if before is None or after is None or len(after) < 2:
        return 0.0
    change = np.asarray(after, dtype=np.float64) - np.asarray(before, dtype=np.float64)
    return GAIN_STANDARD_ERRORS * float(np.std(change, ddof=1)) / math.sqrt(len(change))


def _step_landmarks(summary, m, selection, factor, seed, pool, pool_labels, pool_weights):
    """``grow_landmarks``' landmarks at m: each class's quota of the first pool rows of that class, or the
    k-means centres of ``factor`` times as many."""
    landmarks = []
    for c, q in class_quotas(summary, m).items():
        members = pool_labels == c
        if not np.any(members):
            continue
        if selection == "random":
            landmarks.append(pool[members][:q])
        else:
            landmarks.append(
                kmeans(
                    pool[members][: q * factor],
                    q,
                    iters=_KMEANS_ITERS,
                    seed=seed,
                    weights=pool_weights[members][: q * factor],
                    assign_dtype=_ASSIGN,
                ).numpy()
            )
    return np.concatenate(landmarks)
