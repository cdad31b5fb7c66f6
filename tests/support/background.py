"""Subprocess tests started as soon as the run is collected, and awaited by the tests that need them.

The Spark Connect run and the local-cluster spark-submits each start JVMs of their own and spend
most of their minute or two waiting on them, while the in-process tests leave the cores mostly
idle. A test module that defines ``background_runs()`` (name -> ``Run``) has its runs started by
``conftest.pytest_collection_finish`` when any of its tests is selected; its tests call
``result(name)``. Every run still started at the end of the session is killed.
"""

import os
import shutil
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field

_RUNS = {}
# how many runs go at once: each starts JVMs of its own, and on a 2-core machine more than one at a time
# starves the in-process tests (and each other) rather than filling idle cores
_AT_ONCE = threading.BoundedSemaphore(max(1, int(os.environ.get("SPARKML_TEST_BACKGROUND_RUNS", "1"))))


@dataclass
class Run:
    """One subprocess: ``argv`` with ``env`` and ``cwd``; ``prepare()`` runs first (in the launching
    thread), for inputs the command reads. Runs in the same ``group`` go one after another."""

    argv: list
    env: dict = None
    cwd: str = None
    prepare: object = None
    group: str = None
    timeout: float = 900
    seconds: float = None  # how long the subprocess ran (reported at the end of the session)
    proc: subprocess.Popen = field(default=None, repr=False)
    done: threading.Event = field(default_factory=threading.Event, repr=False)
    outcome: subprocess.CompletedProcess = field(default=None, repr=False)


def start(runs):
    """Start ``runs`` (name -> Run): one thread per group (or per ungrouped run); at most
    ``$SPARKML_TEST_BACKGROUND_RUNS`` (default 1) subprocesses run at once."""
    groups = {}
    for name, run in runs.items():
        if name in _RUNS:
            continue
        _RUNS[name] = run
        groups.setdefault(run.group or name, []).append(run)
    for members in groups.values():
        threading.Thread(target=_run_all, args=(members,), daemon=True).start()


def _run_all(members):
    for run in members:
        try:
            with _AT_ONCE:
                _run_one(run)
        finally:
            run.done.set()


def _run_one(run):
    """Run one subprocess to its end (or its timeout) and record its outcome."""
    try:
        if run.prepare is not None:
            run.prepare()
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            t0 = time.monotonic()
            run.proc = subprocess.Popen(run.argv, env=run.env, cwd=run.cwd, stdout=out, stderr=err, text=True)
            try:
                code = run.proc.wait(timeout=run.timeout)
            except subprocess.TimeoutExpired:
                run.proc.kill()
                code = run.proc.wait()
                err.write(f"\n[killed after {run.timeout} s]\n")
            run.seconds = time.monotonic() - t0
            out.seek(0)
            err.seek(0)
            run.outcome = subprocess.CompletedProcess(run.argv, code, out.read(), err.read())
    except Exception as e:  # reported to the test that awaits it
        run.outcome = subprocess.CompletedProcess(run.argv, -1, "", f"could not run: {e!r}")


def result(name, runs=None):
    """The finished ``CompletedProcess`` of run ``name``; starts ``runs`` first if the collection hook
    did not (a test called outside a normal pytest collection)."""
    if name not in _RUNS and runs is not None:
        start(runs)
    run = _RUNS[name]
    run.done.wait()
    return run.outcome


def json_results(name, runs=None):
    """The ``RESULTS {json}`` line that run ``name`` printed last, parsed; the run must have succeeded."""
    import json

    done = result(name, runs)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULTS ")]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-5000:]
    return json.loads(lines[-1][len("RESULTS ") :])


def durations():
    """(seconds, name) of every run that finished, slowest first."""
    return sorted(((run.seconds, name) for name, run in _RUNS.items() if run.seconds is not None), reverse=True)


def stop_all():
    for run in _RUNS.values():
        if run.proc is not None and run.proc.poll() is None:
            run.proc.kill()


def scratch_dir(prefix):
    """A temporary directory removed at interpreter exit (runs may outlive any pytest tmp_path)."""
    import atexit

    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, True)
    return path


def python_env(python):
    """The environment a Spark subprocess needs to use this interpreter for its Python workers."""
    return dict(os.environ, PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python)
