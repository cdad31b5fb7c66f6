"""The one error the jobs report as ``config error: <key>: <problem>`` with exit code 2."""


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
