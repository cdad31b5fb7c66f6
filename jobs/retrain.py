"""Retrain on one window of data and promote the new model only if it beats the one in service.

    python -m sparkml.jobs.retrain --config conf/retrain_demo.yaml --window 2026-11-03 [--set key=value ...]
    spark-submit jobs/retrain.py --config conf/retrain_demo.yaml --window 2026-11-03 [--dry-run]

One run:
1. settles versions a killed run left undecided (`jobs.registry`);
2. reads the window (``{window}`` in data.train, a generated sample, or the rows whose
   data.window_column equals the id) and fingerprints it; a window already registered with the same
   data and config is a no-op that prints the earlier decision;
3. splits a holdout, warm-starts from the champion (``setInitialModel``) when the estimator and the
   feature count match, else trains from scratch and records why;
4. evaluates candidate and champion on the same holdout with pyspark's evaluators and applies the
   gate (`jobs.gate`, MLflow's MetricThreshold vocabulary);
5. logs an MLflow run (`jobs.tracking`), registers the candidate as a new version with tags, and if
   it passed moves the alias (``champion``) by compare-and-set; a dry run registers nothing;
6. writes report.md, decision.json and the figures (`jobs.report`) to
   ``<output.dir>/<window>/v<version>/`` (``dry-run-<run id>/`` for a dry run), staged and renamed
   in, and logs them to the run.

It prints one line with the decision. Exit codes: 0 whatever the decision (promoted, rejected, lost
the race, dry run, already done); 2 for a config or data error, with the key named, before any
registry write; 1 for anything else (traceback). The window id and the registry's names are plain
names (`jobs.names`), and a local output.dir must be a writable directory or creatable: both are
checked before Spark or MLflow starts.
"""

import argparse
import json
import os
import sys
import time

if __package__ in (None, ""):  # run as a file (spark-submit jobs/retrain.py) from a source checkout
    _checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.isfile(os.path.join(_checkout, "sparkml", "__init__.py")):
        sys.path.insert(0, _checkout)

from sparkml.jobs import config, datasets, decision, errors, gate, outputs, registry, session, tracking, train, tuning
from sparkml.runtime.cancellation import FitCancelled

DEFAULT_CONFIG = os.path.join(config.examples_dir(), "retrain_demo.yaml")


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="sparkml.jobs.retrain", description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default=DEFAULT_CONFIG, help="YAML job config (default: %(default)s)")
    p.add_argument("--window", required=True, help="id of the data window to train on, e.g. 2026-11-03")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, value parsed as YAML (repeatable)",
    )
    p.add_argument("--dry-run", action="store_true", help="evaluate and report, register and promote nothing")
    p.add_argument("--check", action="store_true", help="validate the config, print it resolved, and exit")
    return p.parse_args(argv)


def load_config(path, overrides, dry_run=False):
    """The validated retrain config; the gate's rules and the registered model's name (by default the
    config file's name) are checked here too (before Spark starts)."""
    cfg = config.load(path, overrides, config.RETRAIN_SCHEMA)
    if cfg["registry"]["model_name"] is None:
        job = train.job_name(path)
        try:
            config.plain_name("registry.model_name", job, "a registered model name")
        except config.ConfigError as e:
            raise config.ConfigError(
                "registry.model_name", f"null, so the config file's name is used: {str(e).split(': ', 1)[1]}"
            ) from None
    if dry_run:
        cfg["gate"]["dry_run"] = True
    if not cfg["gate"]["metrics"]:
        raise config.ConfigError(
            "gate.metrics",
            "is required: at least one metric with a threshold, e.g. "
            "{areaUnderROC: {threshold: 0.8, min_absolute_change: 0.0}}",
        )
    rules = gate.parse(cfg["gate"]["metrics"])
    task = config.task_of(cfg["model"]["estimator"])
    gate.check_metrics_exist(rules, train.metric_names(task, cfg["model"]["estimator"]), task)
    return cfg


def report_task(model, task):
    """'binary', 'multiclass' or 'regression' (what `jobs.report` plots)."""
    if task == "regression":
        return "regression"
    return "binary" if model.numClasses == 2 else "multiclass"


