"""A report per retraining run that reads without MLflow's UI: report.md plus PNG figures.

    curves = {"candidate": scores(cand_pred, "binary", "label"), "champion": scores(champ_pred, "binary", "label")}
    pngs = figures("binary", curves, objective_history=history)
    write(run_dir, report_dict, pngs)          # -> ["report.md", "objective.png", "roc.png"]

``scores`` brings (a sample of) a predictions DataFrame to the driver as numpy arrays; ``roc_curve``
and ``confusion_matrix`` are plain numpy, so they are checked against scikit-learn without Spark;
``figures`` draws the objective per iteration and, by task, the ROC (binary), the confusion matrices
(multiclass) or the residuals (regression) of candidate and champion; ``markdown`` renders the
report dict (schema in its docstring) and ``write`` puts report.md and the PNGs in a folder.

The figures use matplotlib's Agg canvas directly (``matplotlib.figure.Figure``, never pyplot): no
display is needed, the process-wide backend is left as it is (a notebook importing this keeps its
own), and no figure is registered anywhere that would have to be closed. Without matplotlib,
``figures`` returns ``{}`` and the report simply has no pictures.
"""
import io
import math
import numbers
import os

import numpy as np

TASKS = ("binary", "multiclass", "regression")
MISSING = "—"
_COLORS = {"candidate": "tab:blue", "champion": "tab:orange"}
_SCATTER_POINTS = 20_000  # per model in the residual scatter: more only blurs the cloud and slows Agg


# ---- predictions -> numpy ------------------------------------------------------------------------------------

def scores(pred_df, task, label_col, *, prediction_col="prediction", raw_col="rawPrediction",
           probability_col="probability", weight_col=None, max_rows=100_000, seed=0):
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
    cols = [F.col(label_col).cast("double").alias("label"),
            F.col(prediction_col).cast("double").alias("prediction"),
            (F.col(weight_col).cast("double") if weight_col else F.lit(1.0)).alias("weight")]
    vector_col = next((c for c in (probability_col, raw_col) if c and c in columns), None)
    if task == "binary":
        if vector_col is None:
            raise ValueError(f"binary scores need a {probability_col!r} or {raw_col!r} column; "
                             f"the frame has {sorted(columns)}")
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
        raise ValueError(f"labels and predictions must be integers in [0, {k}); row {i} has "
                         f"label {y[i]}, prediction {p[i]}")
    w = _weights(y.size, weight)
    return np.bincount(yi * k + pi, weights=w, minlength=k * k).reshape(k, k)


def residuals(label, prediction):
    """prediction - label: positive where the model overshoots."""
    return np.asarray(prediction, dtype=np.float64) - np.asarray(label, dtype=np.float64)


# ---- figures --------------------------------------------------------------------------------------------------

def _matplotlib_figure():
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return None
    return Figure


def _png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png")  # Figure without pyplot: rendered by the Agg canvas
    return buf.getvalue()


def _models(curves, *needed):
    """(name, scores) of candidate then champion, for those present with every key in ``needed``."""
    curves = curves or {}
    return [(name, curves[name]) for name in ("candidate", "champion")
            if curves.get(name) is not None and all(curves[name].get(k) is not None for k in needed)
            and len(curves[name]["label"])]


def objective_figure(Figure, history):
    """The objective per iteration; beside it, objective - min on a log scale, which shows the
    convergence rate where the left panel has long gone flat."""
    h = np.asarray([math.nan if x is None else x for x in history], dtype=np.float64).ravel()
    iteration = np.flatnonzero(np.isfinite(h))  # non-finite values are left out, the others keep their place
    h = h[iteration]
    if h.size < 2:
        return None
    gap = h - h.min()
    log_panel = np.count_nonzero(gap > 0) >= 2
    fig = Figure(figsize=(9 if log_panel else 5, 3.4), dpi=100)
    axes = fig.subplots(1, 2 if log_panel else 1, squeeze=False)[0]
    axes[0].plot(iteration, h, marker=".")
    axes[0].set(xlabel="iteration", ylabel="objective", title="objective per iteration")
    if log_panel:
        axes[1].semilogy(iteration[gap > 0], gap[gap > 0], marker=".", color="tab:green")
        axes[1].set(xlabel="iteration", ylabel="objective - min", title="distance to the final minimum")
    for ax in axes:
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def roc_figure(Figure, curves):
    """ROC curves of candidate and champion on one plot, AUC in the legend, chance as a diagonal."""
    models = _models(curves, "label", "score")
    if not models:
        return None
    fig = Figure(figsize=(5, 4.6), dpi=100)
    ax = fig.subplots()
    for name, s in models:
        fpr, tpr, auc = roc_curve(s["label"], s["score"], s.get("weight"))
        ax.plot(fpr, tpr, color=_COLORS[name], label=f"{name} (AUC {auc:.4f})")
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="chance")
    ax.set(xlim=(0, 1), ylim=(0, 1.01), xlabel="false positive rate", ylabel="true positive rate",
           title="ROC on the holdout (sample)")
    ax.set_aspect("equal")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    return fig


