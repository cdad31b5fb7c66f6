"""Statistics of the training set, gathered in the conversion pass (MLlib's Summarizer).

Executor side: ``PartitionStats`` accumulates one partition's weighted moments, label range and
histogram, and the counts of input problems, batch by batch. Driver side: ``summarize`` adds the
partitions' rows into one ``DatasetSummary`` (after ``data.checks.check_conversion`` has
refused bad input).
"""

from dataclasses import dataclass
from typing import Any

import numpy as np

MAX_CLASSES = 10_000  # a label above this is reported, not histogrammed
_MOMENT_ROWS = 1024
# the problems a partition counts, in the order they are reported (``base.validation``)
PROBLEM_KEYS = (
    "null_features",
    "invalid_sparse_features",
    "feature_sizes",
    "null_labels",
    "null_weights",
    "nonfinite_features",
    "nonfinite_labels",
    "negative_weights",
    "nonfinite_weights",
    "bad_offsets",
)


@dataclass
class DatasetSummary:
    """Weighted statistics of the training set (MLlib's Summarizer, computed in the conversion pass)."""

    rows: int
    n_features: int
    weight_sum: float
    weight_sq_sum: float
    mean: np.ndarray
    var_unbiased: np.ndarray  # (sum w x^2 - W mean^2) / (W - sum w^2 / W), as MLlib's Summarizer
    var_population: np.ndarray  # sum w x^2 / W - mean^2, as MLlib's WeightedLeastSquares
    label_mean: float
    label_var_unbiased: float
    label_var_population: float
    label_min: float
    label_max: float
    label_integral: bool
    class_weights: np.ndarray  # weighted label histogram (classification)

    @staticmethod
    def _variances(sum_x, sum_xx, w_sum, w_sq_sum):
        mean = sum_x / w_sum
        m2 = np.maximum(sum_xx - w_sum * mean * mean, 0.0)
        denom = w_sum - w_sq_sum / w_sum
        unbiased = m2 / denom if denom > 0 else np.zeros_like(m2)
        return mean, unbiased, m2 / w_sum


def _moments(x, w):
    """(sum w x, sum w x^2) per feature, float64, for dense (n, d) or CSR parts."""
    if isinstance(x, tuple):
        indptr, indices, values = x
        rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        wv = w[rows] * values.astype(np.float64)
        d = int(indices.max()) + 1 if len(indices) else 0
        return np.bincount(indices, wv, d), np.bincount(indices, wv * values, d)
    d = x.shape[1]
    s1, s2 = np.zeros(d), np.zeros(d)
    # float64 copies of 1024 rows and their squares in two reused buffers that stay in cache, rather
    # than converting large chunks into fresh arrays (cache misses dominate the conversion)
    c, cc = np.empty((_MOMENT_ROWS, d)), np.empty((_MOMENT_ROWS, d))
    for i in range(0, len(x), _MOMENT_ROWS):
        k = min(_MOMENT_ROWS, len(x) - i)
        np.copyto(c[:k], x[i : i + k])
        np.multiply(c[:k], c[:k], out=cc[:k])
        s1 += w[i : i + k] @ c[:k]
        s2 += w[i : i + k] @ cc[:k]
    return s1, s2


def _nonfinite_count(x):
    values = x[2] if isinstance(x, tuple) else x
    return int(values.size - np.count_nonzero(np.isfinite(values)))


