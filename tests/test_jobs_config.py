"""Job config validation, overrides, Java check and output publishing: no Spark session needed."""

import os
import subprocess
import sys
import zipfile

import pytest
import yaml
from support.helpers import ROOT

from sparkml import catalog
from sparkml.jobs import config, java_check, outputs, session, train


def base(**changes):
    raw = {
        "data": {"train": "generated:binary"},
        "model": {"estimator": "LogisticRegression"},
        "output": {"dir": "runs/x"},
    }
    for key, value in changes.items():
        config.apply_override(raw, f"{key}={value}")
    return raw


def error_of(raw):
    with pytest.raises(config.ConfigError) as info:
        config.validate(raw)
    return info.value


def test_shipped_registry_points_at_sparkml():
    assert {e.estimator_path() for e in catalog.ENTRIES} == {
        "sparkml.classification:LogisticRegression",
        "sparkml.classification:LinearSVC",
        "sparkml.classification:KernelSVC",
        "sparkml.regression:LinearRegression",
        "sparkml.regression:GeneralizedLinearRegression",
        "sparkml.regression:GeneralizedLinearMixedModel",
    }


def test_defaults_filled():
    cfg = config.validate(base())
    assert cfg["data"]["format"] == "parquet" and cfg["data"]["holdout_fraction"] == 0.2
    assert cfg["output"]["overwrite"] is False and cfg["spark"]["master"] == "local[2]"
    assert cfg["data"]["generated"] == {"rows": 20000, "features": 20, "classes": 3, "seed": 0}


@pytest.mark.parametrize(
    "raw, key, text",
    [
        ({"dat": {}}, "dat", "unknown key (did you mean data?)"),
        ({"data": {"holdout_fration": 0.1}}, "data.holdout_fration", "did you mean holdout_fraction?"),
        ({"data": {"generated": {"row": 10}}}, "data.generated.row", "did you mean rows?"),
        ({"output": {"overwrite": "yes"}}, "output.overwrite", "expected true or false, got 'yes'"),
        ({"data": {"seed": 1.5}}, "data.seed", "expected an integer"),
        ({"data": {"seed": True}}, "data.seed", "expected an integer"),
        ({"data": {"features": 3}}, "data.features", "expected a string or a list or null"),
        ({"data": {"features": ["a", 2]}}, "data.features", "list of column names"),
        ({"data": {"holdout_fraction": 1.5}}, "data.holdout_fraction", "(0, 1)"),
        ({"spark": {"conf": ["x"]}}, "spark.conf", "expected a mapping"),
        ({"spark": "local"}, "spark", "expected a mapping"),
        ({"data": {"format": "xls"}}, "data.format", "expected one of parquet, csv, libsvm, got 'xls'"),
        ({"data": {"train": "generated:binnary"}}, "data.train", "generated:{binary,regression,multiclass}"),
        ({"data": {"test": "generated:binary"}}, "data.test", "data.train only"),
        ({"model": {"estimator": "LogisticRegresion"}}, "model.estimator", "did you mean LogisticRegression?"),
    ],
)
def test_bad_values_name_the_key(raw, key, text):
    merged = base()
    for section, values in raw.items():
        merged[section] = {**merged.get(section, {}), **values} if isinstance(values, dict) else values
    err = error_of(merged)
    assert err.key == key and str(err).startswith(f"{key}: ") and text in str(err)


def test_required_keys():
    raw = base()
    del raw["output"]
    assert str(error_of(raw)) == "output.dir: is required"


@pytest.mark.parametrize(
    "param, value, text",
    [
        ("regParm", 0.1, "unknown parameter of LogisticRegression (did you mean regParam?)"),
        ("maxIter", 1.5, "expected an integer, got 1.5"),
        ("maxIter", "ten", "expected an integer"),
        ("regParam", "high", "expected a number, got 'high'"),
        ("regParam", True, "expected a number, got True"),
        ("fitIntercept", 1, "expected true or false"),
        ("family", 3, "expected a string"),
        ("thresholds", "x", "expected a list of numbers"),
        ("labelCol", "y", "set through data.label"),
    ],
)
def test_estimator_params_checked_against_params(param, value, text):
    raw = base()
    raw["model"]["params"] = {param: value}
    err = error_of(raw)
    assert err.key == f"model.params.{param}" and text in str(err), str(err)