def _count_text(v):
    return f"{int(round(v))}" if abs(v - round(v)) < 1e-9 else f"{v:.1f}"


def confusion_figure(Figure, curves):
    """Confusion matrices of candidate and champion side by side (rows: true class, columns:
    predicted), the (weighted) count in each cell."""
    models = _models(curves, "label", "prediction")
    if not models:
        return None
    k = max(int(s.get("num_classes") or 0) for _, s in models)
    k = max([k] + [int(np.max(s[c])) + 1 for _, s in models for c in ("label", "prediction")])
    size = min(4.5, 1.2 + 0.45 * k)
    fig = Figure(figsize=(size * len(models) + 0.6, size + 0.4), dpi=100)
    axes = fig.subplots(1, len(models), squeeze=False)[0]
    for ax, (name, s) in zip(axes, models):
        cm = confusion_matrix(s["label"], s["prediction"], k, s.get("weight"))
        ax.imshow(cm, cmap="Blues", vmin=0)
        if k <= 20:
            ax.set_xticks(range(k))
            ax.set_yticks(range(k))
        if k <= 12:
            top = cm.max() if cm.size else 0
            for i in range(k):
                for j in range(k):
                    ax.text(j, i, _count_text(cm[i, j]), ha="center", va="center", fontsize=8,
                            color="white" if top and cm[i, j] > top / 2 else "black")
        accuracy = np.trace(cm) / cm.sum() if cm.sum() else math.nan
        ax.set(xlabel="predicted class", ylabel="true class", title=f"{name} (accuracy {accuracy:.4f})")
    fig.tight_layout()
    return fig


def residual_figure(Figure, curves):
    """Residual (prediction - label) against the prediction, and the residuals' histogram, for
    candidate and champion: a trend in the scatter is bias the metrics average away."""
    models = _models(curves, "label", "prediction")
    if not models:
        return None
    fig = Figure(figsize=(10, 4), dpi=100)
    scatter, hist = fig.subplots(1, 2)
    res = {name: residuals(s["label"], s["prediction"]) for name, s in models}
    finite = np.concatenate([r[np.isfinite(r)] for r in res.values()])
    bins = np.histogram_bin_edges(finite, bins=50) if finite.size else 10
    for name, s in models:
        r, p = res[name], np.asarray(s["prediction"], dtype=np.float64)
        idx = np.arange(r.size)
        if r.size > _SCATTER_POINTS:  # evenly spaced rows: deterministic, and the sample is already shuffled
            idx = np.linspace(0, r.size - 1, _SCATTER_POINTS).astype(np.int64)
        scatter.scatter(p[idx], r[idx], s=4, alpha=0.35, color=_COLORS[name], label=name, linewidths=0,
                        zorder=3 if name == "candidate" else 2)  # the candidate on top
        rmse = float(np.sqrt(np.average(r ** 2, weights=s.get("weight")))) if r.size else math.nan
        hist.hist(r, bins=bins, weights=s.get("weight"), histtype="step", linewidth=1.5,
                  color=_COLORS[name], label=f"{name} (rmse {rmse:.4f})")
    scatter.axhline(0.0, color="grey", linestyle="--", linewidth=1)
    scatter.set(xlabel="prediction", ylabel="prediction - label", title="residuals (sample)")
    hist.axvline(0.0, color="grey", linestyle="--", linewidth=1)
    hist.set(xlabel="prediction - label", ylabel="rows (weighted)", title="residual distribution")
    for ax in (scatter, hist):
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    return fig


_TASK_FIGURES = {"binary": ("roc.png", roc_figure), "multiclass": ("confusion.png", confusion_figure),
                 "regression": ("residuals.png", residual_figure)}


