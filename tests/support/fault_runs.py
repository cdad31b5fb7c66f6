"""Fits on ``local-cluster[2,1,1024]`` (two executor JVMs) with a task failure or a killed executor.

    python tests/support/fault_runs.py OUT.json SCRATCH

For each strategy: a clean fit, then the same fit with a pass over the blocks failing once, and
(``CONVERSION_LAYOUTS``) with the first attempt of a conversion task failing (``sparkml.runtime.fault_injection``,
switched on through the ``faults`` file in SCRATCH/faults); for sync, averaging and allreduce, the fit
with one executor JVM SIGKILLed at the third iteration, compared with the same clean fit; and the same kill
with the default strategy ``auto`` (an ``allreduce`` barrier stage here, fitted again with ``sync`` after
the loss), compared with the clean ``sync`` fit, with whether the fallback's warning was logged.
Writes, per strategy and fault: the largest coefficient difference from the clean fit (or the
error), the seconds it took, whether the fault fired, and the training blocks left on any
executor's disk after the fit (every executor's local directory is under SCRATCH/local).
"""

import glob
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np

STRATEGIES = ("sync", "averaging", "allreduce", "allreduce-averaging")
# the conversion job is the same code for every strategy; its two layouts: one block per task slot (sync,
# allreduce) and one per input partition (the averaging strategies)
CONVERSION_LAYOUTS = ("sync", "averaging")
# every fit runs all its iterations (tol is below reach): enough for the faults (a pass fails at the first or
# second, an executor dies at the third) and a few iterations on the rebuilt blocks after them
MAX_ITER = 8


def session(scratch, conf=()):
    """The ``local-cluster`` session, with ``conf`` (pairs) added."""
    from pyspark.sql import SparkSession

    faults_dir = os.path.join(scratch, "faults")
    os.makedirs(faults_dir, exist_ok=True)
    builder = SparkSession.builder
    for key, value in conf:
        builder = builder.config(key, value)
    return (
        builder.master("local-cluster[2,1,1024]")
        .appName("sparkml-faults")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.local.dir", os.path.join(scratch, "local"))
        .config("spark.executorEnv.SPARKML_TEST_FAULT_DIR", faults_dir)
        .config("spark.executorEnv.SPARK_LOCAL_DIRS", os.path.join(scratch, "local"))
        .config("spark.task.maxFailures", "4")
        .config("spark.sparkml.conversionCache.enabled", "false")  # every fit converts: counts its blocks
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    ), faults_dir


def frame(spark):
    """Two partitions of a fixed logistic problem, from driver-side rows (recomputable anywhere)."""
    import pandas as pd
    from pyspark.ml.functions import array_to_vector

    rng = np.random.default_rng(5)
    X = rng.standard_normal((3000, 6))
    y = (X @ rng.standard_normal(6) + 0.5 * rng.standard_normal(3000) > 0).astype(float)
    pdf = pd.DataFrame({"x": list(X), "label": y})
    return spark.createDataFrame(pdf).repartition(2).withColumn("features", array_to_vector("x"))


def blocks_left(scratch):
    from sparkml.data import background_release

    background_release.wait()  # a fit that returned deletes its blocks in the background
    return sorted(
        p
        for p in glob.glob(os.path.join(scratch, "local", "**", "sparkml-blocks", "*"), recursive=True)
        if not os.path.basename(p).startswith(".")
    )


def executor_pids(app_id):
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [
        int(line.split()[0]) for line in out.splitlines() if "CoarseGrainedExecutorBackend" in line and app_id in line
    ]


def executor_holding(app_id, scratch, partition):
    """(pid, local directory) of the executor JVM whose disk holds ``partition``'s training blocks."""
    blocks = glob.glob(os.path.join(scratch, "local", "**", "sparkml-blocks", "*", str(partition)), recursive=True)
    for pid in executor_pids(app_id):
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
        dirs = env.get(b"SPARK_EXECUTOR_DIRS", b"").decode().split(os.pathsep)
        if any(d and b.startswith(d) for d in dirs for b in blocks):
            return pid, dirs[0]
    raise RuntimeError(f"no executor of {app_id} holds the blocks of partition {partition}: {blocks}")


def set_faults(faults_dir, spec):
    for marker in glob.glob(os.path.join(faults_dir, "*.*")):
        os.remove(marker)
    with open(os.path.join(faults_dir, "faults"), "w") as f:
        f.write(spec)


def fired(faults_dir, point):
    return len(glob.glob(os.path.join(faults_dir, f"{point}.*")))


