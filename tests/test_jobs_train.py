"""End-to-end `jobs.train` runs in the shared local[2] session, on small generated data and files."""

import json
import os

import numpy as np
import pytest
import yaml
from support.data_helpers import generated_table
from support.helpers import ROOT

from sparkml import catalog
from sparkml.jobs import datasets, train


def write_config(tmp_path, data, estimator="LogisticRegression", params=None, **output):
    raw = {
        "data": data,
        "model": {"estimator": estimator, "params": params or {"regParam": 0.01, "maxIter": 10}},
        "output": {"dir": str(tmp_path / "run"), **output},
    }
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def run_job(spark, tmp_path, data, estimator="LogisticRegression", params=None, extra=(), **output):
    path = write_config(tmp_path, data, estimator, params, **output)
    code = train.main(["--config", path, *extra], spark=spark)
    report = json.loads((tmp_path / "run" / "metrics.json").read_text()) if code == 0 else None
    return code, report


def load_model(estimator, path):
    return catalog.import_path(catalog.by_name()[estimator].model_path()).load(path)


def leftovers(out_dir):
    return [n for n in os.listdir(out_dir) if n.startswith(".staging")] if os.path.isdir(out_dir) else []


SMALL = {"rows": 1500, "features": 6, "seed": 3}


def test_generated_binary_end_to_end(spark, tmp_path, capsys):
    code, report = run_job(spark, tmp_path, {"train": "generated:binary", "generated": SMALL})
    assert code == 0
    m = report["metrics"]
    assert m["areaUnderROC"] > 0.9 and m["accuracy"] > 0.8 and 0 < m["f1"] <= 1
    assert report["rows"]["train"] + report["rows"]["test"] == 1500 and report["rows"]["test"] > 200
    assert report["params"]["regParam"] == 0.01 and report["estimator"] == "LogisticRegression"
    assert report["totalIterations"] >= 1 and len(report["objectiveHistory"]) >= 2
    assert set(report["seconds"]) == {"read", "fit", "evaluate", "total"}
    out = tmp_path / "run"
    assert (out / "objective.png").read_bytes()[:4] == b"\x89PNG" and not leftovers(out)
    model = load_model("LogisticRegression", str(out / "model"))
    assert model.numFeatures == 6
    printed = capsys.readouterr()
    assert "areaUnderROC" in printed.out
    # model.progress_every (10): the first iteration and every tenth, on stderr, as they ended
    steps = [int(line.split(":")[0].split()[-1]) for line in printed.err.splitlines() if " iteration " in line]
    n = report["totalIterations"]
    assert steps == [k for k in range(1, n + 1) if k == 1 or k % 10 == 0]


def test_existing_model_refused_unless_overwrite(spark, tmp_path, capsys):
    data = {"train": "generated:binary", "generated": SMALL}
    assert run_job(spark, tmp_path, data)[0] == 0
    stamp = os.path.getmtime(tmp_path / "run" / "model")
    code, _ = run_job(spark, tmp_path, data, params={"regParam": 0.5})
    assert code == 2 and "output.dir:" in capsys.readouterr().err
    assert os.path.getmtime(tmp_path / "run" / "model") == stamp
    # overwrite, through a file:// URI so the Hadoop FileSystem publishing path runs too
    code = train.main(
        [
            "--config",
            write_config(tmp_path, data, params={"regParam": 0.5}),
            "--set",
            f"output.dir=file://{tmp_path}/run",
            "--set",
            "output.overwrite=true",
        ],
        spark=spark,
    )
    report = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert code == 0 and report["params"]["regParam"] == 0.5 and not leftovers(tmp_path / "run")
    assert report["model"] == f"file://{tmp_path}/run/model"
    load_model("LogisticRegression", report["model"])


def test_failure_after_fit_leaves_nothing(spark, tmp_path, monkeypatch):
    def broken(*args):
        raise RuntimeError("disk full")

    monkeypatch.setattr(train, "objective_png", broken)  # fails with the model already staged
    path = write_config(tmp_path, {"train": "generated:binary", "generated": SMALL})
    with pytest.raises(RuntimeError, match="disk full"):
        train.main(["--config", path], spark=spark)
    assert os.listdir(tmp_path / "run") == []


def test_active_session_reused_and_not_stopped(spark, tmp_path):
    path = write_config(tmp_path, {"train": "generated:regression", "generated": SMALL}, "LinearRegression")
    assert train.main(["--config", path, "--set", "model.params.elasticNetParam=0.5"]) == 0
    report = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert report["metrics"]["r2"] > 0.8 and set(report["metrics"]) == {"rmse", "r2", "mae"}
    assert report["params"]["elasticNetParam"] == 0.5
    assert spark.range(3).count() == 3  # the shared session is still alive
    load_model("LinearRegression", str(tmp_path / "run" / "model"))