def figures(task, curves, objective_history=None):
    """PNG bytes by file name: "objective.png" (with ``objective_history``) and the task's figure,
    "roc.png", "confusion.png" or "residuals.png", of ``curves = {"candidate": scores(...),
    "champion": scores(...) or None}``. A figure whose data is missing (no champion: only the
    candidate is drawn; no candidate either, or fewer than 2 objective values: no figure) is left
    out, and without matplotlib the result is ``{}``: missing pictures never fail a run."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {', '.join(TASKS)}, got {task!r}")
    Figure = _matplotlib_figure()
    if Figure is None:
        return {}
    name, build = _TASK_FIGURES[task]
    drawn = {"objective.png": None if objective_history is None else objective_figure(Figure, objective_history),
             name: build(Figure, curves)}
    out = {}
    for name, fig in drawn.items():
        if fig is not None:
            out[name] = _png(fig)
    return out


# ---- report.md ------------------------------------------------------------------------------------------------

def _num(v, digits=4):
    """A cell: floats with ``digits`` decimals, ints as they are, None as "—", text escaped."""
    if v is None:
        return MISSING
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, numbers.Integral):  # numpy integers too
        return str(int(v))
    if isinstance(v, numbers.Real):
        v = float(v)
        return f"{v:.{digits}f}" if math.isfinite(v) else str(v)
    return _text(v)


def _text(v):
    """Free text for a table cell or line: pipes escaped, newlines folded, None as "—"."""
    if v is None or v == "":
        return MISSING
    return " ".join(str(v).split()).replace("|", "\\|")


def _code(v):
    return MISSING if v is None or v == "" else f"`{str(v).replace('`', '')}`"


def _as_float(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _min_change(row):
    parts = []
    if row.get("min_absolute_change") is not None:
        parts.append(f"abs {_num(row['min_absolute_change'])}")
    if row.get("min_relative_change") is not None:
        parts.append(f"rel {_num(row['min_relative_change'])}")
    return ", ".join(parts) or MISSING


def _gate_failures(row):
    """The row's own failure sentences; without them, the failed threshold from the numbers."""
    if row.get("failures"):
        return [_text(f) for f in row["failures"]]
    cand, threshold = _as_float(row.get("candidate")), _as_float(row.get("threshold"))
    higher = row.get("greater_is_better", True)
    if cand is not None and threshold is not None and (cand < threshold if higher else cand > threshold):
        side = "below" if higher else "above"
        return [f"{_text(row.get('metric'))} {_num(cand)} is {side} the threshold {_num(threshold)}"]
    return ["failed"]


def _gate_table(gate):
    lines = ["| Metric | Direction | Candidate | Champion | Threshold | Min change | Result |",
             "|---|---|---:|---:|---:|---|---|"]
    for row in gate:
        row = row or {}
        higher = row.get("greater_is_better")
        direction = MISSING if higher is None else ("higher is better" if higher else "lower is better")
        passed = row.get("passed")
        result = MISSING if passed is None else ("pass" if passed else "**FAIL**: " + "; ".join(_gate_failures(row)))
        lines.append(f"| {_text(row.get('metric'))} | {direction} | {_num(row.get('candidate'))} | "
                     f"{_num(row.get('champion'))} | {_num(row.get('threshold'))} | {_min_change(row)} | {result} |")
    return lines


def _metrics_table(candidate, champion):
    names = list(candidate) + [m for m in champion if m not in candidate]
    lines = ["| Metric | Candidate | Champion | Candidate - champion |", "|---|---:|---:|---:|"]
    for m in names:
        c, h = candidate.get(m), champion.get(m)
        cf, hf = _as_float(c), _as_float(h)
        change = MISSING if cf is None or hf is None else f"{cf - hf:+.4f}"
        lines.append(f"| {_text(m)} | {_num(c)} | {_num(h)} | {change} |")
    return lines


def _warm_start_line(ws):
    if not ws:
        return f"**Warm start:** {MISSING}"
    used = ws.get("used")
    head = MISSING if used is None else ("yes" if used else "no")
    if used and ws.get("from_version") is not None:
        head += f", from version {_text(ws['from_version'])}"
    reason = f" ({_text(ws['reason'])})" if ws.get("reason") else ""
    return f"**Warm start:** {head}{reason}"


