"""A fit the user cancelled: told apart from a failure, so that it is never retried.

Spark ends a job early for one reason besides a failure: someone asked it to. A notebook's Cancel button
(``SparkContext.cancelJobGroup``), ``cancelAllJobs``, ``cancelJob``, a stage killed in Spark's UI, Ctrl-C in
a classic driver (pyspark's SIGINT handler calls ``cancelAllJobs``), a Spark Connect interrupt
(``interruptAll``, ``interruptTag``) and a ``SparkContext`` stopped under a running job all fail that job with
Spark's ``SPARK_JOB_CANCELLED`` error (``Job N cancelled ...``; Connect: ``OPERATION_CANCELED``). The
library retries a barrier stage whose task failed and falls back to ``sync`` when an executor was lost; a
cancelled job is neither: the fit ends at once with ``FitCancelled``, and releases its blocks on the way out.

Ctrl-C (SIGINT) in the driver during a fit (``_ctrl_c_cancels``) cancels the session's running jobs and lets the
fit end on that path, then raises ``KeyboardInterrupt`` naming the fit. pyspark's own handler calls
``cancelAllJobs`` from inside the signal handler, on the gateway connection that the interrupted call still
holds: py4j refuses the reentrant call, the ``KeyboardInterrupt`` unwinds the fit while its barrier stage runs
on, and the clean-up job waits behind it.
"""

from __future__ import annotations

import contextlib
import re
import signal
import threading
from collections.abc import Iterator

# what Spark's messages say when a job was cancelled (3.5: "Job 4 cancelled part of cancelled job group g";
# 4.x: "[SPARK_JOB_CANCELLED] Job 4 cancelled as part of cancellation of all jobs"), or the context stopped
_CANCELLED = re.compile(
    r"SPARK_JOB_CANCELLED|OPERATION_CANCELED|\bJob \d+ cancelled\b|SparkContext was shut down"
    r"|Cannot call methods on a stopped SparkContext|SparkContext has been shutdown"
)


class FitCancelled(RuntimeError):
    """The fit was cancelled (a cancelled job group, ``cancelAllJobs``, a killed stage, Ctrl-C, a Spark Connect
    interrupt, the session stopped): not a failure of the data or the model, and never retried. ``reason``:
    Spark's words on the cancellation."""

    named = False  # True once a ``cancellable`` block named the fit it ran (``_named``)

    def __init__(self, what: str, reason: str):
        super().__init__(f"{what} cancelled: {reason}")
        self.reason = reason


