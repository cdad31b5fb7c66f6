"""``mlflow.pyspark.ml.autolog()`` with this library's estimators (mlflow 3.17, mlflow-skinny is enough).

What the tests pin down (docs/mlflow.md, "Autologging"):

- autolog patches ``pyspark.ml.base.Estimator.fit``; our estimators subclass pyspark.ml's, so a fit is an
  autologged run: every Param (ours too: strategy, device, dtype, ...) as ``str(value)``, and the tags
  ``estimator_name`` / ``estimator_class``. ``Model.transform`` + ``Evaluator.evaluate`` after the fit log
  the evaluator's metric to the fit's run.
- The fitted model is logged only when its fully qualified class name is on the allowlist; mlflow's
  built-in list names pyspark.ml's classes only (``pyspark.ml.classification.LogisticRegressionModel``...),
  so by default our model is skipped with a warning. ``log_model_allowlist=["sparkml.*", ...]`` logs it
  with ``mlflow.spark.log_model``: a ``PipelineModel`` around it in MLlib's files (JSON and Parquet, no
  pickle). ``mlflow.spark.load_model`` gives back pyspark.ml's stock model for the linear models (their
  files name the Scala class) and our ``KernelSVCModel`` for KernelSVC (which needs sparkml installed).
  The signature names the features column: mlflow finds the feature columns by dropping each one and
  catching the IllegalArgumentException MLlib raises for a missing column, which ours raise too.
- Without the allowlist, ``mlflow.spark.log_model(model.toSpark(), ...)`` in the same run logs the stock
  model.

``log_model`` infers the model's pip requirements by loading it in a subprocess that starts its own local
Spark (about 20 s here); the allowlist tests replace that inference by its fallback (the pyspark pin) to
stay fast. The tests use their own sqlite store (tmp_path) through $MLFLOW_TRACKING_URI and switch
autologging off again, so nothing leaks into the other modules' tests.
"""

import os

import numpy as np
import pytest

mlflow = pytest.importorskip("mlflow")
import mlflow.pyspark.ml  # noqa: E402, F811  (importorskip bound the name)
import mlflow.spark  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

import sparkml.mlflow  # noqa: E402

LR_CLASS = "sparkml.linear.logistic_regression.LogisticRegression"
LR_MODEL_STAGE_CLASS = "org.apache.spark.ml.classification.LogisticRegressionModel"  # MLlib's layout
SKIP_WARNING = "will not be autologged because it is not allowlisted"


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A fresh sqlite store as mlflow's tracking URI and an experiment whose artifacts stay in tmp_path (the
    store's default experiment would put them in ./mlruns); autologging off afterwards."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)
    assert mlflow.get_tracking_uri() == uri  # nothing set it in-process: the environment decides
    client = MlflowClient(uri)
    experiment_id = client.create_experiment("autolog", artifact_location=(tmp_path / "artifacts").as_uri())
    monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", experiment_id)
    try:
        yield client
    finally:
        mlflow.pyspark.ml.autolog(disable=True)
        while mlflow.active_run() is not None:
            mlflow.end_run()


@pytest.fixture
def no_requirements_inference(monkeypatch):
    """mlflow.spark.log_model's requirement inference (a subprocess with its own local Spark) -> its fallback."""
    import mlflow.models

    monkeypatch.setattr(mlflow.models, "infer_pip_requirements", lambda *a, fallback=None, **k: fallback)


@pytest.fixture(scope="module")
def binary(spark):
    """400 rows, 3 dense features, a noisy linear binary label, 2 partitions; cached."""
    from pyspark.ml.linalg import Vectors

    rng = np.random.default_rng(3)
    x = rng.normal(size=(400, 3))
    y = (x @ np.array([1.5, -2.0, 0.5]) + 0.3 + rng.logistic(size=400) * 0.5 > 0).astype(float)
    rows = [(i, Vectors.dense(x[i]), float(y[i])) for i in range(len(y))]
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 2), ["id", "features", "label"]).cache()
    df.count()
    yield df
    df.unpersist()


def artifact_paths(client, run_id, path=None):
    """Every file path under `path` of a run's artifacts, recursively."""
    out = []
    for info in client.list_artifacts(run_id, path):
        out.extend(artifact_paths(client, run_id, info.path) if info.is_dir else [info.path])
    return out


def predictions(model, df):
    rows = model.transform(df).select("id", "prediction", "probability").orderBy("id").collect()
    return [r.prediction for r in rows], np.array([r.probability.toArray() for r in rows])


