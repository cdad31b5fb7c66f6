"""Every `jobs.train` run is an MLflow run: params, metrics, config, report files and model as artifacts.

What a run records:

- params: the estimator's whole Param map (set and default values, ours included: strategy,
  device, dtype, ...), each as ``str(value)`` (vectors and lists as JSON);
- metrics: ``objective`` at steps 0..n-1 (``model.summary.objectiveHistory``), ``holdout_<name>`` for each
  holdout metric of metrics.json, ``total_iterations``, ``train_rows``, ``test_rows``, ``<phase>_seconds``;
- tags: ``sparkml.job`` (the config file's name), ``sparkml.estimator`` (the estimator's class),
  ``sparkml.config_sha256`` (hash of the resolved config without its ``tracking`` section, so the same
  job tracked elsewhere hashes the same), ``sparkml.output_dir``;
- artifacts: ``config.yaml`` (the resolved config), ``metrics.json``, ``objective.png`` when written, and
  ``model/`` when output.dir is local: an MLflow model whose ``python_function`` flavor scores pandas rows
  without Spark (``sparkml.mlflow.save_model``: a loader module, a signature, no pickle), with MLlib's files
  as they are under ``model/data/model``.

Where (`resolve`): ``tracking.uri`` from the YAML (or ``--set``) wins over ``$MLFLOW_TRACKING_URI``, which
wins over the default ``sqlite:///<parent of output.dir>/mlflow.db`` with artifacts in
``<parent of output.dir>/mlartifacts/``. The parent, not output.dir itself: every run of a config
(and of the configs beside it, e.g. runs/demo and runs/linear_svc) shares one store, and the store is
never inside the directory whose entries the job stages and renames in. An output.dir on Hadoop
(hdfs://, s3a://) has no local parent: such a job must name a tracking URI. The experiment is
``tracking.experiment``, else the config file's name (``logistic_demo``): every run of one config lands
in one experiment. The registry URI is left to MLflow (it follows the tracking URI, or
``$MLFLOW_REGISTRY_URI``).

Failures: tracking is part of the job, not an optional extra. The run is opened before any data is
read; a store that cannot be opened (bad URI, unsupported scheme, unreachable server once MLflow's
HTTP retries are spent) is a config error naming ``tracking.uri`` (or ``MLFLOW_TRACKING_URI``), exit
code 2, before training. Everything is logged before the outputs are renamed into place, so a
logging failure later fails the job (traceback, exit code 1) with nothing published and the run
marked FAILED. Reason: a model that is published without its run could never be traced back to its
params and metrics, and the next step (a registry and champion gate) reads them from the run.

mlflow is imported lazily (the ``jobs`` extra); nothing under ``sparkml/`` or ``gpu/`` imports it.
"""

import hashlib
import json
import os
import pathlib
import sys
import tempfile
import time
from urllib.parse import urlparse

import yaml

from sparkml.jobs import tuning
from sparkml.jobs.config import ConfigError, is_local_path

ENV_URI = "MLFLOW_TRACKING_URI"
STORE_FILE = "mlflow.db"
ARTIFACTS_DIR = "mlartifacts"
OBJECTIVE = "objective"
HOLDOUT_PREFIX = "holdout_"


class Target:
    """Where a job's run goes: `uri`, `source` (the key that chose it), `experiment`, `artifact_location`
    (for an experiment created here; None leaves it to the store)."""

    def __init__(self, uri, source, experiment, artifact_location):
        self.uri, self.source, self.experiment, self.artifact_location = uri, source, experiment, artifact_location


def local_path(path):
    """The local filesystem path of `path` (plain or file: URI), or None for another filesystem."""
    if is_local_path(path):
        return os.path.abspath(path)
    parsed = urlparse(path)
    return parsed.path if parsed.scheme == "file" and parsed.path else None


def _sqlite_file(uri):
    """The database file of a ``sqlite:///path`` URI, else None."""
    if not uri.startswith("sqlite:///"):
        return None
    path = uri[len("sqlite:///") :]
    return None if not path or path == ":memory:" else os.path.abspath(path.split("?", 1)[0])


