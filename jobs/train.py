"""Train one estimator from a YAML config and publish the model and a report.

    python -m sparkml.jobs.train --config conf/logistic_demo.yaml [--set model.params.regParam=0.1 ...]
    spark-submit jobs/train.py --config conf/logistic_demo.yaml

Steps: validate the config (before Spark starts) -> session -> read data -> split -> fit ->
evaluate the holdout with pyspark's evaluators -> stage model/, metrics.json (and objective.png
when matplotlib is installed) beside output.dir, log them to the job's MLflow run (`jobs.tracking`),
and rename them in only once everything worked.
Config errors print one line ("config error: <key>: <problem>") and exit 2, before Spark starts; so
does an output.dir that is a file, lies under one, or cannot be written.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):  # run as a file (spark-submit jobs/train.py) from a source checkout
    _checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.isfile(os.path.join(_checkout, "sparkml", "__init__.py")):
        sys.path.insert(0, _checkout)  # sparkml.jobs: this folder, through the link sparkml/jobs

from sparkml import progress
from sparkml.jobs import config, datasets, errors, outputs, session, tracking, tuning
from sparkml.runtime.cancellation import FitCancelled

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_CONFIG = os.path.join(config.examples_dir(), "logistic_demo.yaml")


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="sparkml.jobs.train", description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default=DEFAULT_CONFIG, help="YAML job config (default: %(default)s)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, value parsed as YAML (repeatable), e.g. model.params.regParam=0.1",
    )
    p.add_argument("--check", action="store_true", help="validate the config, print it resolved, and exit")
    return p.parse_args(argv)


def build_estimator(cfg, features_col):
    """Instantiate the configured estimator with its params and the data section's columns."""
    est = config.estimator_class(cfg["model"]["estimator"])()
    data = cfg["data"]
    columns = {"featuresCol": features_col, "labelCol": data["label"], "weightCol": data["weight"]}
    for name, value in list(cfg["model"]["params"].items()) + list(columns.items()):
        if value is not None:
            est.set(est.getParam(name), value)
    every = cfg["model"].get("progress_every", 0)
    if every > 0:  # one line per ``every`` iterations, on the driver, as they end
        est.addIterationCallback(progress.every(every, lambda line: print(line, file=sys.stderr, flush=True)))
    return est


def evaluate(model, df, task, label, weight=None):
    """Holdout metrics with stock evaluators: binary AUC/accuracy/f1, multiclass accuracy/f1/logLoss,
    regression rmse/r2/mae, and a generalized linear model's deviance (`holdout_deviance`)."""
    pred = model.transform(df).cache()
    try:
        return evaluate_predictions(model, pred, task, label, weight, data=df)
    finally:
        pred.unpersist()


def evaluate_predictions(model, pred, task, label, weight=None, data=None):
    """`evaluate` on predictions already made (`model.transform(data)`, cached by the caller); ``data`` (the
    rows before scoring) gives a generalized linear model its deviance."""
    from pyspark.ml.evaluation import (
        BinaryClassificationEvaluator,
        MulticlassClassificationEvaluator,
        RegressionEvaluator,
    )

    extra = {"weightCol": weight} if weight else {}
    if task == "regression":
        ev = RegressionEvaluator(labelCol=label, predictionCol=model.getPredictionCol(), **extra)
        metrics = {m: ev.evaluate(pred, {ev.metricName: m}) for m in ("rmse", "r2", "mae")}
        if data is not None and _is_glm(model):
            metrics["deviance"] = holdout_deviance(model, data)
        return metrics
    mc = MulticlassClassificationEvaluator(labelCol=label, predictionCol=model.getPredictionCol(), **extra)
    metrics = {}
    if model.numClasses == 2:
        auc = BinaryClassificationEvaluator(
            labelCol=label, rawPredictionCol=model.getRawPredictionCol(), metricName="areaUnderROC", **extra
        )
        metrics["areaUnderROC"] = auc.evaluate(pred)
    metrics["accuracy"] = mc.evaluate(pred, {mc.metricName: "accuracy"})
    metrics["f1"] = mc.evaluate(pred, {mc.metricName: "f1"})
    if (
        model.numClasses > 2
        and model.hasParam("probabilityCol")
        and model.getOrDefault("probabilityCol") in pred.columns
    ):  # KernelSVC: only with probability=True
        mc.setProbabilityCol(model.getOrDefault("probabilityCol"))
        metrics["logLoss"] = mc.evaluate(pred, {mc.metricName: "logLoss"})
    return metrics


