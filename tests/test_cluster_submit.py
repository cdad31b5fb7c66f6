"""`jobs/train.py` under spark-submit on a real multi-process Spark: `local-cluster[2,1,1024]` starts two
executor JVMs with their own Python workers, so the code must ship to them (jobs.session zips
sparkml + gpu onto their path) and the barrier stage of `allreduce` must rendezvous across
processes (``ssp``'s and ``gossip``'s point-to-point messages too). Each strategy's saved model must equal
the one the same job fits in-process with ``sync`` (the strategies reach the same optimum; tol is tight).

The five jobs run in one application (``tests/support/cluster_submit_run.py`` runs the file ``jobs/train.py``
once per config, as spark-submit runs it), so its three JVMs start once."""

import json
import os
import sys
import threading

import numpy as np
import pytest
import yaml
from support import background
from support.data_helpers import generated_table
from support.helpers import SUPPORT, coefficient_vector

from sparkml.jobs import train

FEATURES = [f"c{i}" for i in range(8)]  # generated_table's column names
STRATEGIES = ["sync", "allreduce", "averaging", "ssp", "gossip"]
FIRST_ORDER = {"maxIter": 5000, "tol": 1e-12}  # ssp and gossip: gradient steps, many more of them
_SCRATCH, _LOCK = {}, threading.Lock()


def _data():
    """Fixed train and test Parquet files, written once (pandas: no Spark needed to start the runs).
    Both runs fit the very same rows (a holdout split would depend on the partitioning, which
    differs between the two masters)."""
    with _LOCK:
        if "data" not in _SCRATCH:
            out = background.scratch_dir("cluster-submit-")
            pdf = generated_table(3000, len(FEATURES), seed=5)  # columns FEATURES and y
            pdf[:2400].to_parquet(os.path.join(out, "train.parquet"), index=False)
            pdf[2400:].to_parquet(os.path.join(out, "test.parquet"), index=False)
            _SCRATCH["dir"] = out
            _SCRATCH["data"] = {
                "train": os.path.join(out, "train.parquet"),
                "test": os.path.join(out, "test.parquet"),
                "features": FEATURES,
                "label": "y",
            }
        return _SCRATCH["data"]


def _config(directory, name, strategy):
    raw = {
        "data": _data(),
        "model": {
            "estimator": "LogisticRegression",
            "params": {
                "regParam": 0.01,
                "strategy": strategy,
                "maxIter": 100,
                "tol": 1e-10,
                **(FIRST_ORDER if strategy in ("ssp", "gossip") else {}),
            },
        },
        "output": {"dir": os.path.join(directory, name), "overwrite": True},
    }
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{name}.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(raw, f)
    return path


def _run_dir(strategy):
    _data()
    return os.path.join(_SCRATCH["dir"], strategy)


def _prepare():
    for strategy in STRATEGIES:
        _config(_run_dir(strategy), "cluster", strategy)


def background_runs():
    """One spark-submit that runs the job once per strategy (one application: three JVMs), in the background."""
    spark_submit = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    argv = [
        spark_submit,
        "--master",
        "local-cluster[2,1,1024]",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.ui.showConsoleProgress=false",
        "--conf",
        "spark.executor.memory=1g",
        os.path.join(SUPPORT, "cluster_submit_run.py"),
        *(os.path.join(_run_dir(strategy), "cluster.yaml") for strategy in STRATEGIES),
    ]
    env = background.python_env(sys.executable)
    run = background.Run(argv, env=env, group="local-cluster", prepare=_prepare, timeout=1500)
    return {"local-cluster": run}


@pytest.fixture(scope="module")
def local_run(spark, tmp_path_factory):
    """The same job in this process (local[2]); every strategy must reproduce its model."""
    tmp = str(tmp_path_factory.mktemp("local-run"))
    assert train.main(["--config", _config(tmp, "local", "sync")], spark=spark) == 0
    with open(os.path.join(tmp, "local", "metrics.json")) as f:
        return json.load(f), _coefficients(spark, os.path.join(tmp, "local"))


def _coefficients(spark, run_dir):
    from pyspark.ml.classification import LogisticRegressionModel  # stock MLlib reads our files

    return coefficient_vector(LogisticRegressionModel.load(os.path.join(run_dir, "model")))


@pytest.mark.cluster
@pytest.mark.system
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_spark_submit_on_local_cluster(spark, local_run, strategy):
    done = background.result("local-cluster", background_runs())
    assert f"{strategy}/cluster.yaml: exit 0" in done.stdout, done.stdout[-2000:] + done.stderr[-4000:]
    run_dir = os.path.join(_run_dir(strategy), "cluster")
    with open(os.path.join(run_dir, "metrics.json")) as f:
        metrics = json.load(f)

    local, ref = local_run
    ours = _coefficients(spark, run_dir)
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-6 * np.linalg.norm(ref))
    assert metrics["rows"] == local["rows"] == {"train": 2400, "test": 600}
    assert abs(metrics["metrics"]["areaUnderROC"] - local["metrics"]["areaUnderROC"]) < 1e-6
    assert metrics["metrics"]["areaUnderROC"] > 0.8