def main(out, scratch):
    from sparkml.classification import LogisticRegression

    spark, faults_dir = session(scratch)
    df = frame(spark).cache()
    df.count()
    app_id = spark.sparkContext.applicationId
    results = {}

    import sparkml.strategies as strategies

    small_input_bytes = strategies.SMALL_INPUT_BYTES

    def fit(strategy, on_iteration=None):
        # the faults hit partition 1 and the blocks of both executors: sync converts this small frame into a block
        # per task slot, as it converts an input above SMALL_INPUT_BYTES ("auto" keeps its one block)
        strategies.SMALL_INPUT_BYTES = 0 if strategy == "sync" else small_input_bytes
        est = LogisticRegression(regParam=0.01, maxIter=MAX_ITER, tol=1e-12, strategy=strategy)
        if on_iteration is not None:
            est._add_iteration_callback(on_iteration)
        start = time.time()
        try:
            model = est.fit(df)
            return np.append(model.coefficients.toArray(), model.intercept), None, time.time() - start
        except Exception as e:
            return None, f"{type(e).__name__}: {str(e)[:1500]}", time.time() - start

    cleans = {}
    for strategy in STRATEGIES:
        set_faults(faults_dir, "")
        clean, error, seconds = cleans[strategy] = fit(strategy)
        record = {"clean": {"seconds": seconds, "error": error, "blocks_left": blocks_left(scratch)}}
        faults = [("task fails in a pass", "pass:2" if strategy in ("sync", "averaging") else "pass:1", "pass")]
        if strategy in CONVERSION_LAYOUTS:
            faults.insert(0, ("task fails in conversion", "convert:1", "convert"))
        for name, spec, point in faults:
            set_faults(faults_dir, spec)
            theta, error, seconds = fit(strategy)
            record[name] = {
                "seconds": seconds,
                "error": error,
                "fired": fired(faults_dir, point),
                "max_difference": None if theta is None or clean is None else float(np.max(np.abs(theta - clean))),
                "blocks_left": blocks_left(scratch),
            }
        set_faults(faults_dir, "")
        results[strategy] = record
    results["executor killed"] = {}
    warnings = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: warnings.append(record.getMessage())
    logging.getLogger("sparkml").addHandler(handler)
    for strategy in ("sync", "averaging", "allreduce", "auto"):
        clean = cleans["sync" if strategy == "auto" else strategy][0]
        killed = []
        del warnings[:]

        def kill_holder(killed=killed):  # the executor with partition 1's blocks: a barrier task reads them
            pid, directory = executor_holding(app_id, scratch, 1)
            os.kill(pid, signal.SIGKILL)
            killed.append(directory)

        if strategy in ("sync", "averaging"):  # the callback runs on the driver

            def kill_at_third(event):
                if event.iteration == 3 and not killed:
                    kill_holder()

            theta, error, seconds = fit(strategy, kill_at_third)
        else:  # the callback runs in rank 0's task: it holds the fit while the driver kills an executor
            marker = os.path.join(scratch, f"third-iteration-{strategy}")

            def announce(event, marker=marker):
                if event.iteration == 3 and not os.path.exists(marker):
                    open(marker, "w").close()
                    time.sleep(3.0)

            def killer():
                while not os.path.exists(marker):
                    time.sleep(0.05)
                kill_holder()

            threading.Thread(target=killer, daemon=True).start()
            theta, error, seconds = fit(strategy, announce)
        results["executor killed"][strategy] = {
            "killed executor's directory": killed[0] if killed else None,
            "seconds": seconds,
            "error": error,
            "max_difference": None if theta is None else float(np.max(np.abs(theta - clean))),
            "max_difference_from_allreduce": None
            if theta is None or cleans["allreduce"][0] is None
            else float(np.max(np.abs(theta - cleans["allreduce"][0]))),
            "executors after": len(executor_pids(app_id)),
            "blocks_left": blocks_left(scratch),
            "fell back to sync": any("fitting again with strategy 'sync'" in w for w in warnings),
        }
        deadline = time.time() + 60  # the standalone master starts a replacement executor
        while len(executor_pids(app_id)) < 2 and time.time() < deadline:
            time.sleep(0.5)
    from sparkml.data import background_release

    _, error, _ = fit("sync")  # its blocks are deleted after it returns: the stop below waits for that job
    results["stopped right after a fit"] = {"error": error, "releases in flight": background_release.pending()}
    spark.stop()
    results["blocks left after stop"] = blocks_left(scratch)
    with open(out + ".tmp", "w") as f:
        json.dump(results, f, indent=1)
    os.replace(out + ".tmp", out)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