def _is_glm(model):
    return model.hasParam("family") and model.hasParam("link") and hasattr(model, "evaluate")


def holdout_deviance(model, data):
    """The deviance of a generalized linear model on held-out rows: MLlib's ``evaluate(data).deviance``,
    sum_i w_i d(y_i, mu_i) of the model's family (with ``offsetCol`` and ``weightCol`` as in training).
    A sum, so a candidate and a champion compare on the same holdout; smaller is better."""
    return float(model.evaluate(data).deviance)


GLM_ESTIMATORS = ("GeneralizedLinearRegression",)


def metric_names(task, estimator=None):
    """The holdout metrics `evaluate` may compute for a task ('classification' or 'regression') and, when
    given, the estimator's config name (a generalized linear model adds ``deviance``)."""
    if task != "regression":
        return ("areaUnderROC", "accuracy", "f1", "logLoss")
    return ("rmse", "r2", "mae", "deviance") if estimator in GLM_ESTIMATORS else ("rmse", "r2", "mae")


def _json_value(v):
    if hasattr(v, "toArray"):  # pyspark Vector / Matrix
        v = v.toArray()
    if hasattr(v, "tolist"):  # numpy array or scalar
        v = v.tolist()
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    return str(v)


def training_summary(model):
    """(objectiveHistory, totalIterations) from model.summary; a mixed model's objective after each
    coordinate-descent pass (``objectiveHistory``, no summary); else (None, None)."""
    try:
        if not getattr(model, "hasSummary", False):
            passes = getattr(model, "objectiveHistory", None)
            return ([float(v) for v in passes], len(passes)) if passes else (None, None)
        s = model.summary
        history = [float(x) for x in s.objectiveHistory] if hasattr(s, "objectiveHistory") else None
        return history, int(s.totalIterations) if hasattr(s, "totalIterations") else None
    except Exception:  # a summary that cannot be computed must not fail the run
        return None, None