def test_estimator_params_converted_and_per_estimator():
    raw = base()
    raw["model"]["params"] = {"regParam": 1, "maxIter": 10.0, "thresholds": [0.4, 0.6]}
    assert config.validate(raw)["model"]["params"] == {"regParam": 1.0, "maxIter": 10, "thresholds": [0.4, 0.6]}
    raw["model"]["estimator"] = "LinearRegression"
    raw["model"]["params"] = {"family": "binomial"}  # a LogisticRegression param
    assert "unknown parameter of LinearRegression" in str(error_of(raw))


def test_custom_converter_message_kept():
    raw = base(**{"model.params.device": "gpu"})
    err = error_of(raw)
    assert err.key == "model.params.device" and "auto" in str(err) and "'gpu'" in str(err)


def test_params_readable_without_spark():
    params = config.estimator_params(config.estimator_class("LinearSVC"))
    assert {"regParam", "maxIter", "weightCol", "threshold"} <= set(params)


def test_overrides_parse_yaml_scalars():
    raw = base(
        **{
            "model.params.regParam": "0.1",
            "output.overwrite": "true",
            "data.features": "[a, b]",
            "data.test": "null",
            "data.generated.rows": "500",
            "spark.conf.spark.sql.shuffle.partitions": "8",
        }
    )
    assert raw["model"]["params"]["regParam"] == 0.1 and raw["output"]["overwrite"] is True
    assert raw["data"]["features"] == ["a", "b"] and raw["data"]["test"] is None
    assert raw["spark"]["conf"] == {"spark.sql.shuffle.partitions": 8}
    raw["data"]["train"] = "hdfs:///events"  # columns a and b: not in a generated dataset (test_check_columns)
    cfg = config.validate(raw)
    assert cfg["data"]["generated"]["rows"] == 500
    # numbers as YAML 1.2 reads them (PyYAML's YAML 1.1 wants "1.0e+9" and reads "1.0e9" as a string)
    assert [config.parse_yaml(t) for t in ("1.0e9", "1e-3", "2E5", ".5", "-.inf", "1_000", "v1e9", "'1e9'")] == [
        1.0e9,
        1e-3,
        2e5,
        0.5,
        float("-inf"),
        1000,
        "v1e9",
        "1e9",
    ]


@pytest.mark.parametrize(
    "item, key",
    [("noequals", "--set"), ("data.train.x=1", "data.train"), ("model.params.maxIter=[1", "model.params.maxIter")],
)
def test_bad_overrides_name_the_key(item, key):
    with pytest.raises(config.ConfigError) as info:
        config.apply_override(base(), item)
    assert info.value.key == key


def test_load_file_and_override(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(base()))
    cfg = config.load(str(path), ["model.params.regParam=0.5"])
    assert cfg["model"]["params"] == {"regParam": 0.5}
    path.write_text("data: [unclosed")
    with pytest.raises(config.ConfigError, match="not valid YAML"):
        config.load(str(path))
    with pytest.raises(config.ConfigError, match="cannot read"):
        config.load(str(tmp_path / "missing.yaml"))


def test_shipped_configs_validate():
    for name in ("logistic_demo", "linear_regression", "linear_svc", "kernel_svc"):
        cfg = config.load(os.path.join(ROOT, "conf", f"{name}.yaml"))
        assert cfg["data"]["train"].startswith("generated:")


def test_main_config_error_is_one_line(tmp_path, capsys):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(base(**{"model.params.regParm": "0.1"})))
    assert train.main(["--config", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "config error: model.params.regParm: unknown parameter of LogisticRegression (did you mean regParam?)"
    )


def test_script_mode_config_error_exit_code(tmp_path):
    """`spark-submit jobs/train.py` runs the file as a script: imports must work, errors stay one line."""
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**base(), "data": {"train": "x", "format": "xls"}}))
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "jobs", "train.py"), "--config", str(path)],
        capture_output=True,
        text=True,
        cwd=str(tmp_path),
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == "config error: data.format: expected one of parquet, csv, libsvm, got 'xls'"


def test_java_check_missing(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SystemExit) as info:
        java_check.require_java()
    assert info.value.code == 2
    assert capsys.readouterr().err.strip() == java_check.MESSAGE
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nojdk"))
    with pytest.raises(SystemExit):
        java_check.require_java()


