"""Registered models load back (jobs/models.py) and score datasets (jobs/predict.py), against a sqlite
registry whose versions are created as the retrain job creates them: ``model.save`` -> run artifact
``model/`` -> model version with source ``runs:/<run_id>/model``, alias ``champion``."""

import os
import pickle
import shutil

import numpy as np
import pytest
from support.data_helpers import generated_table
from support.helpers import coefficient_vector, output_arrays

from sparkml.jobs import models, outputs, predict

mlflow = pytest.importorskip("mlflow")
from mlflow.tracking import MlflowClient  # noqa: E402

ROWS, FEATURES = 1200, 5
COLUMNS = [f"c{i}" for i in range(FEATURES)]
PREDICTIONS = ["rawPrediction", "probability", "prediction"]


class Registry:
    """A sqlite MLflow store under `root` and helpers to register models in it."""

    def __init__(self, root):
        self.root = root
        self.uri = f"sqlite:///{root}/mlflow.db"
        self.client = MlflowClient(self.uri)
        self.experiment = self.client.create_experiment("retrain", artifact_location=f"file://{root}/mlartifacts")
        self.saved, self.count = {}, 0  # id(model) -> the directory it was saved to

    def register(self, name, model, estimator, alias=None, edit=None):
        """Save `model`, log it as a run's ``model/`` artifact and register it with the ``sparkml.estimator``
        tag `estimator`; `edit(dir)` may alter the files first. Returns the version number."""
        self.count += 1
        path = os.path.join(self.root, "saved", str(self.count))
        if id(model) in self.saved:  # saved before: copy its files (cheaper than Spark writing them again)
            shutil.copytree(self.saved[id(model)], path)
        else:
            model.save(path)
            self.saved[id(model)] = path
        if edit is not None:
            edit(path)
        run_id = self.client.create_run(self.experiment).info.run_id
        self.client.log_artifacts(run_id, path, "model")
        self.client.set_terminated(run_id)
        if not self.client.search_registered_models(f"name = '{name}'"):
            self.client.create_registered_model(name)
        tags = {"sparkml.estimator": estimator}
        version = self.client.create_model_version(name, f"runs:/{run_id}/model", run_id, tags=tags).version
        if alias is not None:
            self.client.set_registered_model_alias(name, alias, version)
        return int(version)


@pytest.fixture(scope="module")
def scoring(spark, tmp_path_factory):
    """The binary problem as Parquet: id, c0..c4, the assembled `features` vector, label."""
    from pyspark.ml.feature import VectorAssembler

    pdf = generated_table(ROWS, FEATURES, seed=4).rename(columns={"y": "label"})
    pdf.insert(0, "id", np.arange(ROWS, dtype=np.int64) * 7 + 3)
    df = VectorAssembler(inputCols=COLUMNS, outputCol="features").transform(spark.createDataFrame(pdf))
    path = str(tmp_path_factory.mktemp("input") / "scoring.parquet")
    df.repartition(3).write.parquet(path)
    return path


def plant_pickle(marker):
    """A pickle that, if it were ever unpickled, would create the file `marker`."""

    class Plant:
        def __reduce__(self):
            return open, (str(marker), "w")

    return pickle.dumps(Plant())


def foreign_class(path):
    """Rewrite the model's metadata to name a class that is not in the table."""
    (part,) = [p for p in os.listdir(os.path.join(path, "metadata")) if p.startswith("part-")]
    file = os.path.join(path, "metadata", part)
    text = open(file).read().replace("org.apache.spark.ml.classification.LogisticRegressionModel", "evil.Payload")
    with open(file, "w") as f:
        f.write(text)


