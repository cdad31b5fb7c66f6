"""`jobs.retrain` with a GeneralizedLinearRegression: Poisson counts with an exposure offset, gated on the
holdout deviance (MLlib's ``evaluate(holdout).deviance``), against a real MLflow registry (sqlite file)."""

import json
import os

import numpy as np
import pytest
import yaml

from sparkml.jobs import retrain

mlflow = pytest.importorskip("mlflow")
from mlflow.tracking import MlflowClient  # noqa: E402

ROWS, FEATURES = 3000, 5


@pytest.fixture(scope="module")
def claims(spark, tmp_path_factory):
    """Windows 1 and 2 of Poisson claim counts with log(exposure) offsets; window 2's effects moved."""
    import pandas as pd
    from pyspark.ml.functions import array_to_vector

    rng = np.random.default_rng(11)
    w1 = 0.3 * rng.standard_normal(FEATURES)
    w2 = w1 + 0.4 * rng.standard_normal(FEATURES)
    frames = []
    for window, w in (("1", w1), ("2", w2)):
        X = rng.standard_normal((ROWS, FEATURES))
        exposure = rng.uniform(0.2, 2.0, ROWS)
        counts = rng.poisson(exposure * np.exp(X @ w - 0.5)).astype(float)
        frames.append(
            pd.DataFrame({"features": list(X), "claims": counts, "log_exposure": np.log(exposure), "window": window})
        )
    path = str(tmp_path_factory.mktemp("claims") / "claims")
    df = spark.createDataFrame(pd.concat(frames, ignore_index=True))
    df.withColumn("features", array_to_vector("features")).write.partitionBy("window").parquet(path)
    return path


def write_config(tmp_path, data_path, gate):
    raw = {
        "data": {"train": data_path, "label": "claims"},
        "model": {
            "estimator": "GeneralizedLinearRegression",
            "params": {"family": "poisson", "link": "log", "offsetCol": "log_exposure"},
        },
        "output": {"dir": str(tmp_path / "runs")},
        "registry": {"model_name": "claims"},
        "gate": {"metrics": gate},
    }
    path = tmp_path / "retrain.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def decision(tmp_path, window, version):
    return json.loads((tmp_path / "runs" / window / f"v{version}" / "decision.json").read_text())


def test_a_poisson_model_is_gated_on_its_holdout_deviance(spark, claims, tmp_path, capsys):
    from pyspark.ml.regression import GeneralizedLinearRegressionModel as Stock

    cfg = write_config(tmp_path, claims, {"deviance": {"min_relative_change": 0.0}})
    assert retrain.main(["--config", cfg, "--window", "1"], spark=spark) == 0
    first = decision(tmp_path, "1", 1)["metrics"]
    assert first["champion"] is None and first["candidate"]["deviance"] > 0

    assert retrain.main(["--config", cfg, "--window", "2"], spark=spark) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith("claims window 2: promoted version 2 to champion (was version 1)")
    second = decision(tmp_path, "2", 2)
    cand, champ = second["metrics"]["candidate"]["deviance"], second["metrics"]["champion"]["deviance"]
    assert cand < champ  # the moved effects: window 1's model fits window 2's holdout worse

    # the number gated is MLlib's deviance of the registered model on that holdout, offsets included
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    run = client.get_run(second["run"]["run_id"])
    assert run.data.metrics["holdout_deviance"] == pytest.approx(cand)
    local = client.download_artifacts(run.info.run_id, "model", str(tmp_path / "downloaded"))
    model = Stock.load(os.path.join(local, "data", "model"))  # the registered files, read by MLlib's class
    assert model.getOffsetCol() == "log_exposure" and model.getFamily() == "poisson"

    # a ceiling the candidate cannot meet: registered, not promoted, with both numbers in the reason
    strict = write_config(tmp_path, claims, {"deviance": {"threshold": 1.0}})
    assert retrain.main(["--config", strict, "--window", "2"], spark=spark) == 0
    third = decision(tmp_path, "2", 3)
    assert third["decision"]["outcome"] == "rejected"
    assert (
        f"deviance {third['metrics']['candidate']['deviance']:.4f} is above the threshold 1.0000"
        in (third["decision"]["reason"])
    )


def test_deviance_is_refused_for_a_model_without_one(spark, claims, tmp_path, capsys):
    from sparkml.jobs.config import ConfigError

    cfg = write_config(tmp_path, claims, {"deviance": {"threshold": 1.0}})
    raw = yaml.safe_load(open(cfg))
    raw["model"] = {"estimator": "LinearRegression", "params": {}}
    open(cfg, "w").write(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"gate\.metrics\.deviance.*not a holdout metric of a regression model"):
        retrain.load_config(cfg, [])
