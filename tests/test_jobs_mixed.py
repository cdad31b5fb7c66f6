"""GeneralizedLinearMixedModel through the batch jobs, against MLflow's sqlite store: the train job fits it from
YAML and logs it with its serving flavor; the retrain job registers it per window and warm-starts a window's fit
from the champion's tables (read from the registry, then the downloaded files deleted)."""

import json

import numpy as np
import pytest
import yaml

from sparkml.jobs import retrain, train

mlflow = pytest.importorskip("mlflow")

ROWS, USERS = 1500, 30
PARAMS = {"family": "binomial", "entityCols": ["user"], "entityFeaturesCols": ["uf"], "regParam": 0.001}


@pytest.fixture(scope="module")
def windows(spark, tmp_path_factory):
    """Two windows of clicks by the same users, each user with their own intercept and slopes on 2 features."""
    import pandas as pd
    from pyspark.ml.functions import array_to_vector

    rng = np.random.default_rng(3)
    a, g = rng.normal(scale=1.0, size=USERS), rng.normal(scale=0.8, size=(USERS, 2))
    frames = []
    for window in ("1", "2"):
        user, x, z = rng.integers(0, USERS, ROWS), rng.normal(size=(ROWS, 3)), rng.normal(size=(ROWS, 2))
        eta = -0.2 + x @ [0.8, -0.5, 0.3] + a[user] + (z * g[user]).sum(1)
        y = (rng.random(ROWS) < 1 / (1 + np.exp(-eta))).astype(float)
        frames.append(pd.DataFrame({"features": list(x), "uf": list(z), "user": user, "label": y, "window": window}))
    path = str(tmp_path_factory.mktemp("clicks") / "clicks")
    df = spark.createDataFrame(pd.concat(frames, ignore_index=True))
    df = df.withColumn("features", array_to_vector("features")).withColumn("uf", array_to_vector("uf"))
    df.write.partitionBy("window").parquet(path)
    return path


def config(tmp_path, data, **sections):
    raw = {
        "data": {"train": data, "holdout_fraction": 0.25},
        "model": {"estimator": "GeneralizedLinearMixedModel", "params": PARAMS},
        "output": {"dir": str(tmp_path / "runs")},
        **sections,
    }
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def test_the_jobs_train_serve_and_warm_start_a_mixed_model(spark, windows, tmp_path, capsys):
    import mlflow.pyfunc
    from mlflow.tracking import MlflowClient

    from sparkml.regression import GeneralizedLinearMixedModelModel

    code = train.main(["--config", config(tmp_path / "train", f"{windows}/window=1")], spark=spark)
    assert code == 0
    report = json.loads((tmp_path / "train" / "runs" / "metrics.json").read_text())
    assert report["metrics"]["rmse"] < 0.45 and report["totalIterations"] == len(report["objectiveHistory"]) >= 2
    model = GeneralizedLinearMixedModelModel.load(str(tmp_path / "train" / "runs" / "model"))
    assert model.getEntityCols() == ["user"] and model.randomEffects[0].count() == USERS
    run = MlflowClient(report["mlflow"]["uri"]).get_run(report["mlflow"]["run_id"])
    served = mlflow.pyfunc.load_model(f"{run.info.artifact_uri}/model")
    example = served.metadata.load_input_example(f"{run.info.artifact_uri}/model")
    assert list(example.columns) == ["features", "user", "uf"] and len(served.predict(example)) == 1

    gate = {"metrics": {"rmse": {"threshold": 0.5}}}
    cfg = config(tmp_path / "retrain", windows, registry={"model_name": "clicks"}, gate=gate)
    decisions = []
    for window in ("1", "2"):
        assert retrain.main(["--config", cfg, "--window", window], spark=spark) == 0
        decisions.append(
            json.loads((tmp_path / "retrain" / "runs" / window / f"v{window}" / "decision.json").read_text())
        )
    assert decisions[0]["warm_start"]["used"] is False
    assert decisions[1]["warm_start"] == {
        "used": True,
        "from_version": "1",
        "reason": "started from champion version 1's coefficients",
    }
    # started from the champion's tables, window 2 needs fewer passes than window 1 did from zero
    assert decisions[1]["training"]["iterations"] < decisions[0]["training"]["iterations"]
    capsys.readouterr()
