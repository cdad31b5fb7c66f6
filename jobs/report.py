"""A report per retraining run that reads without MLflow's UI: report.md plus PNG figures.

    curves = {"candidate": scores(cand_pred, "binary", "label"), "champion": scores(champ_pred, "binary", "label")}
    pngs = figures("binary", curves, objective_history=history)
    write(run_dir, report_dict, pngs)          # -> ["report.md", "objective.png", "roc.png"]

``scores`` brings (a sample of) a predictions DataFrame to the driver as numpy arrays; ``roc_curve``
and ``confusion_matrix`` are plain numpy, so they are checked against scikit-learn without Spark;
``figures`` draws the objective per iteration and, by task, the ROC (binary), the confusion matrices
(multiclass) or the residuals (regression) of candidate and champion; ``markdown`` renders the
report dict (schema in its docstring) and ``write`` puts report.md and the PNGs in a folder.

``scores``, ``roc_curve`` and ``confusion_matrix`` live in `jobs.curves`, ``figures`` in
`jobs.report_figures`; they are re-exported here so a job needs only this module.
"""

import math
import numbers
import os

from sparkml.jobs.curves import confusion_matrix, residuals, roc_curve, scores
from sparkml.jobs.report_figures import figures

__all__ = ["scores", "roc_curve", "confusion_matrix", "residuals", "figures", "markdown", "write"]
MISSING = "—"


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
    lines = [
        "| Metric | Direction | Candidate | Champion | Threshold | Min change | Result |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for row in gate:
        row = row or {}
        higher = row.get("greater_is_better")
        direction = MISSING if higher is None else ("higher is better" if higher else "lower is better")
        passed = row.get("passed")
        result = MISSING if passed is None else ("pass" if passed else "**FAIL**: " + "; ".join(_gate_failures(row)))
        lines.append(
            f"| {_text(row.get('metric'))} | {direction} | {_num(row.get('candidate'))} | "
            f"{_num(row.get('champion'))} | {_num(row.get('threshold'))} | {_min_change(row)} | {result} |"
        )
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
    return (
        f"**Training:** {_text(tr.get('estimator'))}, {_num(tr.get('iterations'))} iterations, "
        f"{MISSING if seconds is None else f'{seconds:.1f}'} s; rows: train {_num(rows.get('train'))}, "
        f"test {_num(rows.get('test'))}"
    )


def _tuning_table(tuning):
    """The model selection's maps, one row each, the chosen one marked."""
    maps = tuning.get("maps") or []
    names = list(dict.fromkeys(k for m in maps for k in (m.get("params") or {})))
    metric = _text(tuning.get("metric"))
    lines = [
        f"{_text(tuning.get('method'))} on {metric}, "
        + ("larger is better." if tuning.get("larger_is_better") else "smaller is better."),
        "",
        "| " + " | ".join([*map(_text, names), metric, "std", "chosen"]) + " |",
        "|" + "---|" * len(names) + "---:|---:|---|",
    ]
    best = (tuning.get("best") or {}).get("params")
    for m in maps:
        params = m.get("params") or {}
        cells = [_text(f"{v:g}" if isinstance(v, float) else v) for v in (params.get(n) for n in names)]
        cells += [_num(m.get("metric")), _num(m.get("std"))]
        lines.append("| " + " | ".join([*cells, "yes" if params == best else ""]) + " |")
    return lines


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
         "tuning": {"method": str, "metric": str, "larger_is_better": bool,
                    "maps": [{"params": {name: value}, "metric": float, "std": float | None}, ...],
                    "best": {"params": ...}} | None,
         "training": {"estimator": str, "iterations": int, "seconds": float,
                      "rows": {"train": int, "test": int}},
         "data": {"fingerprint": str, "source": str},
         "run": {"run_id": str, "tracking_uri": str, "experiment": str},
         "figures": ["objective.png", "roc.png", ...]}

    Sections: title, the decision in bold with its reason, the gate (one row per metric; a failing
    row quotes the threshold that failed with both numbers), candidate and champion metrics side
    by side, the model selection's maps (with a ``tuning`` entry), then warm start, training, data and run lines
    and the figures. Numbers have 4 decimals.
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
    lines += [
        "",
        f"Model {_code(model)}, window {_code(window)}; candidate version "
        f"{_text(versions.get('candidate'))}, champion version {_text(versions.get('champion'))}.",
        "",
    ]

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

    if report.get("tuning"):
        lines += ["## Model selection", "", *_tuning_table(report["tuning"]), ""]

    lines += ["## Run", "", _warm_start_line(report.get("warm_start")), ""]
    lines += [_training_line(report.get("training") or {}), ""]
    data = report.get("data") or {}
    lines += [f"**Data:** {_code(data.get('source'))}, fingerprint {_code(data.get('fingerprint'))}", ""]
    run = report.get("run") or {}
    lines += [
        f"**Tracking:** run {_code(run.get('run_id'))} in experiment {_code(run.get('experiment'))} "
        f"at {_code(run.get('tracking_uri'))}",
        "",
    ]

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