class PartitionStats:
    """Statistics and input problems of one partition, accumulated batch by batch."""

    def __init__(self):
        self.rows, self.sizes = 0, set()
        self.problems = dict.fromkeys(
            (
                "null_features",
                "invalid_sparse_features",
                "null_labels",
                "null_weights",
                "nonfinite_features",
                "nonfinite_labels",
                "negative_weights",
                "nonfinite_weights",
                "bad_offsets",
            ),
            0,
        )
        self.sx: np.ndarray | None = None  # sum_i w_i x_i, sum_i w_i x_i^2 once a batch has features
        self.sxx: np.ndarray | None = None
        self.w_sum = self.w_sq_sum = self.wy_sum = self.wy_sq_sum = 0.0
        self.label_min, self.label_max, self.label_integral = np.inf, -np.inf, True
        self.hist: np.ndarray | None = np.zeros(0)  # weighted label histogram, while every label is a class index
        self.counts: np.ndarray | None = np.zeros(0)  # rows of each label, beside ``hist``

    def labels(self, y_col, w_col):
        """The batch's (y, w) as float64 (nulls filled), counting their problems."""
        p = self.problems
        p["null_labels"] += y_col.null_count
        p["null_weights"] += w_col.null_count
        y = np.asarray(y_col.fill_null(0.0).to_numpy(zero_copy_only=False), dtype=np.float64)
        w = np.asarray(w_col.fill_null(1.0).to_numpy(zero_copy_only=False), dtype=np.float64)
        finite = np.isfinite(y)
        p["nonfinite_labels"] += int(len(y) - np.count_nonzero(finite))
        p["negative_weights"] += int(np.count_nonzero(w < 0))
        p["nonfinite_weights"] += int(len(w) - np.count_nonzero(np.isfinite(w)))
        fy = y[finite]
        if len(fy):
            self.label_min, self.label_max = min(self.label_min, fy.min()), max(self.label_max, fy.max())
            self.label_integral &= bool(np.all(fy == np.round(fy)))
        self.rows += len(y)
        self.w_sum += float(w.sum())
        self.w_sq_sum += float(w @ w)
        self.wy_sum += float(w @ y)
        self.wy_sq_sum += float(w @ (y * y))
        if self.hist is not None and self.counts is not None:
            if len(fy) == len(y) and self.label_integral and self.label_min >= 0 and self.label_max < MAX_CLASSES:
                h: np.ndarray = np.bincount(y.astype(np.int64), w, len(self.hist))  # float64: weighted
                h[: len(self.hist)] += self.hist
                self.hist = h
                c: np.ndarray = np.bincount(y.astype(np.int64), None, len(h)).astype(np.float64)
                c[: len(self.counts)] += self.counts
                self.counts = c
            elif len(y):
                self.hist = self.counts = None  # NaN, fractional, negative or huge labels: reported, not histogrammed
        return y, w

    def features(self, x, w, sizes, nulls, invalid=0):
        """Add the batch's features (None when its rows are null, ragged or ``invalid`` sparse vectors)."""
        self.problems["null_features"] += int(nulls)
        self.problems["invalid_sparse_features"] += int(invalid)
        self.sizes |= sizes
        if x is None:
            return
        s1, s2 = _moments(x, w)
        d = max(self.sizes)
        if not (np.all(np.isfinite(s1)) and np.all(np.isfinite(s2))):
            # NaN/inf in x always reaches the weighted sums (0 * inf is NaN): count only then
            self.problems["nonfinite_features"] += _nonfinite_count(x)
        if self.sx is None or self.sxx is None:  # both, until the first batch with features
            self.sx, self.sxx = np.zeros(d), np.zeros(d)
        if len(s1) <= len(self.sx):
            self.sx[: len(s1)] += s1
            self.sxx[: len(s2)] += s2

    def has_problems(self):
        return any(self.problems.values()) or len(self.sizes) > 1

    def info(self):
        info: dict[str, Any] = {k: int(v) for k, v in self.problems.items()}
        if len(self.sizes) > 1:
            info["feature_sizes"] = sorted(int(s) for s in self.sizes)[:5]
        d = max(self.sizes) if self.sizes else 0
        info.update(
            rows=self.rows,
            n_features=d,
            label_min=float(self.label_min),
            label_max=float(self.label_max),
            label_integral=bool(self.label_integral),
            w_sum=self.w_sum,
            w_sq_sum=self.w_sq_sum,
            wy_sum=self.wy_sum,
            wy_sq_sum=self.wy_sq_sum,
        )
        hist = self.hist if self.hist is not None else np.zeros(0)
        counts = self.counts if self.counts is not None else np.zeros(0)
        info["n_classes_hist"] = len(hist)
        sx = self.sx if self.sx is not None else np.zeros(d)
        sxx = self.sxx if self.sxx is not None else np.zeros(d)
        return info, np.concatenate([sx, sxx, hist, counts]).astype(np.float64).tobytes()


def label_histograms(rows, infos):
    """(rows of each label 0, 1, ..., their weights) over the conversion's handle rows and their decoded
    ``info`` dicts (checked: at least one row, one feature size), or None when some label is not a class
    index below ``MAX_CLASSES`` (then no partition's histograms are whole)."""
    d = next(i["n_features"] for i in infos if i["rows"])
    if not all(i.get("n_classes_hist", 0) or not i["rows"] for i in infos):
        return None
    n = max(i["n_classes_hist"] for i in infos if i["rows"])
    counts, hist = np.zeros(n), np.zeros(n)
    for row, info in zip(rows, infos):
        if info["rows"]:
            k = info["n_classes_hist"]  # the moments: sum w x, sum w x^2 (d each), then k weights, k counts
            m = np.frombuffer(row[3], dtype=np.float64)[2 * d :]
            hist[:k] += m[:k]
            counts[:k] += m[k : 2 * k]
    return counts, hist


def summarize(rows, infos):
    """The ``DatasetSummary`` of the conversion's handle rows and their decoded ``info`` dicts
    (checked: at least one row, one feature size, a positive weight sum)."""
    d = next(i["n_features"] for i in infos if i["rows"])
    sum_x, sum_xx = np.zeros(d), np.zeros(d)
    for row, info in zip(rows, infos):
        if not info["rows"]:
            continue
        m = np.frombuffer(row[3], dtype=np.float64)
        sum_x += m[:d]
        sum_xx += m[d : 2 * d]
    histograms = label_histograms(rows, infos)
    live = [i for i in infos if i["rows"]]
    w_sum = sum(i["w_sum"] for i in live)
    w_sq = sum(i["w_sq_sum"] for i in live)
    mean, var_u, var_p = DatasetSummary._variances(sum_x, sum_xx, w_sum, w_sq)
    y_mean, y_var_u, y_var_p = DatasetSummary._variances(
        np.array([sum(i["wy_sum"] for i in live)]), np.array([sum(i["wy_sq_sum"] for i in live)]), w_sum, w_sq
    )
    return DatasetSummary(
        rows=sum(i["rows"] for i in live),
        n_features=d,
        weight_sum=w_sum,
        weight_sq_sum=w_sq,
        mean=mean,
        var_unbiased=var_u,
        var_population=var_p,
        label_mean=float(y_mean[0]),
        label_var_unbiased=float(y_var_u[0]),
        label_var_population=float(y_var_p[0]),
        label_min=min(i["label_min"] for i in live),
        label_max=max(i["label_max"] for i in live),
        label_integral=all(i["label_integral"] for i in live),
        class_weights=histograms[1] if histograms is not None else np.zeros(0),
    )