def _training_line(tr):
    rows = tr.get("rows") or {}
    seconds = _as_float(tr.get("seconds"))
    return (f"**Training:** {_text(tr.get('estimator'))}, {_num(tr.get('iterations'))} iterations, "
            f"{MISSING if seconds is None else f'{seconds:.1f}'} s; rows: train {_num(rows.get('train'))}, "
            f"test {_num(rows.get('test'))}")


def markdown(report):
    """report.md from a JSON-able dict; every key may be missing or None (shown as "—"):

        {"title": str, "model_name": str, "window": str,
         "decision": {"outcome": "promoted" | "rejected" | "dry_run" | "lost" | "unchanged", "reason": str},
         "versions": {"candidate": str, "champion": str | None},
         "gate": [{"metric": str, "greater_is_better": bool, "candidate": float, "champion": float | None,
                   "threshold": float | None, "min_absolute_change": float | None,
                   "min_relative_change": float | None, "passed": bool, "failures": [str, ...]}, ...],
         "metrics": {"candidate": {name: float}, "champion": {name: float} | None},
         "warm_start": {"used": bool, "from_version": str | None, "reason": str},
         "training": {"estimator": str, "iterations": int, "seconds": float,
                      "rows": {"train": int, "test": int}},
         "data": {"fingerprint": str, "source": str},
         "run": {"run_id": str, "tracking_uri": str, "experiment": str},
         "figures": ["objective.png", "roc.png", ...]}

    Sections: title, the decision in bold with its reason, the gate (one row per metric; a failing
    row quotes the threshold that failed with both numbers), candidate and champion metrics side
    by side, then warm start, training, data and run lines and the figures. Numbers have 4 decimals.
    """
    report = report or {}
    model, window = report.get("model_name"), report.get("window")
    title = report.get("title") or f"Retraining report: {model or MISSING}, window {window or MISSING}"
    decision = report.get("decision") or {}
    versions = report.get("versions") or {}
    outcome = decision.get("outcome")
    lines = [f"# {_text(title)}", ""]
    reason = f": {_text(decision['reason'])}" if decision.get("reason") else ""
    lines.append(f"**Decision: {_text(outcome).replace('_', ' ')}**{reason}")
    lines += ["", f"Model {_code(model)}, window {_code(window)}; candidate version "
                  f"{_text(versions.get('candidate'))}, champion version {_text(versions.get('champion'))}.", ""]

    gate = report.get("gate")
    lines += ["## Gate", ""]
    lines += _gate_table(gate) if gate else [f"{MISSING} (no gate rules)"]
    lines.append("")

    metrics = report.get("metrics") or {}
    candidate, champion = metrics.get("candidate") or {}, metrics.get("champion") or {}
    lines += ["## Metrics", ""]
    lines += _metrics_table(candidate, champion) if candidate or champion else [f"{MISSING} (no metrics)"]
    if candidate and not champion:
        lines += ["", "No champion to compare with."]
    lines.append("")

    lines += ["## Run", "", _warm_start_line(report.get("warm_start")), ""]
    lines += [_training_line(report.get("training") or {}), ""]
    data = report.get("data") or {}
    lines += [f"**Data:** {_code(data.get('source'))}, fingerprint {_code(data.get('fingerprint'))}", ""]
    run = report.get("run") or {}
    lines += [f"**Tracking:** run {_code(run.get('run_id'))} in experiment {_code(run.get('experiment'))} "
              f"at {_code(run.get('tracking_uri'))}", ""]

    names = report.get("figures") or []
    if names:
        lines += ["## Figures", ""]
        for name in names:
            lines += [f"![{os.path.splitext(str(name))[0]}]({name})", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def write(directory, report, figures):
    """Write report.md and the PNGs (``{file name: bytes}``) into the local ``directory`` (created
    when missing); the report embeds ``report["figures"]``, or else every PNG given. Returns the file
    names written, report.md first."""
    for name in figures:
        if os.path.basename(name) != name or name in ("", ".", ".."):
            raise ValueError(f"figure names must be plain file names, got {name!r}")
    os.makedirs(directory, exist_ok=True)
    if (report or {}).get("figures") is None:
        report = dict(report or {}, figures=list(figures))
    with open(os.path.join(directory, "report.md"), "w", encoding="utf-8") as f:
        f.write(markdown(report))
    for name, data in figures.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)
    return ["report.md", *figures]
