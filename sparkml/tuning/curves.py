"""The areas under the ROC and precision-recall curves as pyspark's ``BinaryClassificationEvaluator`` computes
them (Spark's ``BinaryClassificationMetrics``), from one model's scores held on the driver.

Spark's computation, for (score s_i, label y_i, weight w_i):

1. one point per distinct score, in descending order of score, holding the weights of its positive
   (y > 0.5) and negative rows;
2. with ``numBins`` > 0 and at least 2 numBins distinct scores, consecutive points grouped ``g = distinct //
   numBins`` at a time (the group keeps its first score and adds its weights);
3. at each point the cumulative true-positive weight TP and false-positive weight FP (the rows scored at or
   above it), of P positive and N negative weight in all;
4. ROC: (FP/N, TP/P) with (0, 0) before the first point and (1, 1) after the last (a rate is 0 where its total
   is 0); PR: (TP/P, TP/(TP+FP)) with (0, precision of the first point) before it (precision is 1 where
   TP+FP is 0);
5. the area by the trapezoid rule: sum of (x2 - x1)(y1 + y2)/2 over consecutive points.

Step 2 is the one place where Spark's result depends on more than the scores: it groups within each partition
of its sorted RDD, restarting at partition boundaries drawn from a random sample, so its curve (and its own
result from one run to the next) varies by the few points at those boundaries. Here the sorted scores are one
partition; without down-sampling (fewer than 2 numBins distinct scores, or ``numBins`` 0) the result is
Spark's to the rounding of the sums.
"""

from __future__ import annotations

import numpy as np

METRICS = ("areaUnderROC", "areaUnderPR")


def curve_points(scores: np.ndarray, labels: np.ndarray, weights: np.ndarray, num_bins: int) -> tuple:
    """(cumulative positive weight, cumulative negative weight) at each point of the curve (steps 1-3), and the
    totals (P, N)."""
    order = np.argsort(-scores, kind="stable")
    s = scores[order]
    positive = labels[order] > 0.5
    w = weights[order]
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])  # the first row of each distinct score
    pos = np.add.reduceat(np.where(positive, w, 0.0), starts) if len(s) else np.zeros(0)
    neg = np.add.reduceat(np.where(positive, 0.0, w), starts) if len(s) else np.zeros(0)
    distinct = len(starts)
    grouping = distinct // num_bins if num_bins > 0 else 0
    if grouping >= 2:
        groups = np.arange(0, distinct, grouping)
        pos, neg = np.add.reduceat(pos, groups), np.add.reduceat(neg, groups)
    tp, fp = np.cumsum(pos), np.cumsum(neg)
    return tp, fp, float(pos.sum()), float(neg.sum())


def _trapezoid(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2.0))


def area(metric: str, scores: np.ndarray, labels: np.ndarray, weights: np.ndarray, num_bins: int) -> float:
    """``metric`` (areaUnderROC or areaUnderPR) of one model's scores, as Spark computes it (module docstring)."""
    tp, fp, p, n = curve_points(scores, labels, weights, num_bins)
    recall = tp / p if p != 0 else np.zeros_like(tp)
    if metric == "areaUnderROC":
        fpr = fp / n if n != 0 else np.zeros_like(fp)
        return _trapezoid(np.r_[0.0, fpr, 1.0], np.r_[0.0, recall, 1.0])
    if metric == "areaUnderPR":
        predicted = tp + fp
        with np.errstate(invalid="ignore", divide="ignore"):
            precision = np.where(predicted == 0, 1.0, tp / predicted)
        first = precision[0] if len(precision) else 1.0
        return _trapezoid(np.r_[0.0, recall], np.r_[first, precision])
    raise ValueError(f"unknown metric {metric!r}: one of {METRICS}")