def test_package_zip_is_content_addressed(tmp_path):
    path = session.package_zip(("sparkml.jobs",), str(tmp_path))
    assert "sparkml/jobs/config.py" in zipfile.ZipFile(path).namelist()
    assert not any(n.endswith(".pyc") for n in zipfile.ZipFile(path).namelist())
    assert session.package_zip(("sparkml.jobs",), str(tmp_path)) == path
    assert session.package_zip(("no_such_package_xyz",), str(tmp_path)) is None


def _stage(store, out_dir, content):
    staging = outputs.Staging(store, str(out_dir))
    os.makedirs(staging.path("model"))
    (open(os.path.join(staging.path("model"), "f"), "w")).write(content)
    open(staging.path("metrics.json"), "w").write(content)
    return staging


def test_publish_all_or_nothing(tmp_path):
    store, out = outputs.LocalStore(), tmp_path / "run"
    first = _stage(store, out, "v1")
    first.publish(["model", "metrics.json"], overwrite=False)
    first.cleanup()
    assert (out / "model" / "f").read_text() == "v1" and sorted(os.listdir(out)) == ["metrics.json", "model"]
    with pytest.raises(config.ConfigError, match="already exists"):
        outputs.refuse_overwrite(store, str(out), False)
    second = _stage(store, out, "v2")
    with pytest.raises(OSError):  # the second entry is missing: the first must be rolled back
        second.publish(["model", "nothing-here"], overwrite=True)
    second.cleanup()
    assert (out / "model" / "f").read_text() == "v1" and sorted(os.listdir(out)) == ["metrics.json", "model"]
    third = _stage(store, out, "v3")
    third.publish(["model", "metrics.json"], overwrite=True)
    third.cleanup()
    assert (out / "model" / "f").read_text() == "v3" and sorted(os.listdir(out)) == ["metrics.json", "model"]


def test_an_example_config_is_found_by_its_name(tmp_path, monkeypatch):
    """``--config logistic_demo.yaml`` from any directory is the bundled example (an installed package has no
    conf/ beside the working directory); a path that exists wins; an unknown name lists the examples."""
    monkeypatch.chdir(tmp_path)
    names = config.example_names()
    assert {"logistic_demo.yaml", "kernel_svc.yaml", "retrain_demo.yaml"} <= set(names)
    for given in ("logistic_demo.yaml", "logistic_demo", "conf/logistic_demo.yaml"):
        assert config.resolve_path(given) == os.path.join(config.examples_dir(), "logistic_demo.yaml")
        assert config.load(given)["model"]["estimator"] == "LogisticRegression"
    (tmp_path / "logistic_demo.yaml").write_text(
        "model: {estimator: LinearSVC}\ndata: {train: generated:binary}\noutput: {dir: out}\n"
    )
    assert config.load("logistic_demo.yaml")["model"]["estimator"] == "LinearSVC"
    with pytest.raises(config.ConfigError, match=r"cannot read nope\.yaml.*the example configs: .*logistic_demo\.yaml"):
        config.load("nope.yaml")


def test_check_columns_where_they_can_be_read_before_spark(tmp_path):
    """The data section's columns and a column Param against a generated dataset's columns and a local Parquet
    directory's schema (Hive partition columns included), before Spark starts; a URI is left to the job's read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "events" / "window=1"
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"f1": [1.0], "f2": [2.0], "y": [0.0], "w": [1.0]}), folder / "part-0.parquet")
    path = str(tmp_path / "events")

    def check(**changes):
        raw = base(**{"data.train": path, "data.label": "y", "data.features": "[f1, f2]", **changes})
        return config.validate(raw)

    assert check()["data"]["features"] == ["f1", "f2"]
    assert check(**{"data.weight": "w", "data.features": "[f1, window]"})["data"]["weight"] == "w"
    for key, value, missing in [
        ("data.label", "label", "label"),
        ("data.weight", "weight", "weight"),
        ("data.features", "[f1, f3]", "f3"),
    ]:
        err = error_of(base(**{"data.train": path, "data.label": "y", "data.features": "[f1, f2]", key: value}))
        assert err.key == key and f"column {missing!r} is not in {path} (columns: f1, f2, y, w, window)" in str(err)
    raw = base(**{"data.train": "generated:regression", "model.estimator": "GeneralizedLinearRegression"})
    raw["model"]["params"] = {"offsetCol": "exposure"}
    assert error_of(raw).key == "model.params.offsetCol"
    raw["data"]["train"] = "s3a://bucket/events"  # not readable here: the job's read checks it
    assert config.validate(raw)["model"]["params"]["offsetCol"] == "exposure"