def test_multiclass_and_svc(spark, tmp_path):
    code, report = run_job(
        spark, tmp_path / "a", {"train": "generated:multiclass", "generated": {**SMALL, "classes": 3}}
    )
    assert code == 0 and set(report["metrics"]) == {"accuracy", "f1", "logLoss"}
    assert report["metrics"]["accuracy"] > 0.6
    code, report = run_job(
        spark,
        tmp_path / "b",
        {"train": "generated:binary", "generated": SMALL},
        "LinearSVC",
        {"regParam": 0.01, "maxIter": 10},
    )
    assert code == 0 and report["metrics"]["areaUnderROC"] > 0.9


def test_kernel_svc_job(spark, tmp_path):
    """The shipped conf/kernel_svc.yaml's model section, on small data."""
    shipped = yaml.safe_load(open(os.path.join(ROOT, "conf", "kernel_svc.yaml")))
    params = {**shipped["model"]["params"], "numLandmarks": 100}
    code, report = run_job(
        spark, tmp_path, {"train": "generated:multiclass", "generated": {**SMALL, "classes": 3}}, "KernelSVC", params
    )
    assert code == 0 and report["metrics"]["accuracy"] > 0.7
    assert 0 < report["metrics"]["logLoss"] < 0.8  # the Platt probabilities reach the evaluator
    model = load_model("KernelSVC", str(tmp_path / "run" / "model"))
    assert model.numClasses == 3 and model.plattCoefficients.numRows == 3 and model.getStrategy() == "allreduce"


def table(rows, seed=0):
    """A generated binary problem as a pandas frame: c0..c3, label y, weight w."""
    return generated_table(rows, 4, seed, weighted=True)


FILE_DATA = {"features": ["c0", "c1", "c2", "c3"], "label": "y"}


def test_parquet_with_test_set_and_weights(spark, tmp_path):
    pdf = table(1100)
    spark.createDataFrame(pdf[:800]).write.parquet(str(tmp_path / "train"))
    spark.createDataFrame(pdf[800:]).write.parquet(str(tmp_path / "test"))
    data = {**FILE_DATA, "train": str(tmp_path / "train"), "test": str(tmp_path / "test"), "weight": "w"}
    code, report = run_job(spark, tmp_path, data)
    assert code == 0 and report["rows"] == {"train": 800, "test": 300}
    assert report["metrics"]["areaUnderROC"] > 0.9 and report["params"]["weightCol"] == "w"


def test_csv_round_trip(spark, tmp_path):
    table(1000, 4).to_csv(tmp_path / "data.csv", index=False)
    code, report = run_job(spark, tmp_path, {**FILE_DATA, "train": str(tmp_path / "data.csv"), "format": "csv"})
    assert code == 0 and report["metrics"]["areaUnderROC"] > 0.9


def test_libsvm_round_trip_test_width_follows_train(spark, tmp_path):
    X, y = datasets.generate_arrays("binary", 1000, 5, seed=5)
    X[800:, 4] = 0.0  # the test file never mentions feature 5: libsvm alone would read it 4 wide
    for name, rows in (("train.svm", slice(0, 800)), ("test.svm", slice(800, 1000))):
        with open(tmp_path / name, "w") as f:
            for xi, yi in zip(X[rows], y[rows]):
                f.write(f"{int(yi)} " + " ".join(f"{j + 1}:{v:.6f}" for j, v in enumerate(xi) if v) + "\n")
    data = {"train": str(tmp_path / "train.svm"), "test": str(tmp_path / "test.svm"), "format": "libsvm"}
    code, report = run_job(spark, tmp_path, data)
    assert code == 0 and report["rows"] == {"train": 800, "test": 200}
    assert report["metrics"]["areaUnderROC"] > 0.85
    assert load_model("LogisticRegression", str(tmp_path / "run" / "model")).numFeatures == 5


def test_missing_column_and_path_name_the_key(spark, tmp_path, capsys):
    table(50, 0).to_csv(tmp_path / "data.csv", index=False)
    data = {**FILE_DATA, "train": str(tmp_path / "data.csv"), "format": "csv", "label": "target"}
    assert run_job(spark, tmp_path, data)[0] == 2
    assert "config error: data.label: column 'target' not found" in capsys.readouterr().err
    data = {**FILE_DATA, "train": str(tmp_path / "nope.parquet")}
    assert run_job(spark, tmp_path, data)[0] == 2
    assert "config error: data.train: no such input" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "run")


def test_generalized_linear_regression_trains_by_name(spark, tmp_path):
    """A job config names GeneralizedLinearRegression and its Params; the model loads with MLlib's class."""
    from pyspark.ml.regression import GeneralizedLinearRegressionModel as Stock

    data = {"train": "generated:binary", "generated": SMALL}
    params = {"family": "binomial", "link": "probit", "regParam": 0.01}
    code, report = run_job(spark, tmp_path, data, "GeneralizedLinearRegression", params)
    assert code == 0 and report["params"]["family"] == "binomial" and report["metrics"]["rmse"] < 0.5
    model = load_model("GeneralizedLinearRegression", str(tmp_path / "run" / "model"))
    stock = Stock.load(str(tmp_path / "run" / "model"))
    np.testing.assert_allclose(stock.coefficients.toArray(), model.coefficients.toArray(), rtol=0, atol=0)
    assert model.getLink() == "probit"