@pytest.fixture(scope="module")
def registry(spark, scoring, tmp_path_factory):
    """Registered models: lr v1 (champion) and v2, kernel v1, linreg v1, foreign v1 (a class outside
    the table) and pickled v1 (a planted pickle beside MLlib's files)."""
    from pyspark.sql import functions as F

    from sparkml.classification import KernelSVC, LogisticRegression
    from sparkml.jobs import datasets
    from sparkml.regression import LinearRegression

    root = tmp_path_factory.mktemp("registry")
    reg = Registry(str(root))
    df = spark.read.parquet(scoring).cache()
    reg.marker = root / "unpickled"
    reg.fitted = {
        "lr1": LogisticRegression(regParam=0.01, maxIter=10).fit(df),
        "lr2": LogisticRegression(regParam=0.3, maxIter=5).fit(df),
        "kernel": KernelSVC(numLandmarks=20, landmarkSelection="random", maxIter=3).fit(
            df.where(F.col("id") < 7 * 300)
        ),
    }
    reg.fitted["linreg"] = LinearRegression(maxIter=10).fit(
        datasets.generate(spark, "regression", 600, FEATURES, seed=2)
    )
    lr, kernel = "sparkml.classification.LogisticRegression", "sparkml.classification.KernelSVC"
    assert reg.register("lr", reg.fitted["lr1"], lr, alias="champion") == 1
    assert reg.register("lr", reg.fitted["lr2"], lr) == 2
    reg.register("kernel", reg.fitted["kernel"], kernel, alias="champion")
    reg.register("linreg", reg.fitted["linreg"], "sparkml.regression.LinearRegression", alias="champion")
    reg.register("foreign", reg.fitted["lr1"], lr, alias="champion", edit=foreign_class)
    reg.register(
        "pickled",
        reg.fitted["lr1"],
        lr,
        alias="champion",
        edit=lambda p: open(os.path.join(p, "model.pkl"), "wb").write(plant_pickle(reg.marker)),
    )
    df.unpersist()
    yield reg


def test_parse_model_uri():
    assert models.parse_model_uri("models:/churn@champion") == ("churn", "champion", None)
    assert models.parse_model_uri("models:/cat.schema.churn/12") == ("cat.schema.churn", None, 12)
    for bad in ("runs:/abc/model", "models:/churn", "models:/churn/Production", "models:/a/b/c", "churn@x"):
        with pytest.raises(ValueError, match="models:/<name>@<alias> or models:/<name>/<version>|must be a number"):
            models.parse_model_uri(bad)


def test_logistic_loads_back_as_ours_and_as_stock(spark, registry):
    from pyspark.ml.classification import LogisticRegressionModel as Stock

    from sparkml.classification import LogisticRegressionModel

    fitted = registry.fitted["lr1"]
    ours, version = models.load("models:/lr@champion", spark, tracking_uri=registry.uri)
    assert type(ours) is LogisticRegressionModel and version.version == 1 and version.name == "lr"
    assert version.tags["sparkml.estimator"] == "sparkml.classification.LogisticRegression"
    assert ours.coefficients == fitted.coefficients and ours.intercept == fitted.intercept
    assert ours.getRegParam() == 0.01
    stock, version = models.load("models:/lr/2", spark, "pyspark", registry.uri)
    assert type(stock) is Stock and version.version == 2
    assert stock.coefficients == registry.fitted["lr2"].coefficients and stock.getRegParam() == 0.3


def test_kernel_svc_loads_back_as_ours_only(spark, registry):
    from sparkml.classification import KernelSVCModel

    fitted = registry.fitted["kernel"]
    ours, _ = models.load("models:/kernel@champion", spark, tracking_uri=registry.uri)
    assert type(ours) is KernelSVCModel and ours.numFeatures == FEATURES
    np.testing.assert_array_equal(coefficient_vector(ours), coefficient_vector(fitted))
    np.testing.assert_array_equal(ours.landmarks.toArray(), fitted.landmarks.toArray())
    with pytest.raises(models.ModelError, match="KernelSVCModel has no stock pyspark.ml twin"):
        models.load("models:/kernel/1", spark, "pyspark", registry.uri)


