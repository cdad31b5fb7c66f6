"""Names the jobs turn into a path or a registry key: window ids, registered model names, aliases.

A plain name is ASCII letters, digits, ``-``, ``_`` and ``.``, starts with a letter, a digit or ``_``
and holds no ``..``: it has no separator, is not absolute, cannot climb out of a directory and is not a
hidden file (``.staging-*``). Each is checked before Spark or MLflow starts.
"""

import re

from sparkml.jobs.errors import ConfigError

_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
MAX_NAME = 200
PLAIN_RULE = "letters, digits, '-', '_' and '.', starting with a letter, a digit or '_', without '..'"


def shown(value, limit=80):
    """``repr(value)``, cut to about `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def plain_name(key, value, what="a plain name"):
    """`value` if it is a plain name (ASCII letters, digits, ``-``, ``_``, ``.``: no separator, not absolute,
    no ``..``, not hidden, at most MAX_NAME characters), else a ConfigError naming `key` and why."""
    if not isinstance(value, str) or not value:
        raise ConfigError(key, f"expected {what} ({PLAIN_RULE}), got {shown(value)}")
    if "/" in value or "\\" in value:
        why = "holds a path separator"
    elif ".." in value:
        why = "holds '..'"
    elif len(value) > MAX_NAME:
        why = f"is longer than {MAX_NAME} characters"
    elif not _PLAIN.fullmatch(value):
        bad = next((c for c in value if c not in _NAME_CHARS), None)
        why = f"starts with {value[0]!r}" if bad is None else f"holds {shown(bad)}"
    else:
        return value
    raise ConfigError(key, f"{shown(value)} {why}; expected {what}: {PLAIN_RULE}")


def alias_name(key, value):
    """A registry alias: a plain name without ``.`` (MLflow's rule), neither ``latest`` nor ``v<number>``
    (reserved by MLflow)."""
    plain_name(key, value, "an alias")
    if "." in value or value.lower() == "latest" or re.fullmatch(r"[vV][0-9]+", value):
        raise ConfigError(
            key, f"{value!r} is not an alias MLflow accepts: letters, digits, '-' and '_', not 'latest' nor 'v<number>'"
        )
    return value
