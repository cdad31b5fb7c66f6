"""Fits cancelled mid-stage on ``local-cluster[2,1,1024]`` (two executor JVMs), as a notebook's Cancel does.

    python tests/support/cancel_runs.py OUT.json SCRATCH

For each case a fit runs in a thread of its own, in a job group; at its third iteration the per-iteration
callback (in rank 0's barrier task, or on the driver with ``sync`` and ``averaging``) writes a marker file,
and the main thread then cancels, while a job of the fit is running: the job group (``cancelJobGroup``), every
job (``cancelAllJobs``) or one job by id (a ``CrossValidator`` with ``parallelism=2``: the other map of the
fold must still finish); or, the fit in the main thread, Ctrl-C (SIGINT to this driver). Last, the session
is stopped under a running fit (a killed application). Every pass over partition 1 is slowed
(``sparkml.runtime.fault_injection.straggle``), so that a fit is mid-job most of the time.

Writes, per case: the error the fit ended with (type and message), the seconds from the cancel to that error,
the seconds until Spark's status tracker showed no active stage, and the training blocks left on any
executor's disk (every executor's local directory is under SCRATCH/local).
"""

import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/, for `support`

from support.fault_runs import blocks_left, frame, session

CASES = [  # (strategy, how the fit is cancelled)
    ("allreduce", "job group"),
    ("allreduce", "all jobs"),
    ("allreduce-averaging", "job group"),
    ("ssp", "job group"),
    ("gossip", "job group"),
    ("averaging", "job group"),
    ("sync", "job group"),
]
CTRL_C = ("allreduce", "ssp", "sync")  # Ctrl-C in the driver (SIGINT to its main thread)
FIRST_ORDER = ("ssp", "gossip")


def _announce(marker):
    """The per-iteration callback: the third iteration writes ``marker`` (once)."""

    def callback(event):
        if event.iteration >= 3 and not os.path.exists(marker):
            open(marker, "w").close()

    return callback


def _estimator(strategy, marker):
    from sparkml.classification import LogisticRegression

    params = {"maxIter": 100000} if strategy in FIRST_ORDER else {"maxIter": 5000}
    est = LogisticRegression(regParam=0.01, tol=0.0, strategy=strategy, **params)
    return est._add_iteration_callback(_announce(marker))


def _await(marker, timeout=120):
    deadline = time.time() + timeout
    while not os.path.exists(marker) and time.time() < deadline:
        time.sleep(0.02)
    return os.path.exists(marker)


def _mid_job(sc, timeout=30):
    """The ids of the running jobs, once there is one (a fit between two jobs is not yet cancellable)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        ids = sc.statusTracker().getActiveJobsIds()
        if ids:
            return ids
        time.sleep(0.005)
    return []


def _idle_after(sc, timeout=30):
    """Seconds until no stage is active (None: still active after ``timeout``)."""
    start = time.time()
    while time.time() - start < timeout:
        if not sc.statusTracker().getActiveStageIds():
            return time.time() - start
        time.sleep(0.05)
    return None


def _blocks_after(scratch, timeout=30):
    """The training blocks still on the executors' disks once they are all gone, or after ``timeout``."""
    deadline = time.time() + timeout
    while blocks_left(scratch) and time.time() < deadline:
        time.sleep(0.1)
    return blocks_left(scratch)


def _run(target):
    """``target()`` in a thread of its own; (thread, outcome dict filled with the error and when it came)."""
    outcome = {}

    def body():
        try:
            outcome["result"] = target()
        except BaseException as e:
            outcome["error"] = f"{type(e).__name__}: {str(e)[:500]}"
        outcome["at"] = time.time()

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, outcome


def cancel_case(spark, df, scratch, strategy, how):
    sc = spark.sparkContext
    marker = os.path.join(scratch, f"third-{strategy}-{how.replace(' ', '-')}")
    group = f"fit-{strategy}-{how.replace(' ', '-')}"
    est = _estimator(strategy, marker)

    def fit():
        sc.setJobGroup(group, "a fit to cancel")
        return est.fit(df)

    thread, outcome = _run(fit)
    record = {"reached third iteration": _await(marker)}
    record["jobs running at the cancel"] = len(_mid_job(sc))
    cancelled_at = time.time()
    if how == "job group":
        sc.cancelJobGroup(group)
    else:
        sc.cancelAllJobs()
    thread.join(120)
    record["error"] = outcome.get("error")
    record["seconds to error"] = outcome["at"] - cancelled_at if "at" in outcome else None
    record["seconds to no active stage"] = _idle_after(sc)
    record["blocks left"] = blocks_left(scratch)  # the fit released them before it raised
    return record


