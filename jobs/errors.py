"""The one error the jobs report as ``config error: <key>: <problem>`` with exit code 2, how they report a
cancelled run (exit code 130), and their console entry points."""

import logging
import sys


class ConfigError(ValueError):
    """A bad config value; `str()` is ``<dotted key>: <problem>``, one line (control characters escaped)."""

    def __init__(self, key, problem):
        super().__init__(_one_line(f"{key}: {problem}"))
        self.key = key


def _one_line(text):
    """`text` with line breaks and other unprintable characters written as escapes (``\\n``, ``\\x00``)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


CANCELLED = 130  # the exit code of a process ended by SIGINT (128 + 2), as shells report Ctrl-C


def report_cancelled(job, error):
    """Report a run that was cancelled (Ctrl-C; a fit's job cancelled, its session stopped) in one line on
    stderr; the exit code, ``CANCELLED``. The run's staged outputs were removed on the way out."""
    why = str(error).removeprefix("run cancelled: ") or "interrupted (Ctrl-C)"  # the run's own KeyboardInterrupt
    print(_one_line(f"{job}: cancelled: {why}"), file=sys.stderr)
    return CANCELLED


class _Py4JInterrupts(logging.Filter):
    """Drops py4j's report of a call that Ctrl-C interrupted: py4j logs it on the root logger with its traceback,
    where the job reports the cancelled run in one line. Two kinds: the call the KeyboardInterrupt broke
    (``KeyboardInterrupt while sending command``), and the call pyspark's own SIGINT handler makes on the connection
    the interrupted call still holds (a ``RuntimeError: reentrant call``), before the job's handler is in place."""

    def filter(self, record):
        if "py4j" not in record.pathname or record.exc_info is None:
            return True
        error, seen = record.exc_info[1], set()
        while error is not None and id(error) not in seen:
            seen.add(id(error))
            if isinstance(error, KeyboardInterrupt) or "reentrant call" in str(error):
                return False
            error = error.__cause__ or error.__context__
        return True


_FILTER = _Py4JInterrupts()


def quiet_py4j_interrupts():
    """Install ``_Py4JInterrupts`` on the root logger (once): a job's Ctrl-C is one line, not py4j's tracebacks."""
    root = logging.getLogger()
    if _FILTER not in root.filters:
        root.addFilter(_FILTER)


def entry_point(main):
    """The console entry point of a job's ``main`` (which returns the exit code): a failure raises
    ``SystemExit(code)``, a success returns None. A console script exits with ``sys.exit(entry())``, so both
    give the process its code; a Databricks Python wheel task calls the entry point in its own process and
    ignores what it returns, so only an exception fails the task, and an exit on success would end its driver's
    Python early."""

    def entry():
        quiet_py4j_interrupts()
        code = main()
        if code:
            raise SystemExit(code)

    entry.__doc__ = f"``{main.__module__}.main`` as a console entry point (``sparkml.jobs.errors.entry_point``)."
    return entry