def objective_png(history, title):
    """PNG bytes of the objective curve, or None (matplotlib not installed / nothing to plot)."""
    if not history or len(history) < 2:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=100)
    ax.plot(range(len(history)), history, marker=".")
    ax.set(xlabel="iteration", ylabel="objective", title=title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def job_name(config_path):
    """A job's name: its config file's name without the extension (conf/logistic_demo.yaml -> logistic_demo)."""
    return os.path.splitext(os.path.basename(config_path))[0]


def run(cfg: dict[str, Any], spark: SparkSession, job: str | None = None) -> dict[str, Any]:
    """Run a validated config in `spark` as an MLflow run; return the report dict written to metrics.json.

    `job` names the MLflow experiment (unless tracking.experiment does); default: output.dir's last part.
    """
    out = cfg["output"]
    store = outputs.store_for(out["dir"], spark)
    outputs.refuse_overwrite(store, out["dir"], out["overwrite"])
    job = job or out["dir"].rstrip("/").rsplit("/", 1)[-1]
    with tracking.start(cfg, job) as tracked:  # before any data is read: a bad store fails fast
        return _run_tracked(cfg, spark, store, tracked)


def _run_tracked(cfg, spark, store, tracked):
    t0 = time.perf_counter()
    data, out, name = cfg["data"], cfg["output"], cfg["model"]["estimator"]
    session.ship_packages(spark)
    train, test, features_col = datasets.load(spark, data)
    if test is None:
        train, test = datasets.split(train, data["holdout_fraction"], data["seed"])
    rows = {"train": train.count(), "test": test.count()}
    if rows["train"] == 0:
        raise config.ConfigError("data.train", f"no training rows in {data['train']}")
    if rows["test"] == 0:
        raise config.ConfigError("data.test" if data["test"] else "data.holdout_fraction", "the holdout is empty")
    t_read = time.perf_counter()
    estimator, model, selection = tuning.fit(cfg, build_estimator(cfg, features_col), train, config.task_of(name))
    t_fit = time.perf_counter()
    metrics = evaluate(model, test, config.task_of(name), data["label"], data["weight"])
    t_eval = time.perf_counter()
    history, iterations = training_summary(model)
    model_dir = store.join(out["dir"], "model")
    report = {
        "estimator": name,
        "model": os.path.abspath(model_dir) if config.is_local_path(model_dir) else model_dir,
        "metrics": metrics,
        "rows": rows,
        "objectiveHistory": history,
        "totalIterations": iterations,
        "params": {p.name: _json_value(v) for p, v in model.extractParamMap().items()},
        "seconds": {"read": t_read - t0, "fit": t_fit - t_read, "evaluate": t_eval - t_fit},
        "config": cfg,
        "mlflow": tracked.info(),
    }
    if selection is not None:
        report["tuning"] = selection
    staging = outputs.Staging(store, out["dir"])
    try:
        model.save(staging.path("model"))
        files = {}
        png = objective_png(history, f"{name} objective")
        if png is not None:
            files["objective.png"] = png
        if selection is not None:
            files["tuning.json"] = json.dumps(selection, indent=2, default=str).encode()
            plot = tuning.plot_png(selection)
            if plot is not None:
                files["tuning.png"] = plot
        report["seconds"]["total"] = time.perf_counter() - t0
        files["metrics.json"] = json.dumps(report, indent=2, default=str).encode()
        for file_name, body in files.items():
            store.write_bytes(staging.path(file_name), body)
        tracked.log_training(estimator, cfg, report)  # a logging failure publishes nothing
        tracked.log_outputs(cfg, files, tracking.local_path(staging.dir))
        staging.publish(["model", *files], out["overwrite"])
    finally:
        staging.cleanup()
    return report


def summary_text(report):
    """A few human lines: what was trained, the holdout metrics, where the outputs went."""
    iters = f", {report['totalIterations']} iterations" if report.get("totalIterations") is not None else ""
    metrics = "   ".join(f"{k} {v:.4f}" for k, v in report["metrics"].items())
    return (
        f"{report['estimator']}: trained on {report['rows']['train']:,} rows in "
        f"{report['seconds']['fit']:.1f} s{iters}; holdout of {report['rows']['test']:,} rows\n"
        f"  {metrics}\n  model   -> {report['model']}\n"
        f"  metrics -> {report['model'].rsplit('/', 1)[0]}/metrics.json\n"
        f"  mlflow  -> run {report['mlflow']['run_id']} in experiment {report['mlflow']['experiment']!r} "
        f"at {report['mlflow']['uri']}"
    )


def main(argv: Sequence[str] | None = None, spark: SparkSession | None = None) -> int:
    """Command-line entry point; returns the exit code (0 ok, 2 config error). `spark`: a session to use."""
    args = parse_args(argv)
    try:
        cfg = config.load(args.config, args.set)
        if args.check:
            print(json.dumps(cfg, indent=2))
            return 0
        if config.is_local_path(cfg["output"]["dir"]):  # fail before Spark starts when we can
            outputs.check_local_dir(cfg["output"]["dir"])
            outputs.refuse_overwrite(outputs.LocalStore(), cfg["output"]["dir"], cfg["output"]["overwrite"])
        tracking.require_mlflow()
        tracking.resolve(cfg, job_name(args.config))
        report = session.run_with(cfg["spark"], spark, lambda s: run(cfg, s, job_name(args.config)))
    except config.ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, FitCancelled) as e:
        return errors.report_cancelled("sparkml-train", e)
    print(summary_text(report))
    return 0


cli = errors.entry_point(main)

if __name__ == "__main__":  # spark-submit jobs/<name>.py: the console entry point's exit codes and quiet Ctrl-C
    cli()