def ctrl_c_case(spark, df, scratch, strategy):
    """Ctrl-C in the driver at the third iteration: SIGINT to this process while its main thread runs the fit."""
    sc = spark.sparkContext
    marker, sent = os.path.join(scratch, f"third-{strategy}-ctrl-c"), []

    def interrupt():
        if _await(marker):
            sent.append(time.time())
            os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    error = None
    try:
        _estimator(strategy, marker).fit(df)
    except KeyboardInterrupt as e:
        error = f"KeyboardInterrupt: {e}"
    except Exception as e:
        error = f"{type(e).__name__}: {str(e)[:500]}"
    return {
        "error": error,
        "seconds to error": time.time() - sent[0] if sent else None,
        "seconds to no active stage": _idle_after(sc),
        "blocks left": blocks_left(scratch),
    }


def cross_validator_case(spark, df, scratch):
    """A CrossValidator (parallelism 2, two maps on two regularization paths: fitIntercept separates them): one
    map's barrier job is cancelled by its id."""
    from pyspark.ml.evaluation import BinaryClassificationEvaluator
    from pyspark.ml.tuning import CrossValidator, ParamGridBuilder

    from sparkml.classification import LogisticRegression

    sc = spark.sparkContext
    marker = os.path.join(scratch, "third-cross-validator")
    finished, lock = [], threading.Lock()

    class Recorded(LogisticRegression):
        """Records how each map's training ended (the CrossValidator's pool threads run on after it raised)."""

        def _train(self, data, last_pass):
            try:
                model = super()._train(data, last_pass)
            except BaseException as e:
                with lock:
                    finished.append((self.getFitIntercept(), type(e).__name__))
                raise
            with lock:
                finished.append((self.getFitIntercept(), "model"))
            return model

    est = Recorded(tol=0.0, maxIter=60, strategy="allreduce")._add_iteration_callback(_announce(marker))
    grid = ParamGridBuilder().addGrid(est.fitIntercept, [True, False]).build()
    cv = CrossValidator(
        estimator=est, estimatorParamMaps=grid, evaluator=BinaryClassificationEvaluator(), numFolds=2, parallelism=2
    )
    thread, outcome = _run(lambda: cv.fit(df))
    record = {"reached third iteration": _await(marker)}
    jobs = _mid_job(sc)
    cancelled_at = time.time()
    sc._jsc.sc().cancelJob(min(jobs))  # one map's barrier stage (the other waits for its task slots)
    thread.join(120)
    record["error"] = outcome.get("error")
    record["seconds to error"] = outcome["at"] - cancelled_at if "at" in outcome else None
    deadline = time.time() + 120  # the pool's other thread goes on with its map
    while len(finished) < 2 and time.time() < deadline:
        time.sleep(0.1)
    record["maps"] = sorted(finished)
    record["blocks left"] = _blocks_after(scratch)  # released by the pool thread after its map
    record["seconds to no active stage"] = _idle_after(sc)
    return record


def stopped_session_case(spark, df, scratch):
    """The application killed under a running fit: ``SparkContext.stop`` from another thread."""
    marker = os.path.join(scratch, "third-stopped")
    thread, outcome = _run(lambda: _estimator("allreduce", marker).fit(df))
    record = {"reached third iteration": _await(marker)}
    cancelled_at = time.time()
    spark.stop()
    thread.join(120)
    record["error"] = outcome.get("error")
    record["seconds to error"] = outcome["at"] - cancelled_at if "at" in outcome else None
    return record


def main(out, scratch):
    spark, _ = session(scratch, [("spark.executorEnv.SPARKML_TEST_STRAGGLER", "1:20")])
    spark.sparkContext.setLogLevel("ERROR")
    df = frame(spark).cache()
    df.count()
    results = {}

    def timed(name, case, *args):
        began = time.time()
        results[name] = case(*args)
        results[name]["case seconds"] = round(time.time() - began, 1)  # where the run's time goes

    for strategy, how in CASES:
        timed(f"{strategy}, {how}", cancel_case, spark, df, scratch, strategy, how)
    for strategy in CTRL_C:
        timed(f"{strategy}, Ctrl-C", ctrl_c_case, spark, df, scratch, strategy)
    timed("CrossValidator, one job", cross_validator_case, spark, df, scratch)
    timed("allreduce, session stopped", stopped_session_case, spark, df, scratch)
    with open(out + ".tmp", "w") as f:
        json.dump(results, f, indent=1)
    os.replace(out + ".tmp", out)


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    main(*sys.argv[1:3])
