"""`jobs.retrain` end to end on a Parquet dataset partitioned by window, against a real MLflow registry
(sqlite file; one test against a real `mlflow server` over HTTP): promotion, the gate, warm start,
reruns, two runs at once, and a run killed between registering and promoting."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml
from support.helpers import ROOT

from sparkml.jobs import config, gate, registry, retrain
from sparkml.runtime import fault_injection

mlflow = pytest.importorskip("mlflow")
from mlflow.tracking import MlflowClient  # noqa: E402

ROWS, FEATURES = 2500, 8
GATE = {"areaUnderROC": {"threshold": 0.85, "min_absolute_change": 0.0}, "accuracy": {"threshold": 0.6}}


def window_rows(rng, w, flip=0.0):
    X = rng.standard_normal((ROWS, FEATURES))
    y = (X @ w + 0.3 * rng.standard_normal(ROWS) > 0).astype(float)
    flipped = rng.random(ROWS) < flip
    y[flipped] = 1.0 - y[flipped]
    return X, y


@pytest.fixture(scope="module")
def windows(spark, tmp_path_factory):
    """Windows 1, 2 and 4 of a drifting problem (2 and 4 share a model that moved away from 1's);
    window 3 has 30% of its labels flipped."""
    import pandas as pd
    from pyspark.ml.functions import array_to_vector

    rng = np.random.default_rng(7)
    w1 = rng.standard_normal(FEATURES)
    w2 = w1 + 0.8 * rng.standard_normal(FEATURES)
    frames = []
    for window, w, flip in (("1", w1, 0.0), ("2", w2, 0.0), ("3", w2, 0.3), ("4", w2, 0.0)):
        X, y = window_rows(rng, w, flip)
        frames.append(pd.DataFrame({"features": list(X), "label": y, "window": window}))
    path = str(tmp_path_factory.mktemp("windows") / "events")
    df = spark.createDataFrame(pd.concat(frames, ignore_index=True))
    df.withColumn("features", array_to_vector("features")).write.partitionBy("window").parquet(path)
    return path


def write_config(tmp_path, data_path, **sections):
    raw = {
        "data": {"train": data_path},
        "model": {"estimator": "LogisticRegression", "params": {"regParam": 0.01, "maxIter": 100}},
        "output": {"dir": str(tmp_path / "runs")},
        "registry": {"model_name": "events"},
        "gate": {"metrics": GATE},
    }
    for key, value in sections.items():
        raw[key] = {**raw.get(key, {}), **value}
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "retrain.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def store(tmp_path):
    return MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")


def run(spark, cfg_path, window, capsys, *extra):
    code = retrain.main(["--config", cfg_path, "--window", window, *extra], spark=spark)
    out = capsys.readouterr()
    return code, out.out.strip().splitlines(), out.err.strip().splitlines()[-1] if out.err.strip() else ""


def decision(tmp_path, window, version):
    return json.loads((tmp_path / "runs" / window / f"v{version}" / "decision.json").read_text())


def versions(client):
    return {str(v.version): v for v in client.search_model_versions("name = 'events'")}


def test_three_windows_promote_reject_and_rerun(spark, windows, tmp_path, capsys):
    cfg = write_config(tmp_path, windows)
    client = store(tmp_path)

    code, lines, _ = run(spark, cfg, "1", capsys)
    assert code == 0 and lines[-1].startswith("events window 1: promoted version 1 to champion (first champion)")
    first = decision(tmp_path, "1", 1)
    assert first["warm_start"] == {"used": False, "from_version": None, "reason": "no champion yet"}
    assert first["metrics"]["champion"] is None and first["metrics"]["candidate"]["areaUnderROC"] > 0.9

    # a cold fit of window 2 for comparison: a dry run without warm start registers nothing
    code, lines, _ = run(spark, cfg, "2", capsys, "--dry-run", "--set", "registry.warm_start=false")
    assert code == 0 and "(dry run, nothing registered): would be promoted" in lines[-1]
    dry = [d for d in os.listdir(tmp_path / "runs" / "2") if d.startswith("dry-run-")]
    cold = json.loads((tmp_path / "runs" / "2" / dry[0] / "decision.json").read_text())
    assert cold["versions"]["candidate"] is None and set(versions(client)) == {"1"}

    code, lines, _ = run(spark, cfg, "2", capsys)
    assert code == 0 and lines[-1].startswith("events window 2: promoted version 2 to champion (was version 1)")
    second = decision(tmp_path, "2", 2)
    assert second["warm_start"]["used"] and second["warm_start"]["from_version"] == "1"
    warm_iters, cold_iters = second["training"]["iterations"], cold["training"]["iterations"]
    with capsys.disabled():
        print(f"\nwindow 2: warm-started fit {warm_iters} iterations, cold fit {cold_iters}")
    assert warm_iters < cold_iters
    # the drifted window: the new model beats the champion on the same holdout
    assert second["metrics"]["candidate"]["areaUnderROC"] > second["metrics"]["champion"]["areaUnderROC"]
    assert str(client.get_model_version_by_alias("events", "champion").version) == "2"

    code, lines, _ = run(spark, cfg, "3", capsys)
    third = decision(tmp_path, "3", 3)
    auc = third["metrics"]["candidate"]["areaUnderROC"]
    champ = third["metrics"]["champion"]["areaUnderROC"]
    failure = f"areaUnderROC {auc:.4f} is below the threshold 0.8500"
    reason = (
        f"{failure}; areaUnderROC {auc:.4f} against the champion's {champ:.4f}: a gain of "
        f"{auc - champ:+.4f}, less than the required 0.0000"
    )
    assert code == 0 and lines[-1] == (
        f"events window 3: not promoted: version 3 is registered, champion stays version 2: {reason}"
    )
    assert third["decision"] == {"outcome": "rejected", "reason": reason}
    report = (tmp_path / "runs" / "3" / "v3" / "report.md").read_text()
    assert failure in report and "rejected" in report
    assert (tmp_path / "runs" / "3" / "v3" / "roc.png").read_bytes()[:4] == b"\x89PNG"
    assert str(client.get_model_version_by_alias("events", "champion").version) == "2"
    tags = versions(client)["3"].tags
    assert tags["sparkml.decision"] == "rejected" and tags["sparkml.window"] == "3"
    assert tags["sparkml.gate"] == "failed" and tags["sparkml.gate_champion"] == "2"
    assert float(tags["sparkml.metric.areaUnderROC"]) == pytest.approx(auc, rel=1e-5)

    # the MLflow run of window 3: its decision, the champion's metrics, the report as artifacts
    run3 = client.get_run(third["run"]["run_id"])
    assert run3.data.tags["sparkml.decision"] == "rejected" and run3.data.tags["sparkml.window"] == "3"
    assert run3.data.metrics["holdout_areaUnderROC"] == pytest.approx(auc)
    assert run3.data.metrics["champion_areaUnderROC"] == pytest.approx(third["metrics"]["champion"]["areaUnderROC"])
    assert {"report.md", "decision.json", "roc.png", "model"} <= {
        a.path for a in client.list_artifacts(run3.info.run_id)
    }

    code, lines, _ = run(spark, cfg, "2", capsys)
    assert code == 0 and lines[-1] == (
        "events window 2: already registered as version 2 with the same data and "
        "config: promoted (passed the gate against champion version 1); nothing to do"
    )
    assert set(versions(client)) == {"1", "2", "3"}


def test_config_and_data_errors_exit_2_before_registry_writes(spark, windows, tmp_path, capsys):
    cfg = write_config(tmp_path, windows)
    code, _, err = run(spark, cfg, "9", capsys)
    assert code == 2 and err == f"config error: --window: no training rows for window 9 in {windows}"
    code, _, err = run(spark, cfg, "1", capsys, "--set", "data.window_column=day")
    assert code == 2 and err.startswith("config error: data.window_column: column 'day' not found")
    code, _, err = run(spark, cfg, "1", capsys, "--set", "gate.metrics.rmse.threshold=1.0")
    assert code == 2 and err.startswith(
        "config error: gate.metrics.rmse: not a holdout metric of a classification model"
    )
    code, _, err = run(spark, cfg, "1", capsys, "--set", "gate.metrics.accuracy.min_relative_change=2")
    assert code == 2 and err == (
        "config error: gate.metrics.accuracy.min_relative_change: expected a number in [0, 1], got 2.0"
    )
    assert versions(store(tmp_path)) == {}


def test_gate_rules_follow_mlflow_metric_threshold():
    higher = gate.Rule("auc", True, threshold=0.8, min_absolute_change=0.01, min_relative_change=0.05)
    ok = higher.check(0.90, champion=0.85)  # 0.90 >= 0.85 + 0.01 and >= 0.85 * 1.05 = 0.8925
    assert ok["passed"] and ok["failures"] == []
    bad = higher.check(0.79, champion=0.785)
    assert bad["failures"] == [
        "auc 0.7900 is below the threshold 0.8000",
        "auc 0.7900 against the champion's 0.7850: a gain of +0.0050, less than the required 0.0100",
        "auc 0.7900 against the champion's 0.7850: a relative gain of +0.64%, less than the required 5.00%",
    ]
    lower = gate.Rule("rmse", False, threshold=2.0, min_relative_change=0.1)
    assert lower.check(1.7, champion=2.0)["passed"]  # 1.7 <= 2.0 - 0.1 * 2.0
    assert lower.check(1.9, champion=2.0)["failures"] == [
        "rmse 1.9000 against the champion's 2.0000: a relative drop of +5.00%, less than the required 10.00%"
    ]
    assert lower.check(2.5)["failures"] == ["rmse 2.5000 is above the threshold 2.0000"]  # no champion: floor only
    tolerant = gate.Rule("auc", True, min_absolute_change=-0.005)
    assert tolerant.check(0.896, champion=0.9)["passed"] and not tolerant.check(0.894, champion=0.9)["passed"]
    passed, results = gate.decide([higher, lower], {"auc": 0.95, "rmse": 1.0}, {"auc": 0.9, "rmse": 1.5})
    assert passed and [r["metric"] for r in results] == ["auc", "rmse"]
    with pytest.raises(config.ConfigError, match="gate.metrics.custom.greater_is_better: required"):
        gate.parse({"custom": {"threshold": 1.0}})
    with pytest.raises(config.ConfigError, match="gate.metrics.auc: no threshold"):
        gate.parse({"auc": {"greater_is_better": True}})
    with pytest.raises(config.ConfigError, match="deviance.greater_is_better: deviance is lower when better; true"):
        gate.parse({"deviance": {"greater_is_better": True, "threshold": 10.0}})  # would invert the gate
    assert gate.parse({"rmse": {"greater_is_better": False, "threshold": 1.0}})[0].greater_is_better is False


def test_stale_lock_of_a_dead_process_is_broken(tmp_path):
    client = store(tmp_path)
    reg = registry.Registry(client, "events", lock_timeout_s=1.0, poll_s=0.05)
    reg.ensure_model()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    client.create_registered_model(
        reg.lock_name(), tags={registry.OWNER: f"{socket.gethostname()}:{dead.stdout.strip()}"}
    )
    run_id = client.create_run(client.create_experiment("x")).info.run_id
    version = client.create_model_version("events", f"runs:/{run_id}/model", run_id).version
    reg.promote(version, None)
    assert str(client.get_model_version_by_alias("events", "champion").version) == str(version)
    with pytest.raises(registry.LostRace, match="champion moved from none to version 1"):
        reg.promote(version, None)
    assert [m.name for m in client.search_registered_models()] == ["events"]  # the lock is gone


# -- a real MLflow server over HTTP -------------------------------------------------------------


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.system
def test_retrain_against_a_real_mlflow_server(spark, windows, tmp_path, capsys):
    pytest.importorskip("flask_cors")
    port, server_dir = free_port(), tmp_path / "server"
    server_dir.mkdir()
    log = tmp_path / "server.log"  # a file, not a pipe: a pipe nobody reads would fill up and stall the server
    with log.open("w") as err:
        server = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
            + ["--backend-store-uri", f"sqlite:///{server_dir}/server.db"]
            + ["--artifacts-destination", str(server_dir / "artifacts")],
            cwd=server_dir,
            # no job runner: the tracking and registry API this test uses need none, and without huey installed
            # the runner starts a failing consumer process again and again, busy for as long as the server runs
            env=dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false"),
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.time() > deadline:
                    pytest.fail(f"mlflow server did not start: {log.read_text()[-3000:]}")
                time.sleep(0.5)
        cfg = write_config(tmp_path, windows, tracking={"uri": uri})
        code, lines, _ = run(spark, cfg, "1", capsys)
        assert code == 0 and lines[-1].startswith("events window 1: promoted version 1 to champion")
        client = MlflowClient(uri)
        champion = client.get_model_version_by_alias("events", "champion")
        assert str(champion.version) == "1" and champion.tags["sparkml.decision"] == "promoted"
        artifacts = {a.path for a in client.list_artifacts(champion.run_id)}
        assert {"model", "report.md", "roc.png", "config.yaml"} <= artifacts
        assert not os.path.exists(tmp_path / "mlflow.db")  # nothing went to the default store
        assert os.listdir(server_dir / "artifacts")  # the server stored the artifacts
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:  # a loaded machine: the server is not what this test is about
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def test_shipped_retrain_config_and_generated_windows():
    cfg = retrain.load_config(os.path.join(ROOT, "conf", "retrain_demo.yaml"), [])
    rules = {r.metric: r for r in gate.parse(cfg["gate"]["metrics"])}
    assert rules["areaUnderROC"].min_absolute_change == -0.005 and rules["areaUnderROC"].greater_is_better
    assert cfg["registry"]["model_name"] == "retrain_demo" and cfg["data"]["train"] == "generated:binary"
    # generated windows: new rows and noise per window, the same true model (its labels agree with the rows')
    from sparkml.jobs import datasets

    def fit(X, y):
        return np.linalg.lstsq(np.c_[X, np.ones(len(X))], y, rcond=None)[0]

    (X1, y1), (X2, y2), (X1b, y1b) = (
        datasets.generate_arrays("regression", 400, 5, seed=0, window=w)
        for w in ("2026-11-01", "2026-11-02", "2026-11-01")
    )
    np.testing.assert_array_equal(X1, X1b)
    np.testing.assert_array_equal(y1, y1b)
    assert not np.allclose(X1, X2)
    truth = fit(*datasets.generate_arrays("regression", 400, 5, seed=0))
    np.testing.assert_allclose(fit(X1, y1), fit(X2, y2), atol=0.15)  # one model, two samples
    np.testing.assert_allclose(fit(X1, y1), truth, atol=0.15)  # the model of the un-windowed data


# -- two runs at once, and a run killed before promotion: the second run is a separate process ----
#
# Each of these tests needs a retrain subprocess (a driver and JVM of its own) paused between registering
# its version and promoting it. Both start with the module (``paused_runs``, against registries of their
# own whose champion is version 1), so their JVMs start while the module's other tests run; the two
# tests come last.

RACE = "test_two_runs_at_once_cannot_both_promote"
KILLED = "test_run_killed_before_promotion_is_finished_by_the_next"


@pytest.fixture(scope="module", autouse=True)
def paused_runs(request, tmp_path_factory):
    """name -> (folder, config, pause file, process) for the selected tests of RACE and KILLED."""
    selected = {item.name for item in request.session.items if item.module is request.module}
    runs = {}
    for name in (RACE, KILLED):
        if name in selected:
            spark, windows = request.getfixturevalue("spark"), request.getfixturevalue("windows")
            folder = tmp_path_factory.mktemp(name[:40])
            cfg = write_config(folder, windows)
            assert retrain.main(["--config", cfg, "--window", "1"], spark=spark) == 0
            pause = str(folder / "pause")
            runs[name] = (folder, cfg, pause, start_retrain(cfg, "2", pause))
    yield runs
    for _, _, _, proc in runs.values():
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def start_retrain(cfg, window, pause):
    env = dict(os.environ, **{fault_injection.PAUSE_ENV: pause, "PYSPARK_PYTHON": sys.executable})
    return subprocess.Popen(
        [sys.executable, "-m", "sparkml.jobs.retrain", "--config", cfg, "--window", window],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_registered(proc, pause, timeout=300):
    deadline = time.time() + timeout
    while not os.path.exists(pause + ".retrain-registered"):
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"the retrain subprocess never registered its version:\n{out}\n{err[-3000:]}")
        time.sleep(0.5)


@pytest.mark.system
def test_two_runs_at_once_cannot_both_promote(spark, paused_runs, capsys):
    tmp_path, cfg, pause, other = paused_runs[RACE]  # gates against champion 1, registers version 2, waits
    try:
        wait_registered(other, pause)
        client = store(tmp_path)
        assert versions(client)["2"].tags["sparkml.decision"] == "pending"
        code, lines, _ = run(spark, cfg, "4", capsys)  # also gates against champion 1; promotes version 3
        assert code == 0 and lines == [
            "events window 4: promoted version 3 to champion (was version 1); " + lines[-1].split("; ", 1)[1]
        ]
        open(pause, "w").close()
        out, err = other.communicate(timeout=300)
    finally:
        other.kill()
    assert other.returncode == 0, err[-3000:]
    assert out.strip().splitlines()[-1] == (
        "events window 2: lost the promotion race: the champion moved from version 1 to version 3 while this "
        "run's gate ran; version 2 passed its gate against version 1 but is not promoted"
    )
    assert str(client.get_model_version_by_alias("events", "champion").version) == "3"
    assert versions(client)["2"].tags["sparkml.decision"] == "lost"


@pytest.mark.system
def test_run_killed_before_promotion_is_finished_by_the_next(spark, paused_runs, capsys):
    tmp_path, cfg, pause, victim = paused_runs[KILLED]
    try:
        wait_registered(victim, pause)
    finally:
        os.killpg(victim.pid, signal.SIGKILL)  # the driver and its JVM, between registering and promoting
        victim.wait()
    client = store(tmp_path)
    assert str(client.get_model_version_by_alias("events", "champion").version) == "1"
    assert versions(client)["2"].tags["sparkml.decision"] == "pending"

    code, lines, _ = run(spark, cfg, "2", capsys)
    assert code == 0
    assert lines[0] == (
        "version 2 (window 2) was left undecided by a run that died; it passed its gate against "
        "champion version 1, still in service: finished (now champion)"
    )
    assert lines[-1].startswith(
        "events window 2: already registered as version 2 with the same data and config: promoted"
    )
    assert str(client.get_model_version_by_alias("events", "champion").version) == "2"
    assert set(versions(client)) == {"1", "2"}


def test_a_wheel_task_with_a_three_part_model_name(spark, windows, tmp_path, monkeypatch, capsys):
    """As a Databricks Python wheel task runs the jobs: the console entry point (from the package's metadata)
    called in this process with its arguments in ``sys.argv``, inside the session that is already active, which
    the job uses and leaves running; a failure raises SystemExit with the job's exit code (a wheel task ignores a
    return value). The registered model has a three-part name (Unity Catalog's ``catalog.schema.model``):
    registered, gated, aliased and scored by ``sparkml-predict --model models:/main.default.events@champion``."""
    from importlib.metadata import entry_points

    from pyspark.sql import SparkSession

    from sparkml.jobs import models

    def entry(name, *args):
        monkeypatch.setattr(sys, "argv", [name, *args])
        return entry_points(group="console_scripts", name=name)[0].load()()

    name = "main.default.events"
    cfg = write_config(tmp_path, windows, registry={"model_name": name})
    assert SparkSession.getActiveSession() is spark
    assert entry("sparkml-retrain", "--config", cfg, "--window", "1") is None
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith(f"{name} window 1: promoted version 1")
    assert str(store(tmp_path).get_model_version_by_alias(name, "champion").version) == "1"
    assert spark.range(3).count() == 3  # the active session, not stopped

    uri, scores = f"sqlite:///{tmp_path}/mlflow.db", str(tmp_path / "scores")
    source = os.path.join(windows, "window=4")
    args = ("--model", f"models:/{name}@champion", "--input", source, "--output", scores, "--tracking-uri", uri)
    assert entry("sparkml-predict", *args) is None
    champion, _ = models.load(f"models:/{name}@champion", spark, tracking_uri=uri)
    expected = champion.transform(spark.read.parquet(source)).select("prediction").collect()
    written = spark.read.parquet(scores)
    assert written.count() == ROWS and sorted(written.select("prediction").collect()) == sorted(expected)
    with pytest.raises(SystemExit) as failed:  # the output exists: a config error, exit code 2
        entry("sparkml-predict", *args)
    assert failed.value.code == 2 and "--output" in capsys.readouterr().err
    assert spark.range(3).count() == 3
