"""`spark-submit jobs/train.py` on a real multi-process Spark: `local-cluster[2,1,1024]` starts two
executor JVMs with their own Python workers, so the code must ship to them (jobs.session zips
sparkml + gpu onto their path) and the barrier stage of `allreduce` must rendezvous across
processes. Each strategy's saved model must equal the one the same job fits in-process with
``sync`` (the strategies reach the same optimum; tol is tight)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml

from jobs import datasets, train

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FEATURES = [f"c{i}" for i in range(8)]


@pytest.fixture(scope="module")
def data(spark, tmp_path_factory):
    """Fixed train and test Parquet files: both runs fit the very same rows (a holdout split would
    depend on the partitioning, which differs between the two masters)."""
    import pandas as pd

    out = tmp_path_factory.mktemp("cluster-data")
    X, y = datasets.generate_arrays("binary", 3000, len(FEATURES), seed=5)
    pdf = pd.DataFrame(X, columns=FEATURES)
    pdf["y"] = y
    spark.createDataFrame(pdf[:2400]).write.parquet(str(out / "train"))
    spark.createDataFrame(pdf[2400:]).write.parquet(str(out / "test"))
    return {"train": str(out / "train"), "test": str(out / "test"), "features": FEATURES, "label": "y"}


def _config(tmp_path, data, name, strategy):
    raw = {"data": data,
           "model": {"estimator": "LogisticRegression",
                     "params": {"regParam": 0.01, "strategy": strategy, "maxIter": 100, "tol": 1e-10}},
           "output": {"dir": str(tmp_path / name), "overwrite": True}}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


@pytest.fixture(scope="module")
def local_run(spark, data, tmp_path_factory):
    """The same job in this process (local[2]); every strategy must reproduce its model."""
    tmp = tmp_path_factory.mktemp("local-run")
    assert train.main(["--config", _config(tmp, data, "local", "sync")], spark=spark) == 0
    return json.loads((tmp / "local" / "metrics.json").read_text()), _coefficients(spark, str(tmp / "local"))


def _coefficients(spark, run_dir):
    from pyspark.ml.classification import LogisticRegressionModel  # stock MLlib reads our files

    model = LogisticRegressionModel.load(os.path.join(run_dir, "model"))
    return np.append(model.coefficients.toArray(), model.intercept)


@pytest.mark.cluster
@pytest.mark.parametrize("strategy", ["sync", "allreduce", "averaging"])
def test_spark_submit_on_local_cluster(spark, data, local_run, tmp_path, strategy):
    spark_submit = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    cmd = [spark_submit, "--master", "local-cluster[2,1,1024]", "--conf", "spark.ui.enabled=false",
           "--conf", "spark.ui.showConsoleProgress=false", "--conf", "spark.executor.memory=1g",
           os.path.join(ROOT, "jobs", "train.py"), "--config", _config(tmp_path, data, "cluster", strategy)]
    done = subprocess.run(cmd, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    metrics = json.loads((tmp_path / "cluster" / "metrics.json").read_text())

    local, ref = local_run
    ours = _coefficients(spark, str(tmp_path / "cluster"))
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-6 * np.linalg.norm(ref))
    assert metrics["rows"] == local["rows"] == {"train": 2400, "test": 600}
    assert abs(metrics["metrics"]["areaUnderROC"] - local["metrics"]["areaUnderROC"]) < 1e-6
    assert metrics["metrics"]["areaUnderROC"] > 0.8
