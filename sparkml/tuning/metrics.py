"""The evaluators' metrics from sufficient statistics, each computed as Spark's ``mllib.evaluation`` computes it.

No pyspark: the statistics come from one pass over the validation fold (``sparkml.tuning.batches``) and the
formulas below are Spark's own, term for term, so a metric equals the evaluator's on ``model.transform`` up to
the rounding of the sums.

Regression (``RegressionMetrics`` over the weighted vectors (y, y - p, p) of label y and prediction p, through
``Statistics.colStats``; W = sum w):

    SSerr = sum w (y - p)^2                  mse = SSerr / W,  rmse = sqrt(mse),  mae = sum w |y - p| / W
    SSy   = sum w y^2                        r2 (throughOrigin) = 1 - SSerr / SSy
    SStot = var_w(y) (W - 1)                 r2 = 1 - SSerr / SStot
    SSreg = sum w p^2 + ybar^2 W - 2 ybar pbar W,   var = SSreg / W

with var_w the colStats unbiased weighted variance sum w (y - ybar)^2 / (W - sum w^2 / W) (0 where that
denominator is not positive). So with weights SStot is not sum w (y - ybar)^2; Spark's formula is kept.

Multiclass (``MulticlassMetrics``): the weighted confusion entries C[(label, prediction)], one per pair seen
(a zero weight still makes an entry, so a label whose rows all weigh 0 is a class, with a recall of 0/0 = NaN,
as in Spark). The labels are the labels seen; for a label l, with N_l = sum_p C[(l, p)] and N = sum_l N_l:

    tp(l) = C[(l, l)]    fp(l) = sum_{y != l} C[(y, l)]
    precision(l) = tp / (tp + fp) (0 when tp + fp = 0)     recall(l) = tp / N_l     fpr(l) = fp / (N - N_l)
    F_beta(l) = (1 + b^2) P R / (b^2 P + R) (0 when P + R = 0)
    accuracy = sum_l tp(l) / N      weighted X = sum_l X(l) N_l / N      hammingLoss = sum_{y != p} C / N
    logLoss = sum w clip(-log q_y) / sum w,  q_y the probability of the row's label, -log(eps) when q_y < eps,
              -log1p(-eps) when q_y > 1 - eps

Division follows IEEE (x / 0 is +-inf or NaN), as the JVM's does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

REGRESSION_METRICS = ("rmse", "mse", "r2", "mae", "var")
MULTICLASS_METRICS = (
    "f1",
    "accuracy",
    "weightedPrecision",
    "weightedRecall",
    "weightedTruePositiveRate",
    "weightedFalsePositiveRate",
    "weightedFMeasure",
    "truePositiveRateByLabel",
    "falsePositiveRateByLabel",
    "precisionByLabel",
    "recallByLabel",
    "fMeasureByLabel",
    "hammingLoss",
    "logLoss",
)
BY_LABEL = tuple(m for m in MULTICLASS_METRICS if m.endswith("ByLabel"))


def _div(a, b) -> float:
    """a / b as the JVM divides doubles: x / 0 is +-inf, 0 / 0 NaN."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.float64(a) / np.float64(b))


@dataclass
class LabelMoments:
    """Weighted moments of the labels: W = sum w, W2 = sum w^2, mean and M2 = sum w (y - mean)^2 (merged by
    Chan's update, as the pass adds partitions), SSy = sum w y^2."""

    weight: float = 0.0
    weight_sq: float = 0.0
    mean: float = 0.0
    m2: float = 0.0
    sum_sq: float = 0.0

    def merge(self, other: LabelMoments) -> LabelMoments:
        total = self.weight + other.weight
        if other.weight == 0:
            return self
        if self.weight == 0:
            return LabelMoments(other.weight, other.weight_sq, other.mean, other.m2, other.sum_sq)
        delta = other.mean - self.mean
        return LabelMoments(
            total,
            self.weight_sq + other.weight_sq,
            self.mean + delta * other.weight / total,
            self.m2 + other.m2 + delta * delta * self.weight * other.weight / total,
            self.sum_sq + other.sum_sq,
        )

    @classmethod
    def of(cls, y, w) -> LabelMoments:
        """The moments of labels ``y`` weighted ``w`` (arrays)."""
        total = float(w.sum())
        if total == 0:
            return cls()
        mean = float((w * y).sum() / total)
        return cls(total, float((w * w).sum()), mean, float((w * (y - mean) ** 2).sum()), float((w * y * y).sum()))

    @property
    def variance(self) -> float:
        """colStats' unbiased weighted variance: M2 / (W - W2 / W), 0 where that denominator is not positive."""
        if self.weight == 0:
            return 0.0
        denominator = self.weight - self.weight_sq / self.weight
        return max(self.m2 / denominator, 0.0) if denominator > 0 else 0.0


