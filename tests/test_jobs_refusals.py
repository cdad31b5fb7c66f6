"""Refused before any work (issue 51 items 2 and 6): names the jobs turn into paths or registry keys, output
locations, and config files that are not job configs. Each refusal is exit code 2 with one line naming the key;
no Spark session, MLflow client or estimator is made (``job_calls.guard``) and nothing is written."""

import os

import pytest
from support.job_calls import call, guard, tree, write_config

from sparkml.jobs import config, names, outputs, predict, retrain, train
from sparkml.jobs.errors import ConfigError

pytest.importorskip("mlflow")

SECRET = "hunter2-do-not-print"


@pytest.fixture
def refused(monkeypatch, tmp_path):
    """``refused(main, argv, key)``: the job exits 2 with one line on `key` and leaves `tmp_path` as it was."""
    guard(monkeypatch)

    def check(main, argv, key):
        before = tree(tmp_path)
        code, out, err = call(main, argv)
        lines = err.splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith(f"config error: {key}: "), (code, err)
        assert tree(tmp_path) == before and SECRET not in out + err
        return lines[0]

    return check


# ---- names ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["2026-11-03", "w1", "a.b_c-d", "_x", "0", "x" * names.MAX_NAME])
def test_plain_names_pass(name):
    assert config.plain_name("--window", name) == name


@pytest.mark.parametrize(
    "name, why",
    [
        ("../../x", "holds a path separator"),
        ("/abs/path", "holds a path separator"),
        ("a/b", "holds a path separator"),
        ("a\\b", "holds a path separator"),
        ("..", "holds '..'"),
        ("a..b", "holds '..'"),
        (".hidden", "starts with '.'"),
        ("-x", "starts with '-'"),
        ("a b", "holds ' '"),
        ("окно", "holds 'о'"),
        ("a\nb", "holds '\\n'"),
        ("x" * (names.MAX_NAME + 1), "is longer than 200 characters"),
    ],
)
def test_other_names_are_refused_saying_why(name, why):
    with pytest.raises(ConfigError) as info:
        config.plain_name("--window", name, "a window id")
    assert info.value.key == "--window" and f" {why}; expected a window id: letters, digits" in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("window", ["../../escaped_win", "ABS", "a/b", "..", ""])
@pytest.mark.parametrize("dry_run", [True, False])
def test_window_ids_that_are_not_plain_names_are_refused(refused, tmp_path, window, dry_run):
    window = str(tmp_path / "abs" / "path") if window == "ABS" else window
    cfg = write_config(str(tmp_path / "job"), retrain=True)
    line = refused(retrain.main, ["--config", cfg, f"--window={window}", *(["--dry-run"] * dry_run)], "--window")
    assert "expected a window id" in line
    assert not os.path.exists(tmp_path / "escaped_win") and not os.path.exists(tmp_path / "job" / "mlflow.db")


@pytest.mark.parametrize(
    "override, text",
    [
        ("registry.model_name=../models/x", "'../models/x' holds a path separator"),
        ("registry.model_name=a b", "'a b' holds ' '"),
        ("registry.alias=a/b", "'a/b' holds a path separator"),
        ("registry.alias=prod.v2", "is not an alias MLflow accepts"),
        ("registry.alias=latest", "is not an alias MLflow accepts"),
        ("registry.alias=v3", "is not an alias MLflow accepts"),
    ],
)
def test_registry_names_are_plain(refused, tmp_path, override, text):
    cfg = write_config(str(tmp_path / "job"), retrain=True)
    line = refused(retrain.main, ["--config", cfg, "--window", "1", "--set", override], override.split("=")[0])
    assert text in line


def test_a_config_file_name_that_is_no_model_name_needs_registry_model_name(refused, tmp_path):
    cfg = write_config(str(tmp_path / "job"), retrain=True, registry={"model_name": None})
    spaced = str(tmp_path / "job" / "my job.yaml")
    os.rename(cfg, spaced)
    line = refused(retrain.main, ["--config", spaced, "--window", "1"], "registry.model_name")
    assert line.startswith("config error: registry.model_name: null, so the config file's name is used: 'my job'")


@pytest.mark.parametrize("model", ["models:/..@champion", "models:/a b@champion", "models:/events@.x"])
def test_predict_model_names_are_plain(refused, tmp_path, model):
    argv = ["--model", model, "--input", str(tmp_path / "in"), "--output", str(tmp_path / "out")]
    refused(predict.main, argv + ["--tracking-uri", f"sqlite:///{tmp_path}/none.db"], "--model")


# ---- output locations ----------------------------------------------------------------------------------------


def a_file(tmp_path):
    path = tmp_path / "taken"
    path.write_text("a file")
    return str(path)


@pytest.mark.parametrize("job", ["train", "retrain"])
def test_output_dir_that_is_a_file_is_refused_before_training(refused, tmp_path, job):
    taken = a_file(tmp_path)
    cfg = write_config(str(tmp_path / "job"), job == "retrain", output={"dir": taken})
    main, extra = (train.main, []) if job == "train" else (retrain.main, ["--window", "1"])
    line = refused(main, ["--config", cfg, *extra], "output.dir")
    lead = "" if job == "train" else f"cannot create {taken}/1: "
    assert line == f"config error: output.dir: {lead}{taken} is a file, not a directory"