def test_linear_regression_loads_back_as_stock(spark, registry):
    from pyspark.ml.regression import LinearRegressionModel as Stock

    stock, _ = models.load("models:/linreg@champion", spark, "pyspark", registry.uri)
    fitted = registry.fitted["linreg"]
    assert type(stock) is Stock and stock.coefficients == fitted.coefficients and stock.intercept == fitted.intercept


def test_unknown_model_alias_and_version_are_named(registry):
    client = registry.client
    with pytest.raises(models.ModelError, match="no registered model named 'nope'"):
        models.resolve_version(client, "nope", alias="champion")
    with pytest.raises(models.ModelError, match=r"model 'lr' has no alias 'prod' \(aliases: champion\)"):
        models.resolve_version(client, "lr", alias="prod")
    with pytest.raises(models.ModelError, match="model 'lr' has no version 9"):
        models.resolve_version(client, "lr", version=9)


def test_foreign_class_refused_and_pickles_never_loaded(spark, registry, tmp_path, capsys):
    with pytest.raises(models.ModelError) as info:
        models.load("models:/foreign@champion", spark, tracking_uri=registry.uri)
    text = str(info.value)
    assert "version 1 of model 'foreign': runs:/" in text and "/model/metadata/part-00000" in text
    assert "class 'evil.Payload' is not a model this library loads" in text
    model, version = models.load("models:/pickled@champion", spark, tracking_uri=registry.uri)
    assert model.coefficients == registry.fitted["lr1"].coefficients
    assert "model/model.pkl" in {a.path for a in registry.client.list_artifacts(version.run_id, "model")}
    assert not registry.marker.exists()  # the planted pickle was downloaded with the model, never unpickled
    pickle.loads(plant_pickle(tmp_path / "armed"))  # what unpickling it would have done
    assert (tmp_path / "armed").exists()
    (tmp_path / "armed").unlink()
    code = predict.main(
        [
            "--model",
            "models:/foreign@champion",
            "--input",
            "x",
            "--output",
            str(tmp_path / "out"),
            "--tracking-uri",
            registry.uri,
        ],
        spark=spark,
    )
    assert code == 2 and "config error: --model: version 1 of model 'foreign'" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


def transformed(spark, model, path, columns=PREDICTIONS):
    """The fitted model's own transform of a Parquet file as arrays by id."""
    return output_arrays(model.transform(spark.read.parquet(path)), columns)


def test_predict_by_alias_and_by_version(spark, registry, scoring, tmp_path, capsys):
    out = tmp_path / "scores" / "by_alias"
    args = [
        "--model",
        "models:/lr@champion",
        "--input",
        scoring,
        "--output",
        str(out),
        "--id-cols",
        "id",
        "--tracking-uri",
        registry.uri,
    ]
    assert predict.main(args, spark=spark) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"scored {ROWS:,} rows with lr version 1 in ") and line.endswith(f"s -> {out}")
    result = spark.read.parquet(str(out))
    assert result.columns == ["id", *PREDICTIONS, "model_name", "model_version"]
    assert dict(result.dtypes)["probability"] == "vector" and dict(result.dtypes)["model_version"] == "int"
    assert result.count() == ROWS and result.select("id").distinct().count() == ROWS
    assert {tuple(r) for r in result.select("model_name", "model_version").distinct().collect()} == {("lr", 1)}
    got, want = output_arrays(result, PREDICTIONS), transformed(spark, registry.fitted["lr1"], scoring)
    for c in PREDICTIONS:
        np.testing.assert_allclose(got[c], want[c], rtol=0, atol=1e-9, err_msg=c)
    assert sorted(os.listdir(out.parent)) == ["by_alias"]  # no staging leftovers

    # by version number, columns assembled, the stock model, csv input, every input column kept
    csv = tmp_path / "scoring.csv"
    spark.read.parquet(scoring).drop("features").toPandas().to_csv(csv, index=False)
    out = tmp_path / "scores" / "by_version"
    args = [
        "--model",
        "models:/lr/2",
        "--input",
        str(csv),
        "--format",
        "csv",
        "--output",
        str(out),
        "--features",
        ",".join(COLUMNS),
        "--flavor",
        "pyspark",
        "--tracking-uri",
        registry.uri,
    ]
    assert predict.main(args, spark=spark) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"scored {ROWS:,} rows with lr version 2 in ") and line.endswith(f"s -> {out}")
    result = spark.read.parquet(str(out))
    assert result.columns == ["id", *COLUMNS, "label", *PREDICTIONS, "model_name", "model_version"]
    assert {tuple(r) for r in result.select("model_name", "model_version").distinct().collect()} == {("lr", 2)}
    got, want = output_arrays(result, PREDICTIONS), transformed(spark, registry.fitted["lr2"], scoring)
    for c in PREDICTIONS:
        np.testing.assert_allclose(got[c], want[c], rtol=0, atol=1e-9, err_msg=c)


