"""A job's ``main`` called in process where it must refuse before any work (tests/test_jobs_refusals.py,
tests/test_jobs_fuzz.py): ``guard`` makes a Spark session, an MLflow client and an estimator raise
``Reached``; ``call`` returns the exit code and what the job printed; ``tree`` lists what is on disk."""

import contextlib
import io
import os

import yaml

GATE = {"areaUnderROC": {"threshold": 0.8}}


class Reached(BaseException):
    """Raised where a refused job must never get (a BaseException: no ``except Exception`` of a job hides it)."""


def guard(monkeypatch):
    """Patch the session factory, ``MlflowClient`` and the estimator's construction to raise ``Reached``."""
    import mlflow.tracking

    from sparkml.jobs import session, train

    def stop(what):
        def reached(*args, **kwargs):
            raise Reached(f"a refused job got to {what}")

        return reached

    monkeypatch.setattr(session, "get_or_create", stop("a Spark session"))
    monkeypatch.setattr(mlflow.tracking, "MlflowClient", stop("an MLflow client"))
    monkeypatch.setattr(train, "build_estimator", stop("the estimator"))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def call(main, argv):
    """(exit code, stdout, stderr) of ``main(argv)``; argparse's exits count as exit codes."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


def tree(root):
    """Every file and directory under `root`, relative to it."""
    found = []
    for top, dirs, files in os.walk(root):
        found += [os.path.relpath(os.path.join(top, n), root) for n in dirs + files]
    return sorted(found)


def write_config(directory, retrain=False, **sections):
    """A valid train (or retrain) config in `directory` writing under ``<directory>/runs``; its path."""
    raw = {
        "data": {"train": "generated:binary", "generated": {"rows": 200, "features": 3}},
        "model": {"estimator": "LogisticRegression", "params": {"maxIter": 5}},
        "output": {"dir": os.path.join(directory, "runs")},
    }
    if retrain:
        raw.update(registry={"model_name": "events"}, gate={"metrics": GATE})
    for key, value in sections.items():
        raw[key] = {**raw.get(key, {}), **value}
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "job.yaml")
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(raw, f)
    return path