# a model's regression sums: sum w e^2, sum w |e|, sum w p, sum w p^2 (e = y - p)
SQUARED_ERROR, ABSOLUTE_ERROR, PREDICTION, PREDICTION_SQ = range(4)
REGRESSION_SUMS = 4


def regression_metric(name: str, through_origin: bool, labels: LabelMoments, sums) -> float:
    """``RegressionEvaluator``'s ``name`` metric from the label moments and one model's ``sums``
    (``REGRESSION_SUMS`` values; module docstring)."""
    w = labels.weight
    ss_err = float(sums[SQUARED_ERROR])
    if name == "mse":
        return _div(ss_err, w)
    if name == "rmse":
        return math.sqrt(_div(ss_err, w))
    if name == "mae":
        return _div(sums[ABSOLUTE_ERROR], w)
    if name == "r2":
        if through_origin:
            return 1.0 - _div(ss_err, labels.sum_sq)
        return 1.0 - _div(ss_err, labels.variance * (w - 1))
    if name == "var":
        y_mean, p_mean = labels.mean, _div(sums[PREDICTION], w)
        ss_reg = float(sums[PREDICTION_SQ]) + y_mean * y_mean * w - 2 * y_mean * p_mean * w
        return _div(ss_reg, w)
    raise ValueError(f"unknown regression metric {name!r}")


class MetricUndefined(Exception):
    """Spark's evaluator fails on this metric here (a ``*ByLabel`` metric of a label the data lacks): the caller
    lets the stock evaluator raise its own error."""


@dataclass
class Confusion:
    """A model's weighted confusion entries {(label, prediction): weight} and its log-loss sums."""

    entries: dict[tuple[float, float], float]
    log_loss_sum: float = 0.0
    log_loss_weight: float = 0.0


def multiclass_metric(name: str, confusion: Confusion, metric_label: float = 0.0, beta: float = 1.0) -> float:
    """``MulticlassClassificationEvaluator``'s ``name`` metric from one model's ``confusion`` (module
    docstring). ``MetricUndefined`` where Spark's evaluator raises (a by-label metric of an unseen label)."""
    if name == "logLoss":
        return _div(confusion.log_loss_sum, confusion.log_loss_weight)
    entries = confusion.entries
    count_by_label: dict[float, float] = {}
    tp: dict[float, float] = {}
    fp: dict[float, float] = {}
    for (label, prediction), weight in entries.items():
        count_by_label[label] = count_by_label.get(label, 0.0) + weight
        if label == prediction:
            tp[label] = tp.get(label, 0.0) + weight
        else:
            tp.setdefault(label, 0.0)
            fp[prediction] = fp.get(prediction, 0.0) + weight
    total = sum(count_by_label.values())

    def precision(label):
        t, f = tp[label], fp.get(label, 0.0)
        return 0.0 if t + f == 0 else _div(t, t + f)

    def recall(label):
        return _div(tp[label], count_by_label[label])

    def false_positive_rate(label):
        return _div(fp.get(label, 0.0), total - count_by_label[label])

    def f_measure(label, b):
        p, r = precision(label), recall(label)
        b2 = b * b
        return 0.0 if p + r == 0 else _div((1 + b2) * p * r, b2 * p + r)

    def weighted(metric):
        return sum(_div(metric(label) * count, total) for label, count in count_by_label.items())

    if name in BY_LABEL:
        if metric_label not in count_by_label:
            raise MetricUndefined(f"label {metric_label} is not among the validation fold's labels")
        by_label = {
            "truePositiveRateByLabel": recall,
            "recallByLabel": recall,
            "falsePositiveRateByLabel": false_positive_rate,
            "precisionByLabel": precision,
            "fMeasureByLabel": lambda label: f_measure(label, beta),
        }
        return by_label[name](metric_label)
    if name == "accuracy":
        return _div(sum(tp.values()), total)
    if name == "hammingLoss":
        wrong = sum(weight for (label, prediction), weight in entries.items() if label != prediction)
        return _div(wrong, sum(entries.values()))
    if name in ("weightedRecall", "weightedTruePositiveRate"):
        return weighted(recall)
    if name == "weightedPrecision":
        return weighted(precision)
    if name == "weightedFalsePositiveRate":
        return weighted(false_positive_rate)
    if name == "f1":
        return weighted(lambda label: f_measure(label, 1.0))
    if name == "weightedFMeasure":
        return weighted(lambda label: f_measure(label, beta))
    raise ValueError(f"unknown multiclass metric {name!r}")
