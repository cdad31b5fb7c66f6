"""Every `jobs.train` run is an MLflow run (jobs/tracking.py): read back from the store with MlflowClient."""

import json
import os
import subprocess
import sys

import pandas as pd
import pytest
import yaml
from test_jobs_train import SMALL, leftovers, load_model, run_job, write_config

from sparkml.jobs import config, tracking, train

mlflow = pytest.importorskip("mlflow")
from mlflow.tracking import MlflowClient  # noqa: E402

DATA = {"train": "generated:binary", "generated": SMALL}


def default_uri(tmp_path):
    """The default store of a job whose output.dir is tmp_path/run: beside it, in its parent."""
    return f"sqlite:///{tmp_path}/mlflow.db"


def test_run_records_params_objective_metrics_and_artifacts(spark, tmp_path, capsys):
    code, report = run_job(spark, tmp_path, DATA)
    assert code == 0
    run_id = report["mlflow"]["run_id"]
    assert report["mlflow"]["uri"] == default_uri(tmp_path) and report["mlflow"]["experiment"] == "job"
    assert f"mlflow  -> run {run_id}" in capsys.readouterr().out.strip().splitlines()[-1]
    client = MlflowClient(default_uri(tmp_path))
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert client.get_experiment(run.info.experiment_id).name == "job"

    # params: the estimator's whole Param map, ours (strategy, device, dtype) included
    cfg = config.load(write_config(tmp_path, DATA))
    estimator = train.build_estimator(cfg, "features")
    assert run.data.params == {p.name: str(v) for p, v in estimator.extractParamMap().items()}
    assert run.data.params["regParam"] == "0.01" and run.data.params["maxIter"] == "10"
    assert {"strategy": "auto", "device": "auto", "dtype": "float32"}.items() <= run.data.params.items()
    assert run.data.params == {k: str(v) for k, v in report["params"].items()}  # the fitted model's, too

    # the objective: one value per objectiveHistory entry, at steps 0..n-1
    history = sorted(client.get_metric_history(run_id, "objective"), key=lambda m: m.step)
    assert len(report["objectiveHistory"]) >= 2
    assert [m.step for m in history] == list(range(len(report["objectiveHistory"])))
    assert [m.value for m in history] == report["objectiveHistory"]

    # holdout metrics equal metrics.json's
    published = json.loads((tmp_path / "run" / "metrics.json").read_text())
    holdout = {k[len("holdout_") :]: v for k, v in run.data.metrics.items() if k.startswith("holdout_")}
    assert holdout == published["metrics"] and set(holdout) == {"areaUnderROC", "accuracy", "f1"}
    assert run.data.metrics["total_iterations"] == published["totalIterations"]
    assert run.data.metrics["train_rows"] + run.data.metrics["test_rows"] == 1500

    # tags
    assert run.data.tags["sparkml.job"] == "job"
    assert run.data.tags["sparkml.estimator"].endswith(".LogisticRegression")
    assert run.data.tags["sparkml.config_sha256"] == tracking.config_hash(cfg)

    # artifacts: the report files as published, the resolved config, the model's MLlib files
    names = {a.path for a in client.list_artifacts(run_id)}
    assert names == {"config.yaml", "metrics.json", "objective.png", "model"}
    local = client.download_artifacts(run_id, "", str(tmp_path / "downloaded"))
    assert open(os.path.join(local, "metrics.json"), "rb").read() == (tmp_path / "run" / "metrics.json").read_bytes()
    assert open(os.path.join(local, "objective.png"), "rb").read() == (tmp_path / "run" / "objective.png").read_bytes()
    assert yaml.safe_load(open(os.path.join(local, "config.yaml"))) == json.loads(json.dumps(cfg))
    assert (  # an MLflow model: MLlib's files under data/model
        load_model("LogisticRegression", os.path.join(local, "model", "data", "model")).coefficients
        == load_model("LogisticRegression", str(tmp_path / "run" / "model")).coefficients
    )
    served = mlflow.pyfunc.load_model(os.path.join(local, "model"))  # its python_function flavor, without Spark
    scored = served.predict(pd.DataFrame({"features": [[0.0] * 6, [1.0] * 6]}))
    assert list(scored.columns) == ["rawPrediction", "probability", "prediction"] and len(scored) == 2
    # the store and its artifacts live beside output.dir, not in it
    assert (tmp_path / "mlflow.db").is_file() and (tmp_path / "mlartifacts").is_dir()
    assert sorted(os.listdir(tmp_path / "run")) == ["metrics.json", "model", "objective.png"]


def test_repeated_runs_of_a_config_share_the_experiment(spark, tmp_path):
    first = run_job(spark, tmp_path, DATA, overwrite=True)[1]["mlflow"]
    second = run_job(spark, tmp_path, DATA, overwrite=True)[1]["mlflow"]
    assert first["experiment_id"] == second["experiment_id"] and first["run_id"] != second["run_id"]
    client = MlflowClient(default_uri(tmp_path))
    runs = client.search_runs([first["experiment_id"]])
    assert {r.info.run_id for r in runs} == {first["run_id"], second["run_id"]}
    assert len({r.data.tags["sparkml.config_sha256"] for r in runs}) == 1
    assert [e.name for e in client.search_experiments()].count("job") == 1
    # the hash follows what is trained, not where it is tracked
    cfg = config.load(write_config(tmp_path, DATA))
    assert tracking.config_hash(cfg) == tracking.config_hash({**cfg, "tracking": {"uri": "x", "experiment": "y"}})
    assert tracking.config_hash(cfg) != tracking.config_hash(
        config.load(write_config(tmp_path, DATA), ["model.params.regParam=0.1"])
    )


