"""Cancelling a fit ends it: ``FitCancelled`` within seconds, nothing run again, no stage left, no blocks left.

The fits run on ``local-cluster[2,1,1024]`` (tests/support/cancel_runs.py, in the background): every strategy
cancelled mid-fit through its job group, ``allreduce`` through ``cancelAllJobs`` too, one map of a
``CrossValidator`` with ``parallelism=2`` by its job (the other map still ends with a model), and a session
stopped under a running fit. Before cancellation was told apart, a cancelled barrier stage was run again as
if a task had failed, and the fit finished. The messages Spark gives a cancelled job on each supported line
are recognised here without Spark (``sparkml.runtime.cancellation``).
"""

import json
import os
import re
import sys

import pytest
from support import background, cancel_runs
from support.helpers import SUPPORT

from sparkml.runtime.cancellation import FitCancelled, as_cancelled, cancelled_reason

_SCRATCH = {}
SECONDS = 10  # what the issue of cancellation promises: the fit ends within this


def _scratch():
    if "dir" not in _SCRATCH:
        _SCRATCH["dir"] = background.scratch_dir("cancel-")
    return _SCRATCH["dir"]


def background_runs():
    scratch = _scratch()
    return {
        "cancel runs": background.Run(
            [sys.executable, os.path.join(SUPPORT, "cancel_runs.py"), os.path.join(scratch, "out.json"), scratch],
            env=background.python_env(sys.executable),
            cwd=scratch,
            group="local-cluster",
            timeout=900,
        ),
        "ctrl-c submit": background.Run(
            [sys.executable, os.path.join(SUPPORT, "ctrl_c_submit.py"), scratch],
            env=background.python_env(sys.executable),
            group="spark-submit",
            timeout=600,
        ),
    }


@pytest.fixture(scope="module")
def outcome():
    pytest.importorskip("pyspark")  # a GPU machine without Spark runs the message tests only
    run = background.result("cancel runs", background_runs())
    assert run.returncode == 0, (run.stdout + run.stderr)[-5000:]
    with open(os.path.join(_scratch(), "out.json")) as f:
        return json.load(f)


@pytest.mark.cluster
@pytest.mark.system
@pytest.mark.parametrize("strategy,how", cancel_runs.CASES, ids=[f"{s}-{h}" for s, h in cancel_runs.CASES])
def test_a_cancelled_fit_ends_with_fit_cancelled_and_leaves_nothing(outcome, strategy, how):
    record = outcome[f"{strategy}, {how}"]
    assert record["reached third iteration"] and record["jobs running at the cancel"] >= 1, record
    assert record["error"] is not None and record["error"].startswith("FitCancelled: LogisticRegression fit cancelled")
    assert "SPARK_JOB_CANCELLED" in record["error"], record
    assert record["seconds to error"] < SECONDS, record
    assert record["seconds to no active stage"] is not None and record["seconds to no active stage"] < SECONDS
    assert record["blocks left"] == [], record


@pytest.mark.cluster
@pytest.mark.system
@pytest.mark.parametrize("strategy", cancel_runs.CTRL_C)
def test_ctrl_c_cancels_the_fits_jobs_and_raises_keyboard_interrupt(outcome, strategy):
    """pyspark's own SIGINT handler cannot cancel from inside the gateway call it interrupts (py4j refuses the
    reentrant call): the barrier stage ran on and the clean-up waited behind it."""
    record = outcome[f"{strategy}, Ctrl-C"]
    assert record["error"] == "KeyboardInterrupt: LogisticRegression fit cancelled: interrupted (Ctrl-C)", record
    assert record["seconds to error"] < SECONDS and record["seconds to no active stage"] is not None, record
    assert record["blocks left"] == [], record


@pytest.mark.system
def test_ctrl_c_on_spark_submit_of_the_train_job_exits_at_once():
    """SIGINT to the process group of ``spark-submit jobs/train.py``, as a terminal's Ctrl-C
    (tests/support/ctrl_c_submit.py), mid-fit and before any fit (where pyspark's own SIGINT handler made py4j
    print four tracebacks): exit code 130 within seconds, no traceback, nothing written, no process
    of the job left."""
    pytest.importorskip("pyspark")
    runs = background.json_results("ctrl-c submit", background_runs())
    for got in runs.values():
        assert got["reached"] and got["exit code"] == 130 and got["seconds"] < SECONDS, runs
        assert got["tracebacks"] == 0, runs
        assert not got["output written"] and got["job processes left"] == [], runs


@pytest.mark.cluster
@pytest.mark.system
def test_a_cancelled_map_of_a_cross_validator_ends_it_and_the_other_map_finishes(outcome):
    record = outcome["CrossValidator, one job"]
    assert record["error"].startswith("FitCancelled: Recorded fit of param map"), record
    assert record["seconds to error"] < SECONDS, record
    assert sorted(how for _, how in record["maps"]) == ["FitCancelled", "model"], record
    assert record["blocks left"] == [] and record["seconds to no active stage"] is not None, record


@pytest.mark.cluster
@pytest.mark.system
def test_a_stopped_session_ends_the_fit_as_cancelled(outcome):
    record = outcome["allreduce, session stopped"]
    pattern = r"FitCancelled: LogisticRegression fit cancelled: Job \d+ cancelled because SparkContext was shut down"
    assert re.fullmatch(pattern, record["error"]), record
    assert record["seconds to error"] < SECONDS, record


