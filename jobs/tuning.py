"""The ``tuning:`` section of a job: the model chosen by cross-validation before it is published or gated.

    tuning:
      grid:                       # Param -> the values to try (the grid is every combination)
        regParam: [0.001, 0.01, 0.1]
        elasticNetParam: [0.0, 0.5]
      folds: 3                    # k-fold cross-validation (sparkml.tuning.CrossValidator), or
      train_ratio: null           # a number in (0, 1): one train/validation split (TrainValidationSplit)
      metric: null                # default: areaUnderROC (two classes), f1 (more), rmse (regression)
      parallelism: 1              # param maps fitted at once
      seed: 42                    # the folds' (or the split's) seed

Without a ``grid`` the job fits ``model.params`` once, as before. With one, every combination is fitted on the
training rows of each fold and scored on its validation rows (``sparkml.tuning``: the grid on the regularization
path, every model scored in one pass); the best map's model, refitted on all the training rows, is the job's
model, evaluated on the holdout like any other. Each map's metric (mean and standard deviation over the folds) goes
to ``tuning.json`` and a plot of the metric against ``regParam`` to ``tuning.png`` (with matplotlib), beside the
model and in the MLflow run.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Callable
from typing import Any

from sparkml.jobs.errors import ConfigError

BINARY_METRICS = ("areaUnderROC", "areaUnderPR")
# the section's keys: (allowed types, default), read by jobs.config's schema
SCHEMA = {
    "grid": ("map", {}),
    "folds": ((int,), 3),
    "train_ratio": ((float, int, type(None)), None),
    "metric": ((str, type(None)), None),
    "parallelism": ((int,), 1),
    "seed": ((int,), 42),
}


def metrics_for(task: str) -> tuple[str, ...]:
    """The metrics a ``tuning.metric`` may name for a task ('classification' or 'regression')."""
    # imported here: sparkml.tuning imports pyspark, which the job's config checks must not start
    from sparkml.tuning.metrics import MULTICLASS_METRICS, REGRESSION_METRICS

    return REGRESSION_METRICS if task == "regression" else BINARY_METRICS + MULTICLASS_METRICS


def check(section: dict[str, Any], task: str, model_params: dict, convert: Callable[[str, Any, str], Any]) -> dict:
    """The validated section. ``convert(param, value, dotted_key)`` checks one grid value as ``model.params``'
    would (``jobs.config``), raising ``ConfigError`` on ``dotted_key``, and returns it converted. The section's
    other keys are checked with or without a grid."""
    out = dict(section)
    converted = {}
    for name, values in section["grid"].items():
        key = f"tuning.grid.{name}"
        if name in model_params:
            raise ConfigError(key, f"also set in model.params.{name}: keep it in one place")
        if str(name).endswith("Col"):
            raise ConfigError(key, "a column is not searched: set it once (model.params or the data section)")
        if not isinstance(values, list) or not values:
            raise ConfigError(key, f"expected a non-empty list of values, got {values!r}")
        converted[name] = [convert(name, v, f"{key}[{i}]") for i, v in enumerate(values)]
    out["grid"] = converted
    if section["train_ratio"] is None and section["folds"] < 2:
        raise ConfigError("tuning.folds", f"expected at least 2, got {section['folds']}")
    if section["train_ratio"] is not None:
        if not 0.0 < section["train_ratio"] < 1.0:
            raise ConfigError("tuning.train_ratio", f"expected a number in (0, 1), got {section['train_ratio']}")
        out["train_ratio"] = float(section["train_ratio"])
    if section["parallelism"] < 1:
        raise ConfigError("tuning.parallelism", f"expected at least 1, got {section['parallelism']}")
    metric, allowed = section["metric"], metrics_for(task)
    if metric is not None and metric not in allowed:
        raise ConfigError("tuning.metric", f"expected one of {', '.join(allowed)} for {task}, got {metric!r}")
    return out


def combinations(grid: dict[str, list]) -> list[dict[str, Any]]:
    """Every combination of the grid, {Param name: value} (``ParamGridBuilder``'s order: the last Param fastest)."""
    names = list(grid)
    return [dict(zip(names, combo)) for combo in itertools.product(*(grid[n] for n in names))]


MAX_CHECKED_MAPS = 10_000  # a bigger grid's maps are checked one Param at a time only


def check_maps(cls, params, grid):
    """Every map the job will fit (``model.params``, with each combination of ``tuning.grid``) through the
    estimator's own checks (``_check_params``: the rules between Params, e.g. a family and a link), as its fit
    makes them before any job."""
    if not hasattr(cls, "_check_params"):  # pyspark.ml's: checked by its JVM when fitted
        return
    maps = combinations(grid) if grid else [{}]
    if len(maps) > MAX_CHECKED_MAPS:
        return
    for combo in maps:
        estimator = cls()
        for key, value in {**params, **combo}.items():
            estimator.set(estimator.getParam(key), value)
        try:
            estimator._check_params()
        except ValueError as e:
            if not combo:
                raise ConfigError("model.params", str(e)) from None
            shown_map = ", ".join(f"{k}={v!r}" for k, v in combo.items())
            raise ConfigError("tuning.grid", f"the map {{{shown_map}}} is refused: {e}") from None


def check_metric(metric, name, known, params, data):
    """``tuning.metric`` against the model (``name``, its Params ``known``, ``params`` set) and the ``data``
    section: logLoss needs a probability column, the areas under the curves two classes (what
    ``generated:multiclass`` does not have)."""
    if metric is None:
        return
    probabilities = "probabilityCol" in known and (
        "probability" not in known or params.get("probability", False) is True
    )
    if metric == "logLoss" and not probabilities:
        why = "set model.params.probability: true" if "probability" in known else f"{name} gives no probabilities"
        raise ConfigError("tuning.metric", f"logLoss needs the model's probabilities: {why}")
    multiclass = data["train"] == "generated:multiclass" and data["generated"]["classes"] > 2
    if metric in BINARY_METRICS and multiclass:
        raise ConfigError(
            "tuning.metric",
            f"{metric} needs two classes; generated:multiclass has {data['generated']['classes']} "
            "(use f1, accuracy or logLoss)",
        )


def evaluator(metric: str, label: str, weight: str | None, model_cols: dict[str, str]):
    """pyspark's evaluator of ``metric`` over the estimator's output columns ``model_cols``."""
    from pyspark.ml.evaluation import (
        BinaryClassificationEvaluator,
        MulticlassClassificationEvaluator,
        RegressionEvaluator,
    )

    from sparkml.tuning.metrics import REGRESSION_METRICS

    args: dict[str, Any] = {"metricName": metric, "labelCol": label, **({"weightCol": weight} if weight else {})}
    if metric in BINARY_METRICS:
        return BinaryClassificationEvaluator(rawPredictionCol=model_cols["rawPredictionCol"], **args)
    if metric in REGRESSION_METRICS:
        return RegressionEvaluator(predictionCol=model_cols["predictionCol"], **args)
    if "probabilityCol" in model_cols:
        args["probabilityCol"] = model_cols["probabilityCol"]
    return MulticlassClassificationEvaluator(predictionCol=model_cols["predictionCol"], **args)


def default_metric(task: str, train, label: str) -> str:
    """rmse for regression; areaUnderROC when the label holds two values, else f1 (one small Spark job)."""
    if task == "regression":
        return "rmse"
    return "areaUnderROC" if train.select(label).distinct().limit(3).count() <= 2 else "f1"


def param_maps(estimator, grid: dict[str, list]) -> list:
    """Every combination of the grid as pyspark ParamMaps (``combinations``)."""
    return [{estimator.getParam(n): v for n, v in combo.items()} for combo in combinations(grid)]


def fit(cfg: dict, estimator, train, task: str):
    """(estimator, model, tuning record or None): ``estimator.fit(train)`` without a ``tuning.grid``; with one,
    ``select``'s model and record, and the estimator with the best map's Params (what the run logs)."""
    if not cfg["tuning"]["grid"]:
        return estimator, estimator.fit(train), None
    data = cfg["data"]
    model, record, best = select(cfg["tuning"], estimator, train, task, data["label"], data["weight"])
    return estimator.copy(best), model, record


def select(section: dict, estimator, train, task: str, label: str, weight: str | None):
    """(the best map's model refitted on ``train``, the tuning record for tuning.json, the best ParamMap):
    ``sparkml.tuning``'s CrossValidator (``folds``) or TrainValidationSplit (``train_ratio``) over the section's
    grid."""
    from sparkml.tuning import CrossValidator, TrainValidationSplit

    metric = section["metric"] or default_metric(task, train, label)
    columns = [p for p in estimator.params if p.name.endswith("Col") and estimator.isDefined(p)]
    cols = {p.name: estimator.getOrDefault(p) for p in columns}
    ev = evaluator(metric, label, weight, cols)
    maps = param_maps(estimator, section["grid"])
    common = {"estimator": estimator, "estimatorParamMaps": maps, "evaluator": ev, "seed": section["seed"]}
    common["parallelism"] = section["parallelism"]
    fitted: Any
    if section["train_ratio"] is None:
        fitted = CrossValidator(numFolds=section["folds"], **common).fit(train)
        means, stds = list(fitted.avgMetrics), list(getattr(fitted, "stdMetrics", None) or [None] * len(maps))
    else:
        fitted = TrainValidationSplit(trainRatio=section["train_ratio"], **common).fit(train)
        means, stds = list(fitted.validationMetrics), [None] * len(maps)
    values = [float(mean) for mean in means]
    rows = [
        {"params": {p.name: v for p, v in m.items()}, "metric": mean, "std": None if s is None else float(s)}
        for m, mean, s in zip(maps, values, stds)
    ]
    larger = ev.isLargerBetter()
    best = max(range(len(values)), key=lambda i: values[i] if larger else -values[i])
    record = {
        "metric": metric,
        "larger_is_better": larger,
        "method": "cross-validation" if section["train_ratio"] is None else "train/validation split",
        "folds": section["folds"] if section["train_ratio"] is None else None,
        "train_ratio": section["train_ratio"],
        "maps": rows,
        "best": rows[best],
    }
    return fitted.bestModel, record, maps[best]


def mlflow_metrics(record: dict) -> list[tuple[str, float, int]]:
    """(key, value, step) of the MLflow metrics: ``tuning.<metric>`` at step i for map i (its index in
    tuning.json's ``maps``) and the best map's as ``tuning.best_<metric>``."""
    name = record["metric"]
    return [(f"tuning.{name}", r["metric"], i) for i, r in enumerate(record["maps"])] + [
        (f"tuning.best_{name}", record["best"]["metric"], 0)
    ]


def plot_png(record: dict) -> bytes | None:
    """PNG bytes of the metric against regParam (one line per combination of the other Params), or None without
    matplotlib or without a regParam in the grid."""
    if not any("regParam" in r["params"] for r in record["maps"]):
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    lines: dict[str, list[tuple[float, float]]] = {}
    for r in record["maps"]:
        others = ", ".join(f"{k}={v}" for k, v in r["params"].items() if k != "regParam") or record["metric"]
        lines.setdefault(others, []).append((r["params"]["regParam"], r["metric"]))
    fig, ax = plt.subplots(figsize=(5.5, 3.5), dpi=100)
    for label, points in lines.items():
        xs, ys = zip(*sorted(points))
        ax.plot(xs, ys, marker="o", label=label)
    if all(x > 0 for r in record["maps"] for x in [r["params"]["regParam"]]):
        ax.set_xscale("log")
    ax.set(xlabel="regParam", ylabel=record["metric"], title=f"{record['method']}: {record['metric']}")
    ax.legend(fontsize="small")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()
