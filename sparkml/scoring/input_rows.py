"""Serving's input rows, checked: pandas columns or arrays of feature values, and offsets, as float64 arrays, with a
ValueError naming the column and the first row that is not what the model takes."""

from __future__ import annotations

import numpy as np

FEATURES = "features"


def feature_rows(rows, n_features, column=FEATURES) -> np.ndarray:
    """The (n, ``n_features``) float64 array of ``rows`` (an array, or a sequence of lists or arrays of
    numbers); ValueError naming ``column`` and the first row that is not a list of ``n_features`` numbers."""
    given = rows if isinstance(rows, np.ndarray) and rows.ndim == 2 else list(rows)
    try:
        x = _numeric(np.asarray(given) if len(given) else np.zeros((0, n_features)))
    except ValueError:  # ragged
        x = None
    if x is None or x.ndim != 2 or x.shape[1] != n_features:
        _refuse_row(given, n_features, column)
    return np.ascontiguousarray(x, dtype=np.float64)


def offset_values(values, n, column) -> np.ndarray:
    """``values`` as n float64 offsets; ValueError naming ``column`` when they are not n numbers (or hold NaN)."""
    a = _numeric(np.asarray(list(values) if not isinstance(values, np.ndarray) else values))
    if a is None or a.ndim != 1 or len(a) != n or np.isnan(a.astype(np.float64)).any():
        raise ValueError(f"offset column {column!r}: expected {n} numbers, one per row, none null or NaN")
    return a.astype(np.float64)


def _numeric(a):
    """``a`` as a numeric array, or None where it holds something else than numbers (an object array of
    numbers converts)."""
    if a.dtype.kind in "iuf":
        return a
    if a.dtype.kind == "O" and all(_is_number(v) for v in a.flat):
        return a.astype(np.float64)
    return None


def _refuse_row(rows, n_features, column):
    """ValueError naming the first of ``rows`` that is not a flat list of ``n_features`` numbers."""
    expected = f"the model takes rows of {n_features} numbers"
    for i, row in enumerate(rows):
        problem = None
        if row is None:
            problem = "is null"
        elif not isinstance(row, (list, tuple, np.ndarray)):
            problem = f"is {row!r}, not a list of numbers"
        else:
            values = np.asarray(row, dtype=object)
            if values.ndim != 1:
                problem = "is not a flat list of numbers"
            elif _numeric(values) is None:
                problem = f"holds {next(v for v in values if not _is_number(v))!r}, not a number"
            elif len(values) != n_features:
                problem = f"has {len(values)} values"
        if problem:
            raise ValueError(f"features column {column!r}: row {i} {problem}; {expected}")
    raise ValueError(f"features column {column!r}: {expected}")


def _is_number(v):
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
