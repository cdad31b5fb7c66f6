"""The jobs' ``tuning:`` section: its checks before Spark starts, and model selection end to end in ``jobs.train``
and ``jobs.retrain`` against the MLflow sqlite store, each map's metric equal to pyspark's CrossValidator's."""

import json

import numpy as np
import pytest
import yaml
from test_jobs_train import SMALL, write_config

from sparkml.jobs import config, retrain, train

mlflow = pytest.importorskip("mlflow")
from mlflow.tracking import MlflowClient  # noqa: E402

GRID = {"regParam": [0.001, 0.3, 3.0]}
BINARY = {"train": "generated:binary", "generated": SMALL}


def checked(tuning, params=None, estimator="LogisticRegression", train="generated:binary"):
    raw = {
        "data": {"train": train},
        "model": {"estimator": estimator, "params": params or {}},
        "output": {"dir": "/tmp/x"},
        "tuning": tuning,
    }
    return config.validate(raw)


@pytest.mark.parametrize(
    "tuning, params, key, words",
    [
        ({"grid": {"regParm": [0.1]}}, None, "tuning.grid.regParm", "unknown parameter of LogisticRegression"),
        ({"grid": {"regParam": [0.1, -1.0]}}, None, "tuning.grid.regParam[1]", "regParam"),
        ({"grid": {"regParam": "0.1"}}, None, "tuning.grid.regParam", "non-empty list"),
        ({"grid": {"regParam": []}}, None, "tuning.grid.regParam", "non-empty list"),
        ({"grid": {"maxIter": [10, "many"]}}, None, "tuning.grid.maxIter[1]", "an integer"),
        ({"grid": {"regParam": [0.1]}}, {"regParam": 0.2}, "tuning.grid.regParam", "also set in model.params"),
        ({"grid": {"regParam": [0.1]}, "folds": 1}, None, "tuning.folds", "at least 2"),
        ({"grid": {"regParam": [0.1]}, "train_ratio": 1.5}, None, "tuning.train_ratio", "(0, 1)"),
        ({"grid": {"regParam": [0.1]}, "metric": "rmse"}, None, "tuning.metric", "for classification"),
        ({"grid": {"regParam": [0.1]}, "parallelism": 0}, None, "tuning.parallelism", "at least 1"),
        ({"grid": {"regParam": [0.1]}, "foldz": 3}, None, "tuning.foldz", "unknown key (did you mean folds?)"),
    ],
)
def test_bad_tuning_sections_are_config_errors(tuning, params, key, words):
    with pytest.raises(config.ConfigError) as e:
        checked(tuning, params)
    assert str(e.value).startswith(f"{key}: ") and words in str(e.value)


@pytest.mark.parametrize(
    "tuning, params, estimator, train, key, words",
    [
        ({"metric": "logLoss"}, None, "LinearSVC", None, "tuning.metric", "LinearSVC gives no probabilities"),
        ({"metric": "logLoss"}, None, "KernelSVC", None, "tuning.metric", "set model.params.probability: true"),
        ({"metric": "areaUnderROC"}, None, None, "generated:multiclass", "tuning.metric", "needs two classes"),
        (
            {"grid": {"link": ["identity", "logit"]}},
            None,
            "GeneralizedLinearRegression",
            "generated:regression",
            "tuning.grid",
            "the map {link='logit'} is refused: GeneralizedLinearRegression does not support family 'gaussian'",
        ),
        (
            {"grid": {"offsetCol": ["nope"]}},
            None,
            "GeneralizedLinearRegression",
            None,
            "tuning.grid.offsetCol",
            "column",
        ),
        ({"grid": {"regParam": [float("inf"), 0.1]}}, None, None, None, "tuning.grid.regParam[0]", "finite"),
        ({"metric": "bogus"}, None, None, None, "tuning.metric", "expected one of"),  # checked without a grid too
        ({"folds": -1}, None, None, None, "tuning.folds", "at least 2"),
        (
            {},
            {"family": "poisson", "link": "logit"},
            "GeneralizedLinearRegression",
            None,
            "model.params",
            "does not support family 'poisson' with link 'logit'",
        ),
        ({}, {"offsetCol": "nope"}, "GeneralizedLinearRegression", None, "model.params.offsetCol", "'nope' is not in"),
    ],
)
def test_check_refuses_what_the_fit_or_the_search_would(tuning, params, estimator, train, key, words):
    """Each config the job would accept and then fail with a traceback after Spark starts (a metric the model or the
    data cannot give, a grid map the estimator refuses, a column the data lacks): a ConfigError naming the key."""
    with pytest.raises(config.ConfigError) as e:
        checked(tuning, params, estimator or "LogisticRegression", train or "generated:binary")
    assert str(e.value).startswith(f"{key}: ") and words in str(e.value), str(e.value)
    assert checked({"metric": "logLoss"}, {"probability": True}, "KernelSVC")["tuning"]["metric"] == "logLoss"


def test_tuning_section_defaults_and_conversion():
    cfg = checked({"grid": {"regParam": [1, 0.5], "maxIter": [5]}})
    assert cfg["tuning"]["grid"] == {"regParam": [1.0, 0.5], "maxIter": [5]}
    assert isinstance(cfg["tuning"]["grid"]["regParam"][0], float)
    assert (cfg["tuning"]["folds"], cfg["tuning"]["train_ratio"], cfg["tuning"]["metric"]) == (3, None, None)
    assert checked({})["tuning"]["grid"] == {}  # no grid: one fit, as before
    assert checked({"grid": {"regParam": [0.1]}, "metric": "r2"}, estimator="LinearRegression")["tuning"]["metric"]