def _texts(error):
    """The messages of ``error`` and its causes, a JVM exception's (py4j) root message included."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield str(error)
        java = getattr(error, "java_exception", None)
        if java is not None:
            try:
                while java is not None:
                    yield str(java.getMessage() or "")
                    java = java.getCause()
            except Exception:  # the JVM is gone: the Python text above is all there is
                pass
        error = error.__cause__ or error.__context__


def cancelled_reason(error: BaseException) -> str | None:
    """Spark's words on why the job was cancelled (``Job 4 cancelled part of cancelled job group g``), when
    ``error`` (or one of its causes) is a cancellation; None for any other error."""
    chain: BaseException | None = error
    while chain is not None:  # a cancelled fit whose clean-up failed on the stopped session after it
        if isinstance(chain, FitCancelled):
            return chain.reason
        chain = chain.__cause__ or chain.__context__
    for text in _texts(error):
        match = _CANCELLED.search(text)
        if match:
            line = next((ln for ln in text.splitlines() if match.group(0) in ln), match.group(0))
            return re.sub(r"^.*?(SparkException|Exception):\s*", "", line).strip()[:300]
    return None


def as_cancelled(error: BaseException, what: str) -> FitCancelled | None:
    """``FitCancelled`` for ``what`` (e.g. ``"LogisticRegression fit"``) when ``error`` is a cancellation,
    else None."""
    reason = cancelled_reason(error)
    return None if reason is None else FitCancelled(what, reason)


_INTERRUPTED = threading.Event()  # Ctrl-C during a fit of this driver (``_ctrl_c_cancels``)
_DEPTH = [0]  # the _ctrl_c_cancels blocks open on the main thread (a fit inside a fit shares the outer one's)


def check_interrupted() -> None:
    """``FitCancelled`` once Ctrl-C asked the running fit to stop: called by the driver-side loops before each job
    they start (a Ctrl-C between two jobs finds none running to cancel)."""
    if _INTERRUPTED.is_set():
        raise FitCancelled("fit", "interrupted (Ctrl-C)")


def _cancel_all(spark):
    """Cancel the session's running jobs, as pyspark's SIGINT handler means to (a Spark Connect session: interrupt
    its operations)."""
    from sparkml.runtime.session_kind import is_connect

    try:
        if is_connect(spark):
            spark.interruptAll()
        else:
            spark.sparkContext.cancelAllJobs()
    except Exception:  # the session is gone already: nothing runs
        pass


@contextlib.contextmanager
def _ctrl_c_cancels(spark, what: str) -> Iterator[None]:
    """Ctrl-C in the block (``what``: the fit) cancels ``spark``'s running jobs, from a thread of its own, and
    stops the driver-side loops before their next job (``check_interrupted``), so that the fit ends on its
    cancellation path (its blocks released, nothing run again); then ``KeyboardInterrupt("<what> cancelled:
    interrupted (Ctrl-C)")`` is raised. A second Ctrl-C interrupts at once, wherever the fit stands. Only the
    main thread receives signals: elsewhere (a fit in a thread) the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    _DEPTH[0] += 1

    def handler(signum, frame):
        if _INTERRUPTED.is_set():
            raise KeyboardInterrupt(f"{what} cancelled: interrupted (Ctrl-C)")
        _INTERRUPTED.set()
        threading.Thread(target=_cancel_all, args=(spark,), daemon=True).start()

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    except Exception as e:
        if _INTERRUPTED.is_set():
            raise KeyboardInterrupt(f"{what} cancelled: interrupted (Ctrl-C)") from e
        raise
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)
        interrupted = _INTERRUPTED.is_set()
        _DEPTH[0] -= 1
        if _DEPTH[0] == 0:  # the next fit starts uninterrupted
            _INTERRUPTED.clear()
    if interrupted:  # the fit ended before the cancel reached it: the user still asked to stop
        raise KeyboardInterrupt(f"{what} cancelled: interrupted (Ctrl-C)")


def ctrl_c_cancels(spark, what: str = "run"):
    """A whole run (a batch job's) under Ctrl-C's handling of a fit (``_ctrl_c_cancels``): pyspark's own SIGINT
    handler calls ``cancelAllJobs`` from inside the signal handler, on the gateway connection the interrupted
    call still holds, and py4j prints a traceback for each refused call; here the jobs are cancelled from a
    thread of their own and the run ends with ``KeyboardInterrupt("run cancelled: interrupted (Ctrl-C)")``."""
    return _ctrl_c_cancels(spark, what)


@contextlib.contextmanager
def cancellable(spark, what: str) -> Iterator[None]:
    """The block (``what``: the fit, e.g. ``"LinearSVC fit"``) ends with one ``FitCancelled`` for ``what`` when a
    job of it was cancelled, and on Ctrl-C cancels ``spark``'s jobs and ends with ``KeyboardInterrupt``
    (``_ctrl_c_cancels``); any other error passes through as it is."""
    with _ctrl_c_cancels(spark, what):
        try:
            yield
        except FitCancelled as e:
            if e.named:
                raise  # a fit inside this one (a search's) ended cancelled: its name says more
            raise _named(FitCancelled(what, e.reason)) from None
        except Exception as e:
            cancelled = as_cancelled(e, what)
            if cancelled is None:
                raise
            raise _named(cancelled) from None


def _named(cancelled: FitCancelled) -> FitCancelled:
    """``cancelled``, marked as naming the fit a ``cancellable`` block ran (an enclosing block keeps it)."""
    cancelled.named = True
    return cancelled
