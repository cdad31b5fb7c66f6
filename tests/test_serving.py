"""Scoring without Spark: ``sparkml.serving`` reads a saved model with pyarrow and scores pandas rows as
``transform`` does, and ``sparkml.mlflow.log_model``'s ``python_function`` flavor serves it over HTTP
(a real ``mlflow models serve``)."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pandas as pd
import pytest
from support.data_helpers import linear_frame
from support.helpers import ROOT

from sparkml import serving
from sparkml.classification import KernelSVC, LinearSVC, LogisticRegression
from sparkml.regression import LinearRegression

pytest.importorskip("mlflow")


@pytest.fixture(scope="module")
def df(spark):
    return linear_frame(spark, n=400, partitions=2)


def _features(df):
    return np.array([r.features.toArray() for r in df.orderBy("id").select("features").collect()])


def _expected(model, df, columns):
    rows = model.transform(df).orderBy("id").select(*columns).collect()
    return {c: np.array([r[c].toArray() if hasattr(r[c], "toArray") else r[c] for r in rows]) for c in columns}


MODELS = {
    "binary logistic": lambda: LogisticRegression(regParam=0.01, threshold=0.4),
    "multinomial logistic": lambda: LogisticRegression(regParam=0.01, labelCol="label3"),
    "linear svc": lambda: LinearSVC(regParam=0.01),
    "linear regression": lambda: LinearRegression(regParam=0.01, labelCol="y"),
    "kernel svc nystroem": lambda: KernelSVC(numLandmarks=40, labelCol="label3", probability=True),
    "kernel svc rff": lambda: KernelSVC(method="rff", numLandmarks=64),
}
# make test scores one of each reading path (MLlib's matrix and vector rows, a kernel map); make test-full all
FULL_ONLY = {"multinomial logistic", "linear svc", "kernel svc rff"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.full) if n in FULL_ONLY else n for n in MODELS])
def test_a_saved_model_scores_without_spark_as_transform(df, tmp_path, name):
    model = MODELS[name]().fit(df)
    model.save(str(tmp_path / "model"))
    scorer = serving.load(str(tmp_path / "model"))
    out = scorer.score(_features(df))
    expected = _expected(model, df, list(out))
    assert set(out) >= {"prediction"} and set(out) == set(expected)
    for column, values in out.items():
        np.testing.assert_allclose(values, expected[column], rtol=1e-9, atol=1e-9, err_msg=f"{name}: {column}")


def test_a_wrong_width_is_refused(df, tmp_path):
    LinearSVC(maxIter=3).fit(df).save(str(tmp_path / "svc"))
    with pytest.raises(ValueError, match="rows of 4 numbers"):
        serving.load(str(tmp_path / "svc")).score(np.zeros((2, 3)))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.system
def test_a_logged_model_is_served_by_mlflow_models_serve(df, tmp_path, monkeypatch):
    import mlflow
    from mlflow.tracking._tracking_service import utils

    from sparkml.mlflow import log_model

    # the store, and the artifacts it puts under ./mlruns, in tmp_path; MLflow's global URI restored after
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(utils, "_tracking_uri", utils._tracking_uri)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    model = KernelSVC(numLandmarks=40, labelCol="label3", probability=True).fit(df)
    x = _features(df)
    with mlflow.start_run():
        info = log_model(model, input_example=x[:3])
    assert info.signature is not None and info.signature.inputs.input_names() == ["features"]
    local = mlflow.artifacts.download_artifacts(info.model_uri, dst_path=str(tmp_path / "served"))
    loaded = mlflow.pyfunc.load_model(local)
    frame = pd.DataFrame({"features": [list(r) for r in x[:50]]})
    expected = _expected(model, df, ["prediction", "probability"])
    np.testing.assert_allclose(loaded.predict(frame)["prediction"], expected["prediction"][:50])

    port = _free_port()
    bin_dir = os.path.dirname(sys.executable)  # mlflow runs uvicorn from PATH
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]),
        PATH=os.pathsep.join([bin_dir, os.environ.get("PATH", "")]),
    )
    mlflow_cli = os.path.join(bin_dir, "mlflow")
    server = subprocess.Popen(
        [mlflow_cli, "models", "serve", "-m", local, "--env-manager", "local", "-h", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                if server.poll() is not None or time.time() > deadline:
                    raise AssertionError(server.stdout.read().decode()[-3000:]) from None
                time.sleep(0.5)
        body = json.dumps({"dataframe_split": {"columns": ["features"], "data": [[list(r)] for r in x[:50]]}})
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/invocations", body.encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as r:
            predictions = json.loads(r.read())["predictions"]
    finally:
        server.terminate()
        server.wait(30)
    got = pd.DataFrame(predictions)
    np.testing.assert_allclose(got["prediction"], expected["prediction"][:50], rtol=0, atol=0)
    np.testing.assert_allclose(np.stack(got["probability"]), expected["probability"][:50], rtol=1e-9, atol=1e-12)