def test_window_folder_that_is_a_file_is_refused(refused, tmp_path):
    cfg = write_config(str(tmp_path / "job"), retrain=True)
    os.makedirs(tmp_path / "job" / "runs")
    (tmp_path / "job" / "runs" / "7").write_text("a file")
    line = refused(retrain.main, ["--config", cfg, "--window", "7"], "output.dir")
    assert line.endswith(f"{tmp_path}/job/runs/7 is a file, not a directory")


@pytest.mark.parametrize("job", ["train", "retrain", "predict"])
def test_output_under_a_file_cannot_be_created(refused, tmp_path, job):
    under = os.path.join(a_file(tmp_path), "deeper", "out")
    cfg = write_config(str(tmp_path / "job"), job == "retrain", output={"dir": under})
    argv = {
        "train": (train.main, ["--config", cfg], "output.dir"),
        "retrain": (retrain.main, ["--config", cfg, "--window", "1"], "output.dir"),
        "predict": (
            predict.main,
            ["--model", "models:/events@champion", "--input", "x", "--output", under, "--tracking-uri", "x"],
            "--output",
        ),
    }[job]
    line = refused(*argv)
    assert f": cannot create {under}" in line or f": cannot create {os.path.dirname(under)}" in line
    assert line.endswith(f"{tmp_path}/taken is a file, not a directory")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes into any directory")
def test_unwritable_output_dir_is_refused(refused, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        cfg = write_config(str(tmp_path / "job"), output={"dir": str(locked / "out")})
        line = refused(train.main, ["--config", cfg], "output.dir")
        assert line.endswith(f"cannot create {locked}/out: {locked} is not writable")
    finally:
        locked.chmod(0o700)


def test_not_writable_is_read_from_the_directory(tmp_path, monkeypatch):
    """The same refusal where the suite runs as root: ``os.access`` says no."""
    monkeypatch.setattr(outputs.os, "access", lambda path, mode: path != str(tmp_path))
    with pytest.raises(ConfigError) as info:
        outputs.check_local_dir(str(tmp_path / "out"))
    assert str(info.value) == f"output.dir: cannot create {tmp_path}/out: {tmp_path} is not writable"
    with pytest.raises(ConfigError, match=f"^output.dir: {tmp_path} is not writable$"):
        outputs.check_local_dir(str(tmp_path))


@pytest.mark.parametrize("output", ["", "/", "a\0b"])
def test_predict_output_that_is_no_directory_name(refused, tmp_path, output):
    argv = ["--model", "models:/events@champion", "--input", "x", "--output", output, "--tracking-uri", "x"]
    refused(predict.main, argv, "--output")


# ---- config files --------------------------------------------------------------------------------------------

NOT_CONFIGS = {
    "binary": bytes(range(256)) + SECRET.encode() + bytes(range(255, -1, -1)),
    "passwd": f"root:x:0:0:{SECRET}:/root:/bin/bash\n".encode(),
    "shadow": f"root:*:{SECRET}:0:99999:7:::\n".encode(),
    "shadow, two lines": f"root:*:{SECRET}:0:99999:7:::\nbin:*:{SECRET}:0\n".encode(),
    "a mapping": f"{SECRET}: 1\nuser: {SECRET}\n".encode(),
    "a list": f"- {SECRET}\n".encode(),
    "control characters": f"data:\n  train: {SECRET}\x01\n".encode(),
    "a tag": f"data: !{SECRET} x\n".encode(),
    "an alias": f"data: *{SECRET}\n".encode(),
    "a python object": f"data: !!python/object:os.system {SECRET}\n".encode(),
    "latin-1": f"caf\xe9: {SECRET}\n".encode("latin-1"),
    "deeply nested": b"[" * 600 + SECRET.encode(),
}


@pytest.mark.parametrize("job", ["train", "retrain"])
@pytest.mark.parametrize("kind", sorted(NOT_CONFIGS))
def test_a_file_that_is_no_job_config_is_refused_without_quoting_it(refused, tmp_path, kind, job):
    path = tmp_path / "not-a-config"
    path.write_bytes(NOT_CONFIGS[kind])
    main, extra = (train.main, []) if job == "train" else (retrain.main, ["--window", "1"])
    line = refused(main, ["--config", str(path), *extra], "--config")
    assert line.startswith(f"config error: --config: {path} is not ")


def test_yaml_errors_say_where_and_keep_the_grammar(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(f"data: [1, 2\nmodel: {SECRET}\n")
    with pytest.raises(ConfigError) as info:
        config.load(str(path))
    assert str(info.value).startswith(f"--config: {path} is not valid YAML: expected ',' or ']', but got ")
    assert "at line 2, column" in str(info.value) and SECRET not in str(info.value)


def test_an_unknown_key_of_a_job_config_is_still_named(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("data: {train: generated:binary}\nmodel: {estimator: LogisticRegression}\noutpt: {dir: x}\n")
    with pytest.raises(ConfigError, match=r"^outpt: unknown key \(did you mean output\?\)$"):
        config.load(str(path))


def test_config_errors_are_one_line():
    assert str(ConfigError("--config", "a\nb\r\x00c\u2028")) == "--config: a\\nb\\r\\x00c\\u2028"