def ensure_sqlite_dir(uri):
    """Create the folder of a ``sqlite:///`` store's file (sqlite creates the file, not its folder)."""
    db = _sqlite_file(uri)
    if db is not None:
        os.makedirs(os.path.dirname(db), exist_ok=True)


def resolve(cfg, job, env=None):
    """The `Target` of a validated config (no MLflow call; run before Spark starts). `job`: the job's name."""
    env = os.environ if env is None else env
    section = cfg["tracking"]
    if section["uri"] is not None:
        uri, source = section["uri"], "tracking.uri"
    elif env.get(ENV_URI, "").strip():
        uri, source = env[ENV_URI].strip(), ENV_URI
    else:
        out_dir = local_path(cfg["output"]["dir"])
        if out_dir is None:
            raise ConfigError(
                "tracking.uri",
                f"output.dir {cfg['output']['dir']} is not local, so there is no "
                f"default store beside it: set tracking.uri or ${ENV_URI}",
            )
        uri, source = "sqlite:///" + os.path.join(os.path.dirname(out_dir.rstrip("/")), STORE_FILE), "default"
    db = _sqlite_file(uri)
    artifacts = None
    if db is not None:  # keep a local store's artifacts beside its database, not in the working directory
        artifacts = pathlib.Path(os.path.dirname(db), ARTIFACTS_DIR).as_uri()
    return Target(uri, source, section["experiment"] or job, artifacts)


def require_mlflow():
    """`mlflow.tracking`, or a ConfigError when mlflow is not installed (checked before Spark starts).
    The jobs' logs get no artifact download bars (MLflow draws them where tqdm is installed)."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    try:
        import mlflow.tracking
    except ImportError as e:
        raise ConfigError(
            "tracking", f"mlflow cannot be imported ({e}); install the jobs extra: pip install 'sparkml-torch[jobs]'"
        ) from None
    return mlflow.tracking


def config_hash(cfg):
    """sha256 of the resolved config without its `tracking` section (canonical JSON)."""
    body = {k: v for k, v in cfg.items() if k != "tracking"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


def _plain(v):
    """A JSON-able value: vectors, matrices and numpy values as lists and numbers."""
    if hasattr(v, "toArray"):
        v = v.toArray()
    if hasattr(v, "tolist"):
        v = v.tolist()
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


def param_value(v):
    """How a Param value is written as an MLflow param (a string of at most 6000 characters)."""
    v = _plain(v)
    text = json.dumps(v) if isinstance(v, (list, dict)) else str(v)
    return text if len(text) <= 6000 else text[:5997] + "..."


def estimator_params(estimator):
    """{name: MLflow param string} for the estimator's whole Param map (set and default values)."""
    return {p.name: param_value(v) for p, v in estimator.extractParamMap().items()}


def _batches(items, size):
    for i in range(0, len(items), size):
        yield items[i : i + size]