@pytest.mark.parametrize(
    "key, value, text",
    [
        ("uri", 3, "tracking.uri: expected a string or null, got 3"),
        ("uri", "''", "tracking.uri: expected a non-empty string or null, got ''"),
        ("experiment", "[a]", "tracking.experiment: expected a string or null, got ['a']"),
        ("urI", "x", "tracking.urI: unknown key (did you mean uri?)"),
    ],
)
def test_bad_tracking_values_are_config_errors(tmp_path, capsys, key, value, text):
    path = write_config(tmp_path, DATA)
    assert train.main(["--config", path, "--set", f"tracking.{key}={value}"]) == 2
    assert capsys.readouterr().err.strip() == f"config error: {text}"
    assert not os.path.exists(tmp_path / "run") and not os.path.exists(tmp_path / "mlflow.db")


def test_a_store_that_cannot_be_opened_fails_before_training(spark, tmp_path, capsys, monkeypatch):
    fits = []
    monkeypatch.setattr(train, "build_estimator", lambda *a: fits.append(a))
    path = write_config(tmp_path, DATA)
    assert train.main(["--config", path, "--set", "tracking.uri=nosuch://nowhere"], spark=spark) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .startswith("config error: tracking.uri: cannot open an MLflow run at nosuch://nowhere: ")
    )
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "nosuch://env")
    assert train.main(["--config", path], spark=spark) == 2
    assert capsys.readouterr().err.strip().startswith("config error: MLFLOW_TRACKING_URI: cannot open")
    assert fits == [] and not os.path.exists(tmp_path / "run" / "model")


def test_logging_failure_publishes_nothing_and_fails_the_run(spark, tmp_path, monkeypatch):
    def broken(*args):
        raise RuntimeError("artifact store down")

    monkeypatch.setattr(tracking.JobRun, "log_outputs", broken)
    with pytest.raises(RuntimeError, match="artifact store down"):
        train.main(["--config", write_config(tmp_path, DATA)], spark=spark)
    assert os.listdir(tmp_path / "run") == [] and not leftovers(tmp_path / "run")
    client = MlflowClient(default_uri(tmp_path))
    (run,) = client.search_runs([client.get_experiment_by_name("job").experiment_id])
    assert run.info.status == "FAILED"


def test_env_uri_honoured_and_yaml_wins(spark, tmp_path, monkeypatch):
    env_uri = f"sqlite:///{tmp_path}/env/store.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", env_uri)
    code, report = run_job(spark, tmp_path, DATA)
    assert code == 0 and report["mlflow"]["uri"] == env_uri
    run = MlflowClient(env_uri).get_run(report["mlflow"]["run_id"])
    assert run.data.metrics["holdout_areaUnderROC"] == report["metrics"]["areaUnderROC"]
    assert (tmp_path / "env" / "mlartifacts").is_dir() and not (tmp_path / "mlflow.db").exists()
    # tracking.uri in the YAML (or --set) wins over the environment; tracking.experiment names the experiment
    yaml_uri = f"sqlite:///{tmp_path}/yaml.db"
    code, report = run_job(
        spark,
        tmp_path,
        DATA,
        overwrite=True,
        extra=["--set", f"tracking.uri={yaml_uri}", "--set", "tracking.experiment=nightly"],
    )
    assert code == 0 and report["mlflow"]["uri"] == yaml_uri and report["mlflow"]["experiment"] == "nightly"
    client = MlflowClient(yaml_uri)
    assert (
        client.get_run(report["mlflow"]["run_id"]).info.experiment_id
        == client.get_experiment_by_name("nightly").experiment_id
    )


def test_resolve_without_spark(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    raw = {
        "data": {"train": "generated:binary"},
        "model": {"estimator": "LogisticRegression"},
        "output": {"dir": "runs/demo"},
    }
    target = tracking.resolve(config.validate(raw), "logistic_demo")
    assert target.uri == "sqlite:///" + os.path.abspath("runs/mlflow.db") and target.source == "default"
    assert target.experiment == "logistic_demo"
    assert target.artifact_location == "file://" + os.path.abspath("runs/mlartifacts")
    raw["output"]["dir"] = "file:///data/jobs/demo/"
    assert tracking.resolve(config.validate(raw), "j").uri == "sqlite:////data/jobs/mlflow.db"
    raw["output"]["dir"] = "hdfs://nn/jobs/demo"  # no local parent: a URI must be named
    with pytest.raises(config.ConfigError) as info:
        tracking.resolve(config.validate(raw), "j")
    assert info.value.key == "tracking.uri" and "MLFLOW_TRACKING_URI" in str(info.value)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "databricks")
    target = tracking.resolve(config.validate(raw), "j")
    assert (target.uri, target.source, target.artifact_location) == ("databricks", "MLFLOW_TRACKING_URI", None)


def test_only_jobs_import_mlflow_and_lazily():
    """mlflow is optional (the jobs extra): the library imports it nowhere but in the jobs and, inside its
    functions, the MLflow helpers (sparkml/mlflow.py); importing either loads no mlflow."""
    from support.helpers import ROOT

    helpers = os.path.join(ROOT, "sparkml", "mlflow.py")
    for folder in ("sparkml", "gpu"):
        for root, _, files in os.walk(os.path.join(ROOT, folder)):
            for name in (f for f in files if f.endswith(".py")):
                path = os.path.join(root, name)
                lines = open(path, encoding="utf-8").read().splitlines()
                imports = [line for line in lines if "import mlflow" in line or "from mlflow" in line]
                if path == helpers:
                    assert imports and all(line.startswith("    ") for line in imports), imports
                else:
                    assert not imports, path
    code = "import sys, sparkml.jobs.train, sparkml.mlflow; print('mlflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.stdout.strip() == "False", out.stderr[-2000:]
