"""A fit the user cancelled: told apart from a failure, so that it is never retried.

Spark ends a job early for one reason besides a failure: someone asked it to. A notebook's Cancel button
(``SparkContext.cancelJobGroup``), ``cancelAllJobs``, ``cancelJob``, a stage killed in Spark's UI, Ctrl-C in
a classic driver (pyspark's SIGINT handler calls ``cancelAllJobs``), a Spark Connect interrupt
(``interruptAll``, ``interruptTag``) and a ``SparkContext`` stopped under a running job all fail that job with
Spark's ``SPARK_JOB_CANCELLED`` error (``Job N cancelled ...``; Connect: ``OPERATION_CANCELED``). The
library retries a barrier stage whose task failed and falls back to ``sync`` when an executor was lost; a
cancelled job is neither: the fit ends at once with ``FitCancelled``, and releases its blocks on the way out.
"""

from __future__ import annotations

import contextlib
import re
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


@contextlib.contextmanager
def cancellable(what: str) -> Iterator[None]:
    """Turn a cancellation raised inside the block into one ``FitCancelled`` for ``what``; any other error
    passes through as it is."""
    try:
        yield
    except Exception as e:
        cancelled = as_cancelled(e, what)
        if cancelled is None:
            raise
        raise cancelled from None