class Retrain:
    """One retraining run of a validated config on one window."""

    def __init__(self, cfg, spark, window, job):
        from mlflow.tracking import MlflowClient

        self.cfg, self.spark, self.window, self.job = cfg, spark, str(window), job
        self.target = tracking.resolve(cfg, job)
        reg = cfg["registry"]
        self.name = reg["model_name"] or job
        self.rules = gate.parse(cfg["gate"]["metrics"])
        self.task = config.task_of(cfg["model"]["estimator"])
        self.client = MlflowClient(tracking_uri=self.target.uri)  # the registry follows, or $MLFLOW_REGISTRY_URI
        self.registry = registry.Registry(
            self.client, self.name, reg["alias"], reg["lock_timeout_s"], reg["pending_timeout_s"]
        )
        self.promotion = decision.Promotion(self.registry, self.name, self.window, cfg["gate"]["dry_run"])
        self.lines = []  # what the run says, besides its final line

    def open_registry(self):
        """Create the registered model if needed and settle abandoned versions (ConfigError when the
        store cannot be reached: nothing has been read or trained yet)."""
        key = self.target.source if self.target.source != "default" else "tracking.uri"
        try:
            tracking.ensure_sqlite_dir(self.target.uri)
            self.registry.ensure_model()
        except Exception as e:
            text = " ".join(str(e).split())
            raise config.ConfigError(
                key, f"cannot open the MLflow registry at {self.target.uri}: {type(e).__name__}: {text[:400]}"
            ) from None
        self.lines += self.registry.settle_abandoned()

    def run(self):
        t0 = time.perf_counter()
        self.open_registry()
        data = self.cfg["data"]
        session.ship_packages(self.spark)
        window_df, test, features_col = datasets.load(self.spark, data, self.window)
        fp = datasets.fingerprint(window_df)
        config_sha = tracking.config_hash(self.cfg)
        earlier = self.registry.find(self.window, fp, config_sha)
        if earlier is not None and not self.cfg["gate"]["dry_run"]:
            return self.promotion.already_done(earlier, self.lines)
        if test is None:
            train_df, test = datasets.split(window_df, data["holdout_fraction"], data["seed"])
        else:
            train_df = window_df
        rows = {"train": train_df.count(), "test": test.count()}
        if rows["train"] == 0:
            raise config.ConfigError("--window", f"no training rows for window {self.window} in {data['train']}")
        if rows["test"] == 0:
            raise config.ConfigError(
                "data.test" if data["test"] else "data.holdout_fraction",
                f"the holdout of window {self.window} is empty",
            )
        with tracking.start(self.cfg, self.job) as tracked:
            tracked.client.set_tag(tracked.run_id, registry.WINDOW, self.window)
            return self._train_and_decide(tracked, train_df, test, features_col, fp, config_sha, rows, t0)

    # -- steps -------------------------------------------------------------------------------------
    def _champion(self, spark):
        from sparkml.jobs import models

        version = self.registry.champion()
        if version is None:
            return None, None
        return version, models.load_version(self.client, version, spark)

    def _fit(self, features_col, train_df, champion_version, champion_model):
        """(estimator, model, warm_start dict, tuning record or None): warm-started from the champion when that is
        possible; with a ``tuning.grid``, the model of the map chosen by cross-validation (``jobs.tuning``), every
        map starting from the champion."""
        estimator = train.build_estimator(self.cfg, features_col)
        reason = self._no_warm_start(estimator, features_col, train_df, champion_version, champion_model)
        if reason is None:
            estimator.setInitialModel(champion_model)
            try:
                fitted, model, selection = tuning.fit(self.cfg, estimator, train_df, self.task)
                warm = {
                    "used": True,
                    "from_version": str(champion_version.version),
                    "reason": f"started from champion version {champion_version.version}'s coefficients",
                }
                return fitted, model, warm, selection
            except ValueError as e:
                if "initial model" not in str(e):
                    raise
                reason = f"the champion does not fit this window's shape ({e})"
                estimator.setInitialModel(None)
        fitted, model, selection = tuning.fit(self.cfg, estimator, train_df, self.task)
        return fitted, model, {"used": False, "from_version": None, "reason": reason}, selection

    def _no_warm_start(self, estimator, features_col, train_df, champion_version, champion_model):
        """Why the fit cannot start from the champion, or None when it can."""
        if not self.cfg["registry"]["warm_start"]:
            return "registry.warm_start is false"
        if champion_version is None:
            return "no champion yet"
        cls = type(estimator)
        ours = f"{cls.__module__}.{cls.__qualname__}"
        theirs = champion_version.tags.get("sparkml.estimator")
        if theirs != ours:
            return f"the champion is a {theirs}, this run trains a {ours}"
        if not hasattr(estimator, "setInitialModel"):
            return f"{cls.__name__} has no warm start (setInitialModel)"
        width = datasets.feature_width(train_df, features_col)
        if champion_model.numFeatures != width:
            return f"the champion has {champion_model.numFeatures} features, window {self.window} has {width}"
        return None

    def _evaluate(self, model, test):
        """(metrics, scores for the report) of one model on the holdout."""
        from sparkml.jobs import report

        label, weight = self.cfg["data"]["label"], self.cfg["data"]["weight"]
        pred = model.transform(test).cache()
        try:
            metrics = train.evaluate_predictions(model, pred, self.task, label, weight, data=test)
            scores = report.scores(
                pred, report_task(model, self.task), label, weight_col=weight, prediction_col=model.getPredictionCol()
            )
        finally:
            pred.unpersist()
        return metrics, scores

    def _train_and_decide(self, tracked, train_df, test, features_col, fp, config_sha, rows, t0):
        from sparkml.jobs import report

        champion_version, champion_model = self._champion(self.spark)
        t_read = time.perf_counter()
        estimator, model, warm, selection = self._fit(features_col, train_df, champion_version, champion_model)
        t_fit = time.perf_counter()
        metrics, cand_scores = self._evaluate(model, test)
        champ_metrics, champ_scores = self._evaluate(champion_model, test) if champion_model else (None, None)
        passed, results = gate.decide(self.rules, metrics, champ_metrics)
        history, iterations = train.training_summary(model)
        champ_ver = None if champion_version is None else str(champion_version.version)
        summary = {
            "estimator": self.cfg["model"]["estimator"],
            "metrics": metrics,
            "rows": rows,
            "objectiveHistory": history,
            "totalIterations": iterations,
            "seconds": {"read": t_read - t0, "fit": t_fit - t_read, "evaluate": time.perf_counter() - t_fit},
        }
        if selection is not None:
            summary["tuning"] = selection
        tracked.log_training(estimator, self.cfg, summary)
        tracked.client.log_batch(tracked.run_id, metrics=decision.champion_metrics(champ_metrics))
        out = self.cfg["output"]
        store = outputs.store_for(out["dir"], self.spark)
        staging = outputs.Staging(store, out["dir"])
        try:
            model.save(staging.path("model"))
            tracked.log_outputs(self.cfg, {}, tracking.local_path(staging.dir))
            cls = type(estimator)
            tags = {
                registry.WINDOW: self.window,
                registry.FINGERPRINT: fp,
                registry.CONFIG: config_sha,
                "sparkml.estimator": f"{cls.__module__}.{cls.__qualname__}",
            }
            outcome, reason, version = self.promotion.decide(
                tracked, passed, results, champ_ver, metrics, champ_metrics, tags
            )
            doc = {
                "title": f"{self.name}, window {self.window}",
                "model_name": self.name,
                "window": self.window,
                "decision": {"outcome": outcome, "reason": reason},
                "versions": {"candidate": version, "champion": champ_ver},
                "gate": results,
                "metrics": {"candidate": metrics, "champion": champ_metrics},
                "warm_start": warm,
                "training": {
                    "estimator": summary["estimator"],
                    "iterations": iterations,
                    "seconds": summary["seconds"]["fit"],
                    "rows": rows,
                },
                "tuning": selection,
                "data": {"fingerprint": fp, "source": self.cfg["data"]["train"]},
                "run": {
                    "run_id": tracked.run_id,
                    "tracking_uri": self.target.uri,
                    "experiment": self.target.experiment,
                },
            }
            figures = report.figures(
                report_task(model, self.task), {"candidate": cand_scores, "champion": champ_scores}, history
            )
            plot = tuning.plot_png(selection) if selection is not None else None
            if plot is not None:
                figures["tuning.png"] = plot
            doc["figures"] = sorted(figures)
            files = {
                "report.md": report.markdown(doc).encode(),
                "decision.json": json.dumps(doc, indent=2, default=str).encode(),
                **figures,
            }
            store.mkdirs(staging.path("report"))
            for name, body in files.items():
                store.write_bytes(store.join(staging.path("report"), name), body)
            tracked.log_outputs(self.cfg, files)
            folder = f"v{version}" if version is not None else f"dry-run-{tracked.run_id[:12]}"
            window_dir = store.join(out["dir"], self.window)
            store.mkdirs(window_dir)
            store.rename(staging.path("report"), store.join(window_dir, folder))
        finally:
            staging.cleanup()
        doc["report"] = store.join(out["dir"], self.window, folder, "report.md")
        doc["line"] = self.promotion.line(outcome, reason, version, champ_ver, results)
        doc["outcome"], doc["lines"] = outcome, self.lines
        return doc


def main(argv=None, spark=None) -> int:
    """Command-line entry point; returns the exit code (0 whatever the decision, 2 config/data error)."""
    args = parse_args(argv)
    try:
        config.plain_name("--window", args.window, "a window id")
        cfg = load_config(args.config, args.set, args.dry_run)
        if args.check:
            print(json.dumps(cfg, indent=2))
            return 0
        if config.is_local_path(cfg["output"]["dir"]):  # the report's folder, before Spark starts
            outputs.check_local_dir(os.path.join(cfg["output"]["dir"], args.window))
        tracking.require_mlflow()
        job = train.job_name(args.config)
        tracking.resolve(cfg, job)
        result = session.run_with(cfg["spark"], spark, lambda s: Retrain(cfg, s, args.window, job).run())
    except config.ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, FitCancelled) as e:
        return errors.report_cancelled("sparkml-retrain", e)
    for line in result["lines"]:
        print(line)
    print(result["line"])
    return 0


cli = errors.entry_point(main)

if __name__ == "__main__":  # spark-submit jobs/<name>.py: the console entry point's exit codes and quiet Ctrl-C
    cli()