class JobRun:
    """An open MLflow run of one job; a context manager that ends it FINISHED, or FAILED on an exception."""

    def __init__(self, target, job):
        from mlflow.tracking import MlflowClient

        self.target, self.job = target, job
        key = target.source if target.source != "default" else "tracking.uri"
        try:
            ensure_sqlite_dir(target.uri)
            self.client = MlflowClient(tracking_uri=target.uri)
            self.experiment_id = self._experiment()
            self.run_id = self.client.create_run(self.experiment_id, tags={"sparkml.job": job}).info.run_id
        except Exception as e:  # MlflowException, OSError, sqlalchemy errors, unsupported schemes...
            text = " ".join(str(e).split())
            raise ConfigError(
                key, f"cannot open an MLflow run at {target.uri}: {type(e).__name__}: {text[:400]}"
            ) from None
        self.status = None

    def _experiment(self):
        from mlflow.exceptions import MlflowException

        exp = self.client.get_experiment_by_name(self.target.experiment)
        if exp is not None:
            if exp.lifecycle_stage == "deleted":
                raise ValueError(
                    f"experiment {self.target.experiment!r} is deleted; restore it or pick another tracking.experiment"
                )
            return exp.experiment_id
        try:
            return self.client.create_experiment(
                self.target.experiment, artifact_location=self.target.artifact_location
            )
        except MlflowException:  # created meanwhile by a concurrent job
            exp = self.client.get_experiment_by_name(self.target.experiment)
            if exp is None:
                raise
            return exp.experiment_id

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.end("FINISHED" if exc_type is None else "FAILED")
        return False

    def end(self, status):
        """Terminate the run once; a failure here is a warning (everything was logged before)."""
        if self.status is not None:
            return
        self.status = status
        try:
            self.client.set_terminated(self.run_id, status)
        except Exception as e:
            print(f"tracking warning: could not mark MLflow run {self.run_id} {status}: {e}", file=sys.stderr)

    def log_training(self, estimator, cfg, report):
        """Params, tags and metrics of a fitted, evaluated job (`report`: what metrics.json holds)."""
        from mlflow.entities import Metric, Param, RunTag

        now = int(time.time() * 1000)
        cls = type(estimator)
        tags = {
            "sparkml.estimator": f"{cls.__module__}.{cls.__qualname__}",
            "sparkml.config_sha256": config_hash(cfg),
            "sparkml.output_dir": cfg["output"]["dir"],
        }
        params = [Param(k, v) for k, v in estimator_params(estimator).items()]
        metrics = [Metric(OBJECTIVE, float(v), now, step) for step, v in enumerate(report["objectiveHistory"] or [])]
        values = {HOLDOUT_PREFIX + k: v for k, v in report["metrics"].items()}
        values.update({"train_rows": report["rows"]["train"], "test_rows": report["rows"]["test"]})
        values.update({f"{k}_seconds": v for k, v in report["seconds"].items()})
        if report.get("totalIterations") is not None:
            values["total_iterations"] = report["totalIterations"]
        if report.get("tuning"):  # each param map's metric at its step, and the best one's
            metrics += [Metric(k, float(v), now, step) for k, v, step in tuning.mlflow_metrics(report["tuning"])]
        metrics += [
            Metric(k, float(v), now, 0)
            for k, v in values.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)
        ]
        self.client.log_batch(self.run_id, tags=[RunTag(k, v) for k, v in tags.items()])
        for chunk in _batches(params, 100):
            self.client.log_batch(self.run_id, params=chunk)
        for chunk in _batches(metrics, 1000):
            self.client.log_batch(self.run_id, metrics=chunk)

    def log_outputs(self, cfg, files, local_dir=None):
        """Artifacts: config.yaml, `files` ({name: bytes}, e.g. metrics.json) and, when the outputs are
        staged on the local filesystem, `local_dir`'s ``model/`` directory."""
        with tempfile.TemporaryDirectory(prefix="sparkml-mlflow-") as tmp:
            with open(os.path.join(tmp, "config.yaml"), "w", encoding="utf-8") as f:
                yaml.safe_dump(_plain(cfg), f, sort_keys=False)
            for name, data in files.items():
                with open(os.path.join(tmp, name), "wb") as f:
                    f.write(data)
            self.client.log_artifacts(self.run_id, tmp)
        if local_dir is not None and os.path.isdir(os.path.join(local_dir, "model")):
            from sparkml.mlflow import save_model

            with tempfile.TemporaryDirectory(prefix="sparkml-mlflow-") as tmp:
                # an MLflow model: MLlib's files under data/model, and the python_function flavor that
                # serves them without Spark (``sparkml.serving``)
                save_model(os.path.join(local_dir, "model"), os.path.join(tmp, "model"))
                self.client.log_artifacts(self.run_id, os.path.join(tmp, "model"), "model")

    def info(self):
        """What the report and the final line show."""
        return {
            "uri": self.target.uri,
            "experiment": self.target.experiment,
            "experiment_id": self.experiment_id,
            "run_id": self.run_id,
        }


def start(cfg, job):
    """Open the run of a validated config (ConfigError when the store cannot be opened)."""
    require_mlflow()
    return JobRun(resolve(cfg, job), job)