def stock_avg_metrics(spark, report, folds, seed):
    """pyspark's CrossValidator with our estimator on the job's training rows (same folds, grid and metric)."""
    from pyspark.ml.evaluation import BinaryClassificationEvaluator
    from pyspark.ml.tuning import CrossValidator, ParamGridBuilder

    from sparkml.classification import LogisticRegression
    from sparkml.jobs import datasets

    cfg = report["config"]
    train_df, _, features = datasets.load(spark, cfg["data"])
    train_df, _ = datasets.split(train_df, cfg["data"]["holdout_fraction"], cfg["data"]["seed"])
    est = LogisticRegression(featuresCol=features, **cfg["model"]["params"])
    grid = ParamGridBuilder().addGrid(est.regParam, GRID["regParam"]).build()
    evaluator = BinaryClassificationEvaluator(metricName="areaUnderROC")
    cv = CrossValidator(estimator=est, estimatorParamMaps=grid, evaluator=evaluator, numFolds=folds, seed=seed)
    return list(cv.fit(train_df).avgMetrics)


def test_train_selects_by_cross_validation_and_logs_every_map(spark, tmp_path):
    tuning = {"grid": GRID, "folds": 2, "seed": 5}
    path = write_config(tmp_path, BINARY, params={"maxIter": 50})
    raw = yaml.safe_load(open(path))
    raw["tuning"] = tuning
    with open(path, "w") as f:
        yaml.safe_dump(raw, f)
    code = train.main(["--config", path], spark=spark)
    assert code == 0
    out = tmp_path / "run"
    report = json.loads((out / "metrics.json").read_text())
    record = report["tuning"]
    assert record["metric"] == "areaUnderROC" and record["method"] == "cross-validation"
    means = [m["metric"] for m in record["maps"]]
    assert [m["params"]["regParam"] for m in record["maps"]] == GRID["regParam"]
    np.testing.assert_allclose(means, stock_avg_metrics(spark, report, 2, 5), rtol=1e-6)
    best = int(np.argmax(means))
    assert record["best"]["params"]["regParam"] == GRID["regParam"][best] == report["params"]["regParam"]
    assert json.loads((out / "tuning.json").read_text()) == record
    assert (out / "tuning.png").read_bytes()[:4] == b"\x89PNG"
    client = MlflowClient(report["mlflow"]["uri"])
    history = client.get_metric_history(report["mlflow"]["run_id"], "tuning.areaUnderROC")
    steps = sorted((h.step, h.value) for h in history)
    assert [s for s, _ in steps] == [0, 1, 2] and [v for _, v in steps] == pytest.approx(means, rel=1e-12)
    run = client.get_run(report["mlflow"]["run_id"])
    assert run.data.params["regParam"] == str(GRID["regParam"][best])
    assert "tuning.json" in [a.path for a in client.list_artifacts(report["mlflow"]["run_id"])]


def test_train_validation_split_and_regression_metric(spark, tmp_path):
    data = {"train": "generated:regression", "generated": SMALL}
    path = write_config(tmp_path, data, estimator="LinearRegression", params={"maxIter": 50})
    raw = yaml.safe_load(open(path))
    raw["tuning"] = {"grid": {"regParam": [0.0, 10.0]}, "train_ratio": 0.7, "metric": "mae"}
    with open(path, "w") as f:
        yaml.safe_dump(raw, f)
    assert train.main(["--config", path], spark=spark) == 0
    record = json.loads((tmp_path / "run" / "metrics.json").read_text())["tuning"]
    assert record["method"] == "train/validation split" and not record["larger_is_better"]
    maes = [m["metric"] for m in record["maps"]]
    assert maes[0] < maes[1] and record["best"]["params"]["regParam"] == 0.0  # an L2 of 10 hurts the fit


def test_retrain_tunes_before_the_gate(spark, tmp_path, capsys):
    import pandas as pd
    from pyspark.ml.functions import array_to_vector

    rng = np.random.default_rng(3)
    w = rng.standard_normal(5)
    frames = []
    for window in ("1", "2"):
        x = rng.standard_normal((1200, 5))
        y = (x @ w + 0.3 * rng.standard_normal(1200) > 0).astype(float)
        frames.append(pd.DataFrame({"features": list(x), "label": y, "window": window}))
    data = str(tmp_path / "events")
    df = spark.createDataFrame(pd.concat(frames, ignore_index=True))
    df.withColumn("features", array_to_vector("features")).write.partitionBy("window").parquet(data)
    raw = {
        "data": {"train": data},
        "model": {"estimator": "LogisticRegression", "params": {"maxIter": 50}},
        "output": {"dir": str(tmp_path / "runs")},
        "registry": {"model_name": "events"},
        "gate": {"metrics": {"areaUnderROC": {"threshold": 0.8}}},
        "tuning": {"grid": {"regParam": [0.001, 1.0]}, "folds": 2},
    }
    path = tmp_path / "retrain.yaml"
    path.write_text(yaml.safe_dump(raw))
    for window in ("1", "2"):
        code = retrain.main(["--config", str(path), "--window", window], spark=spark)
        assert code == 0, capsys.readouterr().err
    doc = json.loads((tmp_path / "runs" / "2" / "v2" / "decision.json").read_text())
    assert doc["warm_start"]["used"] and doc["decision"]["outcome"] in ("promoted", "rejected")
    assert [m["params"]["regParam"] for m in doc["tuning"]["maps"]] == [0.001, 1.0]
    assert doc["tuning"]["best"]["params"]["regParam"] == 0.001  # an L2 of 1 flattens this separable problem
    assert "tuning.png" in doc["figures"]
    text = (tmp_path / "runs" / "2" / "v2" / "report.md").read_text()
    assert "## Model selection" in text and "| yes |" in text
