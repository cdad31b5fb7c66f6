"""Deleting a finished fit's blocks without making the fit wait for it.

A fit's last Spark job deletes its training blocks on the executors (``TrainingData.release``): one job over the
cached handles, 20 to 50 ms on a small fit, of which the model needs nothing. When a fit has succeeded that job runs
in a thread of its own, so ``fit`` returns its model as soon as the optimizer is done; a fit that fails still
releases before it raises (nothing is left behind when the error reaches the caller). Spark Connect sessions release
in the fit's thread.

``wait`` blocks until the releases started so far have ended. ``SparkContext.stop`` (``spark.stop()``) of a context
that released in the background and the interpreter's exit (the JVM is still up then) wait for them, so a script
that stops or ends right after its last fit leaves nothing behind and Spark does not shut down under a running job;
an application stopped otherwise (killed, or its JVM stopped directly) deletes its directories itself, and its
release ends quietly.
"""

import atexit
import logging
import threading

from sparkml.runtime.session_kind import is_stopped

logger = logging.getLogger("sparkml")

_LOCK = threading.Lock()
_PENDING: set[threading.Thread] = set()
_AT_EXIT = False
STOP_WAIT_S = 60.0  # the longest ``SparkContext.stop`` waits for each release (a release job takes milliseconds)


def release_after_fit(data):
    """Release ``data`` (a ``TrainingData`` a successful fit is done with) in a background thread; in this thread
    where its release runs no Spark job (nothing stored, the tasks dropped the blocks) or the session is Spark
    Connect."""
    if data.connect or not data.stored or data.dropped_by_tasks or data.released:
        data.release()
        return
    global _AT_EXIT
    thread = threading.Thread(target=_release, args=(data,), name=f"sparkml-release-{data.dataset_id}", daemon=True)
    with _LOCK:
        _PENDING.add(thread)
        if not _AT_EXIT:  # registered after pyspark's own exit hook (which stops the JVM), so it runs before it
            atexit.register(wait)
            _AT_EXIT = True
        _wait_in_stop(data.sc)
    thread.start()


def _wait_in_stop(sc):
    """Make this ``SparkContext`` object's ``stop`` wait for the releases in flight first (an attribute of the
    object, not of the class: other contexts are left as they are)."""
    if getattr(sc, "_sparkml_stop_waits", False):
        return
    original = sc.stop

    def stop():
        wait(STOP_WAIT_S)
        original()

    stop.__doc__ = original.__doc__
    sc.stop, sc._sparkml_stop_waits = stop, True


def _release(data):
    try:
        data.release()
    except Exception as e:  # nothing to say for a stopped session: its end deletes the executors' directories
        if not is_stopped(data.spark):
            logger.warning("deleting the training blocks of dataset %s failed: %s", data.dataset_id, e)
    finally:
        with _LOCK:
            _PENDING.discard(threading.current_thread())


def wait(timeout=None):
    """Block until the releases started so far have ended (each given at most ``timeout`` seconds)."""
    with _LOCK:
        threads = list(_PENDING)
    for thread in threads:
        thread.join(timeout)


def pending():
    """How many releases are still running."""
    with _LOCK:
        return len(_PENDING)
