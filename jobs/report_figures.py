"""The PNG figures of a retraining report: objective per iteration, and by task the ROC (binary), the
confusion matrices (multiclass) or the residuals (regression) of candidate and champion.

The figures use matplotlib's Agg canvas directly (``matplotlib.figure.Figure``, never pyplot): no
display is needed, the process-wide backend is left as it is (a notebook importing this keeps its
own), and no figure is registered anywhere that would have to be closed. Without matplotlib,
``figures`` returns ``{}`` and the report simply has no pictures.
"""

import io
import math

import numpy as np

from sparkml.jobs.curves import TASKS, confusion_matrix, residuals, roc_curve

_COLORS = {"candidate": "tab:blue", "champion": "tab:orange"}
_SCATTER_POINTS = 20_000  # per model in the residual scatter: more only blurs the cloud and slows Agg


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
    return [
        (name, curves[name])
        for name in ("candidate", "champion")
        if curves.get(name) is not None
        and all(curves[name].get(k) is not None for k in needed)
        and len(curves[name]["label"])
    ]


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
    ax.set(
        xlim=(0, 1),
        ylim=(0, 1.01),
        xlabel="false positive rate",
        ylabel="true positive rate",
        title="ROC on the holdout (sample)",
    )
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
                    ax.text(
                        j,
                        i,
                        _count_text(cm[i, j]),
                        ha="center",
                        va="center",
                        fontsize=8,
                        color="white" if top and cm[i, j] > top / 2 else "black",
                    )
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
        scatter.scatter(
            p[idx],
            r[idx],
            s=4,
            alpha=0.35,
            color=_COLORS[name],
            label=name,
            linewidths=0,
            zorder=3 if name == "candidate" else 2,
        )  # the candidate on top
        rmse = float(np.sqrt(np.average(r**2, weights=s.get("weight")))) if r.size else math.nan
        hist.hist(
            r,
            bins=bins,
            weights=s.get("weight"),
            histtype="step",
            linewidth=1.5,
            color=_COLORS[name],
            label=f"{name} (rmse {rmse:.4f})",
        )
    scatter.axhline(0.0, color="grey", linestyle="--", linewidth=1)
    scatter.set(xlabel="prediction", ylabel="prediction - label", title="residuals (sample)")
    hist.axvline(0.0, color="grey", linestyle="--", linewidth=1)
    hist.set(xlabel="prediction - label", ylabel="rows (weighted)", title="residual distribution")
    for ax in (scatter, hist):
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    return fig


_TASK_FIGURES = {
    "binary": ("roc.png", roc_figure),
    "multiclass": ("confusion.png", confusion_figure),
    "regression": ("residuals.png", residual_figure),
}


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
    drawn = {
        "objective.png": None if objective_history is None else objective_figure(Figure, objective_history),
        name: build(Figure, curves),
    }
    out = {}
    for name, fig in drawn.items():
        if fig is not None:
            out[name] = _png(fig)
    return out
