"""Conversions a caller lends to the fits it runs: a ``sparkml.tuning`` validator converts its dataset once for
every fold and lends each fit the blocks of its rows.

``lend(df, arguments, data)`` holds, while its block runs, that a fit of the DataFrame ``df`` (this very object:
the fold's ``train`` the validator hands to ``fitMultiple``, the dataset of the final refit) converted with
``arguments`` (``TorchEstimator._conversion``) trains on ``data`` instead of converting. The lender owns the
blocks: a fit that borrows them never releases them (nor lets its last pass delete them), and the lender
releases them after its block. A fit converted otherwise (another map's dtype or strategy, the ``sync`` fallback
of ``strategy="auto"``) converts as it always does.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

_LOCK = threading.Lock()
_LENT: list[tuple[Any, dict, Any]] = []  # (df, arguments, TrainingData)


@contextlib.contextmanager
def lend(df, arguments: dict, data) -> Iterator[None]:
    """Fits of ``df`` converted with ``arguments`` train on ``data`` while the block runs."""
    entry = (df, dict(arguments), data)
    with _LOCK:
        _LENT.append(entry)
    try:
        yield
    finally:
        with _LOCK:
            _LENT.remove(entry)


def borrowed(df, arguments: dict):
    """The ``TrainingData`` lent for a fit of ``df`` converted with ``arguments``, or None."""
    with _LOCK:
        for lent_df, lent_arguments, data in reversed(_LENT):
            if lent_df is df and lent_arguments == arguments:
                return data
    return None
