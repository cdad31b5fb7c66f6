"""The one error the jobs report as ``config error: <key>: <problem>`` with exit code 2, how they report a
cancelled run (exit code 130), and their console entry points."""

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
    why = str(error) or "interrupted (Ctrl-C)"
    print(_one_line(f"{job}: cancelled: {why}"), file=sys.stderr)
    return CANCELLED


def entry_point(main):
    """The console entry point of a job's ``main`` (which returns the exit code): a failure raises
    ``SystemExit(code)``, a success returns None. A console script exits with ``sys.exit(entry())``, so both
    give the process its code; a Databricks Python wheel task calls the entry point in its own process and
    ignores what it returns, so only an exception fails the task, and an exit on success would end its driver's
    Python early."""

    def entry():
        code = main()
        if code:
            raise SystemExit(code)

    entry.__doc__ = f"``{main.__module__}.main`` as a console entry point (``sparkml.jobs.errors.entry_point``)."
    return entry
