"""A driver process killed in the middle of a checkpointed fit, for tests/test_checkpoint.py.

    python tests/support/checkpoint_fit.py fit STRATEGY CHECKPOINT_DIR PROGRESS_FILE
        a local[2] session fits ``estimator(STRATEGY, CHECKPOINT_DIR)`` on ``frame(spark)``, appending each
        iteration's number to PROGRESS_FILE (STRATEGY: sync, allreduce, ...; kernel-sync, kernel-allreduce:
        KernelSVC)
    python tests/support/checkpoint_fit.py kill STRATEGY CHECKPOINT_DIR AT_ITERATION
        runs ``fit`` in a new session (process group), SIGKILLs that group (driver and JVM) and the process
        groups of its descendants (PySpark's daemon and Python workers keep a group of their own) as soon as
        the checkpoint of AT_ITERATION or a later one exists, and prints one JSON line: the checkpoint
        iteration it was killed at, the last iteration the fit reached, and how the process ended

Test-only hook, off by default: SPARKML_TEST_ITERATION_SLEEP (seconds) makes a Progress callback sleep that
long at the end of every iteration (where the optimizer runs: the driver with 'sync', rank 0's barrier task
with 'allreduce'), so that the kill lands mid-fit. It lives in this script, not in the library.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PARAMS = {"regParam": 0.001, "tol": 1e-10, "checkpointInterval": 2}
KERNEL_PARAMS = {
    "regParam": 0.001,
    "gamma": 0.1,
    "numLandmarks": 300,
    "tol": 1e-10,
    "checkpointInterval": 1,
    "dtype": "float64",
}


def frame(spark):
    """The fit's data, built identically in every process (seeded, explicit partitions)."""
    from support.data_helpers import linear_frame

    return linear_frame(spark, n=2000, d=12, partitions=4, seed=3)


def estimator(strategy, checkpoint_dir=None):
    """LogisticRegression with ``strategy``; ``kernel-<strategy>``: KernelSVC, whose iterations are Newton
    rounds (a checkpoint every round, float64 so that the resumed fit can be compared to 1e-9)."""
    from sparkml.classification import KernelSVC, LogisticRegression

    kernel = strategy.startswith("kernel-")
    params = dict(KERNEL_PARAMS if kernel else PARAMS, strategy=strategy.removeprefix("kernel-"))
    if checkpoint_dir is not None:
        params["checkpointDir"] = checkpoint_dir
    return KernelSVC(**params) if kernel else LogisticRegression(**params)


def _slow_progress(seconds, progress_file):
    """The test-only Progress callback: note the iteration, then sleep."""

    def callback(event):
        with open(progress_file, "a") as f:
            f.write(f"{event.iteration}\n")
        time.sleep(seconds)

    return callback


def fit(strategy, directory, progress_file):
    sys.path[:0] = [os.path.dirname(os.path.dirname(HERE)), os.path.dirname(HERE)]  # the root, tests/
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("checkpoint-fit")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.default.parallelism", "4")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.local.dir", os.path.join(os.path.dirname(progress_file), "spark-local"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    est = estimator(strategy, directory)
    seconds = float(os.environ.get("SPARKML_TEST_ITERATION_SLEEP", "0"))
    if seconds > 0:
        est._add_iteration_callback(_slow_progress(seconds, progress_file))
    model = est.fit(frame(spark))
    print(json.dumps({"finished": model.summary.totalIterations}))
    spark.stop()


def _checkpoints(directory):
    names = os.listdir(directory) if os.path.isdir(directory) else []
    return sorted(int(m.group(1)) for n in names if (m := re.match(r"iteration-(\d+)$", n)))


def _descendants(pid):
    """The processes under ``pid`` (from /proc)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _die_with_parent():
    """In the fit's process: die when the ``kill`` process does (the suite's end kills it when late)."""
    import ctypes

    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _kill_tree(proc):
    """SIGKILL ``proc``'s session (the driver and its JVM) and its descendants' process groups (PySpark's
    daemon and its Python workers): this fit's own processes only."""
    groups = {proc.pid}
    for pid in _descendants(proc.pid):
        try:
            groups.add(os.getpgid(pid))
        except OSError:
            pass
    groups.discard(os.getpgid(0))
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass


def kill(strategy, directory, at_iteration, timeout=300):
    scratch = os.path.dirname(os.path.abspath(directory))
    progress_file = os.path.join(scratch, f"progress-{strategy}.txt")
    log = open(os.path.join(scratch, f"fit-{strategy}.log"), "w")
    proc = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "fit", strategy, directory, progress_file],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    killed_at, deadline = None, time.time() + timeout
    while proc.poll() is None:
        found = _checkpoints(directory)
        if found and found[-1] >= at_iteration:
            killed_at = found[-1]
        if killed_at is not None or time.time() > deadline:
            _kill_tree(proc)
            break
        time.sleep(0.02)
    code = proc.wait()
    log.close()
    with open(log.name) as f:
        tail = f.read()[-3000:]
    reached = []
    if os.path.exists(progress_file):
        with open(progress_file) as f:
            reached = [int(line) for line in f if line.strip()]
    print(
        json.dumps(
            {
                "killed_at_checkpoint": killed_at,
                "reached": max(reached, default=0),
                "checkpoints_left": _checkpoints(directory),
                "returncode": code,
                "log_tail": tail if killed_at is None else "",
            }
        )
    )


if __name__ == "__main__":
    mode, strategy, directory, last = sys.argv[1:5]
    if mode == "fit":
        fit(strategy, directory, last)
    else:
        kill(strategy, directory, int(last))
