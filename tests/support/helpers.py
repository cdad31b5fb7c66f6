"""What several test modules check with: the repository root, the training blocks left on the
executors, a model's numbers and summary, and row-by-row comparisons of transformed DataFrames.

No pyspark import at module level: conftest.py and tests/support/connect_fits.py import this first.
"""

import os
import sys

import numpy as np

SUPPORT = os.path.dirname(os.path.abspath(__file__))  # tests/support: these modules and the run scripts
ROOT = os.path.dirname(os.path.dirname(SUPPORT))


def use_this_checkout():
    """Put the repository root first on sys.path, so that ``sparkml`` imports from this checkout; with
    ``$SPARKML_TESTS_INSTALLED`` set (``make test-compat``), leave it out: the installed package is tested."""
    if os.environ.get("SPARKML_TESTS_INSTALLED"):
        return
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)


def executor_datasets(spark):
    """Dataset directories under ``block_store.root_dir()`` as the executors' Python workers see it, once the
    releases of the fits that returned have ended (``data.background_release``)."""
    from sparkml.data import background_release

    background_release.wait()

    def listing(items):
        for _ in items:  # drain, so Spark may reuse the worker
            pass
        from sparkml.data import block_store as store

        root = store.root_dir()
        yield sorted(n for n in os.listdir(root) if not n.startswith(".")) if os.path.isdir(root) else []

    found = spark.sparkContext.parallelize(range(2), 2).mapPartitions(listing).collect()
    return {name for names in found for name in names}


def coefficient_vector(model):
    """Every number of a fitted linear or kernel model (ours or stock), flat: the coefficients, the
    intercepts, then KernelSVC's Platt coefficients where it has them."""
    if hasattr(model, "coefficientMatrix"):
        parts = [model.coefficientMatrix.toArray().ravel(), model.interceptVector.toArray()]
    else:
        parts = [model.coefficients.toArray(), [model.intercept]]
    platt = getattr(model, "plattCoefficients", None)
    if platt is not None:
        parts.append(platt.toArray().ravel())
    return np.concatenate(parts)


def training_summary(model):
    """The model's training summary (pyspark's LinearSVCModel.summary is a method, its other models'
    a property)."""
    summary = model.summary
    return summary() if callable(summary) else summary


def output_arrays(df, columns, order="id"):
    """{column: float64 array (n, k) or (n,)} of the collected output columns, rows sorted by ``order``."""
    rows = df.select(order, *columns).orderBy(order).collect()
    out = {}
    for c in columns:
        values = [r[c] for r in rows]
        out[c] = np.array([v.toArray() if hasattr(v, "toArray") else v for v in values], dtype=np.float64)
    return out


def assert_same_outputs(ours, theirs, columns, atol, order="id"):
    """The output columns of two transformed DataFrames agree within ``atol``, row by row."""
    a, b = output_arrays(ours, columns, order), output_arrays(theirs, columns, order)
    for c in columns:
        assert a[c].shape == b[c].shape, c
        np.testing.assert_allclose(a[c], b[c], rtol=0, atol=atol, err_msg=c)


def output_fields(df, columns):
    """(name, dataType) of the given output columns, in the DataFrame's order."""
    return [(f.name, f.dataType) for f in df.schema.fields if f.name in columns]


def glm_response(rng, family, eta, scale):
    """Labels drawn from ``family`` at the linear predictor ``eta`` under its canonical link: gaussian (noise of
    standard deviation ``scale``), binomial (0/1), poisson (counts)."""
    if family == "gaussian":
        return eta + rng.normal(scale=scale, size=eta.shape)
    if family == "binomial":
        return (rng.random(eta.shape) < 1 / (1 + np.exp(-eta))).astype(float)
    return rng.poisson(np.exp(eta)).astype(float)