def listing(path):
    return sorted(os.listdir(path)) if os.path.isdir(path) else None


def run_failing(spark, registry, scoring, tmp_path, capsys, *extra, model="models:/lr@champion"):
    """Run the job into tmp_path/out; return its stderr (the exit code must be 2)."""
    code = predict.main(
        [
            "--model",
            model,
            "--input",
            scoring,
            "--output",
            str(tmp_path / "out"),
            "--tracking-uri",
            registry.uri,
            *extra,
        ],
        spark=spark,
    )
    assert code == 2
    return capsys.readouterr().err.strip()


def test_missing_id_column_writes_nothing(spark, registry, scoring, tmp_path, capsys):
    err = run_failing(spark, registry, scoring, tmp_path, capsys, "--id-cols", "id,customer")
    assert err.startswith("config error: --id-cols: column 'customer' not found in ")
    assert listing(tmp_path) == []


def test_features_width_mismatch_names_both_sizes(spark, registry, scoring, tmp_path, capsys):
    err = run_failing(spark, registry, scoring, tmp_path, capsys, "--features", "c0,c1,c2,c3")
    assert err == "config error: --features: _features holds vectors of size 4, the model takes 5 features"
    assert listing(tmp_path) == []
    err = run_failing(spark, registry, scoring, tmp_path, capsys, "--features", "nope")
    assert err.startswith("config error: --features: column 'nope' not found")


def test_bad_model_input_and_store_are_config_errors(spark, registry, scoring, tmp_path, capsys, monkeypatch):
    err = run_failing(spark, registry, scoring, tmp_path, capsys, model="models:/lr@prod")
    assert err == "config error: --model: model 'lr' has no alias 'prod' (aliases: champion)"
    err = run_failing(spark, registry, scoring, tmp_path, capsys, model="models:/lr/7")
    assert err == "config error: --model: model 'lr' has no version 7"
    err = run_failing(spark, registry, str(tmp_path / "missing.parquet"), tmp_path, capsys)
    assert err == f"config error: --input: no such input: {tmp_path}/missing.parquet"
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert (
        predict.main(
            ["--model", "models:/lr@champion", "--input", scoring, "--output", str(tmp_path / "out")], spark=spark
        )
        == 2
    )
    assert capsys.readouterr().err.startswith("config error: --tracking-uri: no registry to read the model from")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/none.db")
    assert (
        predict.main(
            ["--model", "models:/lr@champion", "--input", scoring, "--output", str(tmp_path / "out")], spark=spark
        )
        == 2
    )
    assert (
        capsys.readouterr().err.strip() == f"config error: MLFLOW_TRACKING_URI: no MLflow store at {tmp_path}/none.db"
    )
    assert listing(tmp_path) == []


