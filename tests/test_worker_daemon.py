"""The Python worker daemon (``sparkml.worker_daemon``): the test session's workers fork from it, start with torch
and the library imported and frozen out of the garbage collector; a module it cannot import does not stop it; the
jobs' local sessions use it unless their config names another daemon."""

import gc
import os
import sys

from sparkml import worker_daemon
from sparkml.jobs.session import DAEMON_MODULE, session_conf


def _worker_state(_):
    """In a task: the worker's parent (the daemon it forked from), and what it started with."""
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        parent = f.read().replace(b"\0", b" ").decode()
    return [(parent, "torch" in sys.modules, gc.get_freeze_count())]


def test_the_sessions_workers_fork_from_the_daemon_with_torch_imported(spark):
    states = spark.sparkContext.parallelize(range(4), 4).mapPartitions(_worker_state).collect()
    assert len(states) == 4
    for parent, torch_imported, frozen in states:
        assert "-m sparkml.worker_daemon" in parent, parent
        assert torch_imported
        assert frozen > 100_000  # torch's and the library's objects: frozen before the fork


def test_a_module_that_fails_to_import_is_reported_and_the_others_load(capsys):
    failed = worker_daemon.preload(("json", "sparkml_no_such_module", "sparkml.scoring.batch"))
    assert failed == ["sparkml_no_such_module"]
    assert "sparkml.scoring.batch" in sys.modules
    assert "sparkml_no_such_module not preloaded (ModuleNotFoundError" in capsys.readouterr().err


def test_the_jobs_local_sessions_use_the_daemon_unless_their_config_names_one():
    conf = {"spark.ui.enabled": "false"}
    assert session_conf({"master": "local[2]", "conf": conf})[DAEMON_MODULE] == "sparkml.worker_daemon"
    assert session_conf({"master": "local", "conf": conf})[DAEMON_MODULE] == "sparkml.worker_daemon"
    assert conf == {"spark.ui.enabled": "false"}  # the config itself is left as it was
    own = {DAEMON_MODULE: "my.daemon"}
    assert session_conf({"master": "local[*]", "conf": own})[DAEMON_MODULE] == "my.daemon"
    for master in ("local-cluster[2,1,1024]", "yarn", "spark://host:7077", "k8s://https://host"):
        assert DAEMON_MODULE not in session_conf({"master": master, "conf": conf}), master