class _JavaError(Exception):
    """A py4j error's shape: a short Python message, the JVM's in ``java_exception``."""

    def __init__(self, java_message):
        super().__init__("An error occurred while calling o189.collectToPython.")
        self.java_exception = _Throwable(java_message)


class _Throwable:
    def __init__(self, message, cause=None):
        self.message, self.cause = message, cause

    def getMessage(self):
        return self.message

    def getCause(self):
        return self.cause


@pytest.mark.parametrize(
    "message,reason",
    [  # Spark 4.x, with its error class
        (
            "[SPARK_JOB_CANCELLED] Job 5 cancelled as part of cancellation of all jobs SQLSTATE: XXKDA",
            "[SPARK_JOB_CANCELLED] Job 5 cancelled as part of cancellation of all jobs SQLSTATE: XXKDA",
        ),
        # Spark 3.5
        ("Job 4 cancelled part of cancelled job group g", "Job 4 cancelled part of cancelled job group g"),
        ("Job 9 cancelled because SparkContext was shut down", "Job 9 cancelled because SparkContext was shut down"),
        ("Job 3 cancelled because Stage 7 was cancelled", "Job 3 cancelled because Stage 7 was cancelled"),
    ],
)
def test_spark_cancellations_are_recognised_in_the_jvm_message(message, reason):
    error = _JavaError(message)
    assert cancelled_reason(error) == reason
    cancelled = as_cancelled(error, "LinearSVC fit")
    assert isinstance(cancelled, FitCancelled) and str(cancelled) == f"LinearSVC fit cancelled: {reason}"


def test_a_spark_connect_interrupt_is_a_cancellation():
    error = RuntimeError("(org.apache.spark.SparkException) [OPERATION_CANCELED] Operation has been cancelled.")
    assert "OPERATION_CANCELED" in cancelled_reason(error)


@pytest.mark.parametrize(
    "error",
    [
        _JavaError("Job aborted due to stage failure: Task 0 in stage 3.0 failed 4 times: ExecutorLostFailure"),
        _JavaError("[INTERNAL_ERROR_STORAGE] Block rdd_31_1 does not exist."),
        ValueError("features: 3 rows hold NaN or infinite values"),
        RuntimeError("Jobs cancelled nowhere"),
    ],
)
def test_failures_are_not_cancellations(error):
    assert cancelled_reason(error) is None and as_cancelled(error, "fit") is None


def test_a_cancelled_fit_whose_clean_up_failed_is_still_cancelled():
    cancelled = FitCancelled("fit", "Job 2 cancelled because SparkContext was shut down")
    try:
        try:
            raise cancelled
        except FitCancelled:
            raise RuntimeError("An error occurred while calling o77.unpersist") from None
    except RuntimeError as clean_up:
        again = as_cancelled(clean_up, "KernelSVC fit")
    assert str(again) == "KernelSVC fit cancelled: Job 2 cancelled because SparkContext was shut down"


def test_the_jobs_drop_only_py4js_reports_of_an_interrupted_call():
    """py4j logs a call that Ctrl-C broke on the root logger with its traceback (the job reports the run in one
    line instead); every other record, py4j's other errors included, passes."""
    import logging

    from sparkml.jobs.errors import _Py4JInterrupts

    def record(path, error):
        info = None
        if error is not None:
            try:
                raise error
            except BaseException as raised:  # a record's exc_info, as logging.exception takes it
                info = (type(raised), raised, raised.__traceback__)
        return logging.LogRecord("root", logging.ERROR, path, 1, "Exception while sending command.", (), info)

    keep = _Py4JInterrupts().filter
    py4j = "/x/py4j-0.10.9.9-src.zip/py4j/java_gateway.py"
    reentrant = ConnectionError("Error while sending or receiving")
    reentrant.__context__ = RuntimeError("reentrant call inside <_io.BufferedReader name=9>")
    assert not keep(record(py4j, KeyboardInterrupt()))
    assert not keep(record(py4j, reentrant))
    assert keep(record(py4j, ConnectionError("Answer from Java side is empty")))
    assert keep(record("/x/app.py", KeyboardInterrupt())) and keep(record(py4j, None))


def test_a_cancelled_fit_is_named_by_the_innermost_fit_that_ran_it():
    """A barrier stage's ``FitCancelled("fit", ...)`` is named by the estimator's fit around it; a search around that
    fit keeps the fit's name; a cancelled job of the search's own is named by the search."""
    from sparkml.runtime.cancellation import cancellable

    reason = "Job 3 cancelled part of cancelled job group g"
    with pytest.raises(FitCancelled, match=rf"^LogisticRegression fit cancelled: {reason}$"):
        with cancellable(None, "CrossValidator fit"), cancellable(None, "LogisticRegression fit"):
            raise FitCancelled("fit", reason)
    with pytest.raises(FitCancelled, match=rf"^CrossValidator fit cancelled: {reason}$"):
        with cancellable(None, "CrossValidator fit"):
            raise RuntimeError(f"org.apache.spark.SparkException: {reason}")


def test_the_error_a_user_catches_is_sparkml_fit_cancelled():
    import sparkml

    assert sparkml.FitCancelled is FitCancelled and issubclass(FitCancelled, RuntimeError)
    with pytest.raises(AttributeError, match="no attribute 'FitCanceled'"):
        sparkml.FitCanceled