def test_existing_output_refused_unless_overwrite(spark, registry, scoring, tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("previous")
    err = run_failing(spark, registry, scoring, tmp_path, capsys, "--id-cols", "id")
    assert err == f"config error: --output: {tmp_path}/out already exists; pass --overwrite to replace it"
    assert listing(tmp_path / "out") == ["keep.txt"]
    # a file: URI goes through the Hadoop FileSystem, as hdfs:// and s3a:// outputs do
    args = [
        "--model",
        "models:/kernel@champion",
        "--input",
        scoring,
        "--output",
        f"file://{tmp_path}/out",
        "--id-cols",
        "id",
        "--tracking-uri",
        registry.uri,
        "--overwrite",
    ]
    assert predict.main(args, spark=spark) == 0
    assert capsys.readouterr().out.strip().endswith(f"s -> file://{tmp_path}/out")
    result = spark.read.parquet(str(tmp_path / "out"))
    assert result.columns == ["id", "rawPrediction", "prediction", "model_name", "model_version"]
    assert result.count() == ROWS and listing(tmp_path) == ["out"]
    got = output_arrays(result, ["rawPrediction", "prediction"])
    want = transformed(spark, registry.fitted["kernel"], scoring, ["rawPrediction", "prediction"])
    for c in got:
        np.testing.assert_allclose(got[c], want[c], rtol=0, atol=1e-9, err_msg=c)


def test_failure_while_publishing_leaves_nothing(spark, registry, scoring, tmp_path, monkeypatch):
    def broken(self, names, overwrite):
        raise OSError("rename failed")

    monkeypatch.setattr(outputs.Staging, "publish", broken)
    with pytest.raises(OSError, match="rename failed"):
        predict.main(
            [
                "--model",
                "models:/lr@champion",
                "--input",
                scoring,
                "--output",
                str(tmp_path / "deeper" / "out"),
                "--id-cols",
                "id",
                "--tracking-uri",
                registry.uri,
            ],
            spark=spark,
        )
    assert listing(tmp_path) == []


class _Context:
    def __init__(self, master):
        self.master = master


class _Classic:
    def __init__(self, master):
        self.sparkContext = _Context(master)


_Connect = type("SparkSession", (), {"__module__": "pyspark.sql.connect.session"})


def test_where_a_downloaded_model_is_read_from():
    env = {models.TEMP_DFS_ENV: "hdfs:///tmp/sparkml"}
    assert models.placement(_Classic("local[2]"), env) == ("local", None)
    assert models.placement(_Classic("local"), {}) == ("local", None)
    assert models.placement(_Classic("yarn"), env) == ("hadoop", "hdfs:///tmp/sparkml")
    with pytest.raises(models.ModelError, match="master yarn cannot read .* set \\$SPARKML_TEMP_DFS_PATH"):
        models.placement(_Classic("yarn"), {})
    assert models.placement(_Connect(), {}) == ("local", None)
    assert models.placement(_Connect(), {models.TEMP_DFS_ENV: "/mnt/shared"}) == ("copy", "/mnt/shared")
    with pytest.raises(models.ModelError, match="Spark Connect client cannot copy"):
        models.placement(_Connect(), env)


def test_runs_as_a_file_and_imports_mlflow_lazily(tmp_path):
    """``spark-submit jobs/predict.py`` imports through the checkout; bad arguments fail before Spark
    or MLflow start."""
    import subprocess
    import sys

    from support.helpers import ROOT

    script = os.path.join(ROOT, "jobs", "predict.py")
    out = subprocess.run(
        [sys.executable, script, "--model", "runs:/x/model", "--input", "in", "--output", "out"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert out.returncode == 2 and out.stderr.startswith("config error: --model: expected models:/<name>@<alias>")
    code = (
        "import sys, sparkml.jobs.predict, sparkml.jobs.models; "
        "print('mlflow' in sys.modules, 'pyspark' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.stdout.strip() == "False False", out.stderr[-2000:]
    assert os.listdir(tmp_path) == []