def test_autolog_logs_params_and_skips_our_model_then_to_spark_logs_it(spark, binary, store, caplog):
    from pyspark.ml.classification import LogisticRegressionModel as StockModel
    from pyspark.ml.evaluation import BinaryClassificationEvaluator

    from sparkml.classification import LogisticRegression

    mlflow.pyspark.ml.autolog()  # the defaults: mlflow's built-in allowlist
    estimator = LogisticRegression(regParam=0.05, elasticNetParam=0.25, maxIter=30, tol=1e-8)
    with caplog.at_level("WARNING", logger="mlflow.pyspark.ml"), mlflow.start_run() as active:
        model = estimator.fit(binary)
        holdout = binary.filter("id % 4 = 0")  # autolog names the metric after the variable
        auc = BinaryClassificationEvaluator().evaluate(model.transform(holdout))
        logged_before = artifact_paths(store, active.info.run_id)
        info = mlflow.spark.log_model(model.toSpark(), "model", pip_requirements=["pyspark==4.3.0"])
    run = store.get_run(active.info.run_id)
    assert run.info.artifact_uri.startswith(store.get_experiment(run.info.experiment_id).artifact_location)

    # params: the estimator's whole Param map (set and default values), each as str(value)
    expected = {p.name: str(v) for p, v in estimator.extractParamMap().items()}
    assert run.data.params == expected
    assert {
        "regParam": "0.05",
        "elasticNetParam": "0.25",
        "maxIter": "30",
        "tol": "1e-08",
        "fitIntercept": "True",
        "strategy": "auto",
        "device": "auto",
        "dtype": "float32",
    }.items() <= run.data.params.items()
    assert run.data.tags["estimator_class"] == LR_CLASS
    assert run.data.tags["estimator_name"] == "LogisticRegression"

    # transform + evaluate after the fit: the evaluator's metric lands in the fit's run
    assert run.data.metrics == {"areaUnderROC_holdout": pytest.approx(auc, abs=1e-12)}
    assert auc > 0.9

    # the model was not autologged: not on mlflow's built-in allowlist
    assert f"Model {model.uid} {SKIP_WARNING}" in caplog.text
    assert logged_before == ["metric_info.json"]  # the evaluator call's record; no model/

    # the stock model, logged explicitly in the same run, loads back as itself with our numbers
    assert info.model_uri == f"runs:/{run.info.run_id}/model"
    loaded = mlflow.spark.load_model(info.model_uri)
    assert [type(s) for s in loaded.stages] == [StockModel]
    assert loaded.stages[0].coefficients == model.coefficients
    assert loaded.stages[0].intercept == model.intercept
    got, want = predictions(loaded, binary), predictions(model, binary)
    assert got[0] == want[0]
    np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-12)


def test_allowlisted_model_is_logged_as_mllib_files_and_loads_as_the_stock_model(
    spark, binary, store, no_requirements_inference, caplog
):
    from pyspark.ml import PipelineModel
    from pyspark.ml.classification import LogisticRegressionModel as StockModel

    from sparkml.classification import LogisticRegression

    sparkml.mlflow.autolog(log_datasets=False)  # mlflow.pyspark.ml.autolog, our models allowlisted
    with caplog.at_level("WARNING", logger="mlflow.pyspark.ml"):
        model = LogisticRegression(regParam=0.01, maxIter=20).fit(binary)  # autolog opens and ends the run
    run = mlflow.last_active_run()
    assert run.info.status == "FINISHED" and run.data.params["regParam"] == "0.01"
    assert run.data.tags["mlflow.autologging"] == "pyspark.ml" and run.data.tags["estimator_class"] == LR_CLASS
    assert SKIP_WARNING not in caplog.text
    assert "Failed to infer model signature" not in caplog.text  # the column probe gets MLlib's error

    files = artifact_paths(store, run.info.run_id, "model")
    stage = f"model/sparkml/stages/0_{model.uid}"
    assert {"model/MLmodel", "model/requirements.txt"} <= set(files)
    assert any(f.startswith(f"{stage}/metadata/part-") for f in files)
    assert any(f.startswith(f"{stage}/data/part-") and f.endswith(".parquet") for f in files)
    assert not [f for f in files if f.endswith((".pkl", ".pickle", ".cloudpickle"))]

    local = mlflow.artifacts.download_artifacts(f"runs:/{run.info.run_id}/model")
    import yaml

    with open(os.path.join(local, "MLmodel")) as f:
        mlmodel = yaml.safe_load(f)
    assert mlmodel["flavors"]["spark"]["model_class"] == "pyspark.ml.pipeline.PipelineModel"
    assert mlmodel["flavors"]["python_function"]["loader_module"] == "mlflow.spark"
    assert "features" in mlmodel["signature"]["inputs"]
    import json

    meta_dir = os.path.join(local, "sparkml", "stages", f"0_{model.uid}", "metadata")
    part = next(n for n in sorted(os.listdir(meta_dir)) if n.startswith("part-"))
    with open(os.path.join(meta_dir, part)) as f:
        metadata = json.loads(f.readline())
    assert metadata["class"] == LR_MODEL_STAGE_CLASS and metadata["sparkml"]["class"].endswith(
        "LogisticRegressionModel"
    )

    # loading it back: pyspark.ml's own model (the files name the Scala class), our numbers and predictions
    loaded = mlflow.spark.load_model(f"runs:/{run.info.run_id}/model")
    assert isinstance(loaded, PipelineModel) and [type(s) for s in loaded.stages] == [StockModel]
    assert loaded.stages[0].coefficients == model.coefficients and loaded.stages[0].intercept == model.intercept
    got, want = predictions(loaded, binary), predictions(model, binary)
    assert got[0] == want[0]
    np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-12)


def test_allowlisted_kernel_svc_loads_back_as_our_model(spark, binary, store, no_requirements_inference):
    from sparkml.classification import KernelSVC, KernelSVCModel

    mlflow.pyspark.ml.autolog(log_model_allowlist=["sparkml.*"], log_datasets=False)
    model = KernelSVC(numLandmarks=20, maxIter=10, probability=True).fit(binary)
    run = mlflow.last_active_run()
    assert run.data.tags["estimator_class"] == "sparkml.kernel.kernel_svc.KernelSVC"
    assert run.data.params["numLandmarks"] == "20" and run.data.params["kernel"] == "rbf"

    loaded = mlflow.spark.load_model(f"runs:/{run.info.run_id}/model")
    assert [type(s) for s in loaded.stages] == [KernelSVCModel]  # no stock twin: sparkml must be installed
    got, want = predictions(loaded, binary), predictions(model, binary)
    assert got[0] == want[0]
    np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-6)
