"""Walk every public attribute and method of a pyspark.ml summary class on two summaries (ours and
MLlib's) and report where they differ. Used by test_summary.py (classic) and connect_fits.py (Spark
Connect), so both sessions check the same thing."""

import math

import numpy as np

# what the optimizer reports rather than Spark: compared separately (the iterates' paths differ)
OPTIMIZER = ("objectiveHistory", "totalIterations")


def public_members(cls):
    return sorted(n for n in dir(cls) if not n.startswith("_"))


def member_value(summary, name):
    """The attribute, or the method called with its defaults (``fMeasureByLabel()``, ...); an
    exception is a value too (MLlib raises for standard errors it does not have)."""
    try:
        value = getattr(summary, name)
        return value() if callable(value) and not hasattr(value, "collect") else value
    except Exception as e:  # compared by type: both must raise alike
        return ("raises", type(e).__name__)


def _plain(value):
    """Numbers as float64 arrays, DataFrames as their collected rows, in order."""
    if hasattr(value, "collect"):
        return [tuple(_plain(v) for v in row) for row in value.collect()]
    if hasattr(value, "toArray"):
        return np.asarray(value.toArray(), dtype=np.float64)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (int, float)) for v in value):
        return np.asarray(value, dtype=np.float64)
    return value


def _same(a, b, tol):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        return a.shape == b.shape and np.allclose(a, b, rtol=tol, atol=tol)
    if isinstance(a, float) and isinstance(b, (int, float)):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=tol, abs_tol=tol)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y, tol) for x, y in zip(a, b))
    return a == b


def summary_differences(ours, theirs, cls, tol=1e-9, row_tol=1e-8):
    """{member: (ours, theirs)} for each public member of ``cls`` (optimizer's record excluded) on
    which the two summaries differ; {} when they agree. Members compared: the returned count.

    DataFrames (the predictions) are compared row for row to ``row_tol``: two fits stopped by tol 1e-12
    agree to about 1e-10 in their coefficients (rounding-level differences, e.g. of the summation order,
    can flip a line search's decision on the way), and a margin of 7 carries that to 2e-9."""
    diffs, compared = {}, 0
    for name in public_members(cls):
        if name in OPTIMIZER:
            continue
        value = member_value(ours, name)
        a, b = _plain(value), _plain(member_value(theirs, name))
        compared += 1
        if not _same(a, b, row_tol if hasattr(value, "collect") else tol):
            diffs[name] = (repr(a)[:200], repr(b)[:200])
    return diffs, compared
