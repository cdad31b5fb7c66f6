"""Predictions brought to the driver as numpy arrays, and the curves of a retraining report: ROC,
confusion matrix, residuals. Plain numpy (``scores`` aside), so they are checked against scikit-learn
without Spark; `jobs.report_figures` draws them and `jobs.report` writes the report.
"""

import math

import numpy as np

TASKS = ("binary", "multiclass", "regression")


def scores(
    pred_df,
    task,
    label_col,
    *,
    prediction_col="prediction",
    raw_col="rawPrediction",
    probability_col="probability",
    weight_col=None,
    max_rows=100_000,
    seed=0,
):
    """The label, prediction and weight of a predictions DataFrame as float64 numpy arrays, plus what
    the task's figure needs: ``"score"`` for "binary" (P(label=1) from ``probability_col`` when the
    frame has it, else ``rawPrediction[1]``; the ROC depends only on the order of the scores, so
    either gives the same curve) and ``"num_classes"`` for "multiclass" (the length of the
    probability / raw vector, at least max(label, prediction) + 1).

    At most ``max_rows`` rows reach the driver (one more, to find out): a larger frame is sampled
    with ``sample(fraction, seed)`` and then limited, the same rows for the same frame and seed. The
    figures are therefore of a sample; the report's metrics come from the evaluators over the whole
    holdout.
    ``weight`` is all ones without ``weight_col``.
    """
    from pyspark.ml.functions import vector_to_array
    from pyspark.sql import functions as F

    if task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}, got {task!r}")
    if max_rows < 1:
        raise ValueError(f"max_rows must be positive, got {max_rows}")
    columns = set(pred_df.columns)
    cols = [
        F.col(label_col).cast("double").alias("label"),
        F.col(prediction_col).cast("double").alias("prediction"),
        (F.col(weight_col).cast("double") if weight_col else F.lit(1.0)).alias("weight"),
    ]
    vector_col = next((c for c in (probability_col, raw_col) if c and c in columns), None)
    if task == "binary":
        if vector_col is None:
            raise ValueError(
                f"binary scores need a {probability_col!r} or {raw_col!r} column; the frame has {sorted(columns)}"
            )
        cols.append(vector_to_array(F.col(vector_col))[1].alias("score"))
    elif task == "multiclass" and vector_col is not None:
        cols.append(F.size(vector_to_array(F.col(vector_col))).alias("vector_size"))

    df = pred_df.select(*cols)
    pdf = df.limit(max_rows + 1).toPandas()  # one Spark job for a frame of at most max_rows rows
    if len(pdf) > max_rows:  # the first rows would be a biased picture (one partition): sample instead
        total = df.count()
        # three standard deviations (binomial, about sqrt(max_rows)) over max_rows: the sample nearly
        # always has max_rows rows to keep, and the limit cuts few (a slight bias to early partitions)
        fraction = min(1.0, (max_rows + 3.0 * math.sqrt(max_rows) + 10.0) / total)
        pdf = df.sample(withReplacement=False, fraction=fraction, seed=seed).limit(max_rows).toPandas()

    out = {name: pdf[name].to_numpy(dtype=np.float64) for name in ("label", "prediction", "weight")}
    if task == "binary":
        out["score"] = pdf["score"].to_numpy(dtype=np.float64)
    elif task == "multiclass":
        sizes = [int(pdf["vector_size"].max())] if "vector_size" in pdf and len(pdf) else []
        seen = [int(np.nanmax(out[k])) + 1 for k in ("label", "prediction") if len(out[k])]
        out["num_classes"] = max(sizes + seen + [2])
    return out


# ---- curves ---------------------------------------------------------------------------------------------------


def _weights(n, weight):
    if weight is None:
        return np.ones(n)
    w = np.asarray(weight, dtype=np.float64).ravel()
    if w.shape != (n,):
        raise ValueError(f"weight has {w.size} entries for {n} rows")
    return w


def roc_curve(label, score, weight=None):
    """(fpr, tpr, auc) of a binary classifier: label 1 is the positive class, a higher score means
    more positive, each row counts with its weight (ones without one).

    For every threshold t among the distinct scores, taken from the highest down, the rows with
    score >= t are called positive: TPR(t) = (weight of positives among them) / (weight of all
    positives) and FPR(t) = (weight of negatives among them) / (weight of all negatives). Rows with
    the same score enter together (one point per distinct score, so ties make a diagonal step, not
    an optimistic staircase), the curve starts at (0, 0), ends at (1, 1), and points on a straight
    line between their neighbours are dropped. AUC is the trapezoidal area under those points,
    which equals the (weighted) probability that a random positive outscores a random negative,
    ties counting one half. This is what ``sklearn.metrics.roc_curve`` / ``roc_auc_score`` and
    Spark's ``BinaryClassificationMetrics`` compute; rows of weight 0 are left out, as sklearn does.
    Without positives or without negatives the rates are undefined: nan arrays and nan AUC.
    """
    y = np.asarray(label, dtype=np.float64).ravel()
    s = np.asarray(score, dtype=np.float64).ravel()
    if s.shape != y.shape:
        raise ValueError(f"label has {y.size} rows, score {s.size}")
    w = _weights(y.size, weight)
    keep = w != 0
    y, s, w = y[keep], s[keep], w[keep]
    order = np.argsort(-s, kind="mergesort")
    y, s, w = y[order], s[order], w[order]
    positive = (y == 1).astype(np.float64)
    # the last row of each run of equal scores: every row with that score is counted by then
    last = np.r_[np.flatnonzero(np.diff(s)), y.size - 1] if y.size else np.array([], dtype=int)
    tps = np.cumsum(positive * w)[last]
    fps = np.cumsum((1.0 - positive) * w)[last]
    if tps.size > 2:  # drop collinear points: the second differences of both coordinates vanish there
        corner = np.r_[True, np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), True]
        tps, fps = tps[corner], fps[corner]
    tps, fps = np.r_[0.0, tps], np.r_[0.0, fps]  # the curve starts at (0, 0): nothing called positive
    if tps[-1] <= 0 or fps[-1] <= 0:
        nan = np.full(tps.shape, np.nan)
        return nan, nan.copy(), math.nan
    fpr, tpr = fps / fps[-1], tps / tps[-1]
    auc = float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2.0))
    return fpr, tpr, auc


def confusion_matrix(label, prediction, num_classes, weight=None):
    """num_classes x num_classes (weighted) counts: row i, column j holds the rows of true class i
    predicted as j (sklearn's layout), so the diagonal is what the model got right. Classes are the
    integers 0 .. num_classes-1, as Spark's classifiers index them."""
    y = np.asarray(label, dtype=np.float64).ravel()
    p = np.asarray(prediction, dtype=np.float64).ravel()
    if p.shape != y.shape:
        raise ValueError(f"label has {y.size} rows, prediction {p.size}")
    k = int(num_classes)
    yi, pi = y.astype(np.int64), p.astype(np.int64)
    bad = (yi != y) | (pi != p) | (yi < 0) | (pi < 0) | (yi >= k) | (pi >= k)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"labels and predictions must be integers in [0, {k}); row {i} has label {y[i]}, prediction {p[i]}"
        )
    w = _weights(y.size, weight)
    return np.bincount(yi * k + pi, weights=w, minlength=k * k).reshape(k, k)


def residuals(label, prediction):
    """prediction - label: positive where the model overshoots."""
    return np.asarray(prediction, dtype=np.float64) - np.asarray(label, dtype=np.float64)
