"""MLlib's scoring formulas in numpy, and whether a plan sends rows to Python workers.

Used by the transform tests of both session kinds (test_model_outputs.py, connect_fits.py): a linear
model's transform must equal these to 1e-12 and run in the JVM.

    margin m = x . beta + b
    LogisticRegression, binary:  rawPrediction [-m, m], probability [1 - s(m), s(m)] with s the logistic
                                 function, prediction 1 iff m > log(t / (1 - t)) (t = threshold)
    LogisticRegression, K classes: rawPrediction the K margins, probability their softmax, prediction the
                                 argmax of the margins (no thresholds set)
    LinearSVC:                   rawPrediction [-m, m], prediction 1 iff m > threshold
    LinearRegression:            prediction m
"""

import numpy as np

PYTHON_NODES = ("EvalPython", "PythonUDF", "MapInArrow", "MapInPandas", "FlatMapGroupsInPandas")


def plan_text(df):
    """The physical plan of ``df`` (either session kind)."""
    if hasattr(df, "_explain_string"):  # Spark Connect
        return df._explain_string(mode="simple")
    return df._jdf.queryExecution().executedPlan().toString()


def runs_python(df):
    """Whether any node of ``df``'s plan runs Python code on the rows."""
    text = plan_text(df)
    return any(node in text for node in PYTHON_NODES)


def expected_outputs(model, features):
    """{column: array}: MLlib's output columns of ``model`` (default thresholds) for the rows ``features``
    (n, d)."""
    x = np.asarray(features, dtype=np.float64)
    if hasattr(model, "coefficientMatrix") and model.numClasses > 2:
        margins = x @ model.coefficientMatrix.toArray().T + model.interceptVector.toArray()
        z = np.exp(margins - margins.max(axis=1, keepdims=True))
        return {
            "rawPrediction": margins,
            "probability": z / z.sum(axis=1, keepdims=True),
            "prediction": margins.argmax(axis=1).astype(np.float64),
        }
    m = x @ model.coefficients.toArray() + model.intercept
    if not hasattr(model, "numClasses"):
        return {"prediction": m}
    out = {"rawPrediction": np.stack([-m, m], axis=1)}
    if hasattr(model, "getProbabilityCol"):
        p = 1.0 / (1.0 + np.exp(-m))
        out["probability"] = np.stack([1 - p, p], axis=1)
        t = model.getThreshold()
        out["prediction"] = (m > np.log(t / (1 - t))).astype(np.float64)
    else:
        out["prediction"] = (m > model.getThreshold()).astype(np.float64)
    return out


def largest_differences(model, transformed, order="id"):
    """{column: largest absolute difference} between ``transformed`` (the model's transform, with an
    ``order`` column and the features) and ``expected_outputs``."""
    want_columns = list(expected_outputs(model, np.zeros((1, model.numFeatures))))
    rows = transformed.select(order, model.getFeaturesCol(), *want_columns).orderBy(order).collect()
    features = np.array([r[1].toArray() for r in rows])
    want = expected_outputs(model, features)
    out = {}
    for c in want_columns:
        got = np.array([r[c].toArray() if hasattr(r[c], "toArray") else r[c] for r in rows], dtype=np.float64)
        out[c] = float(np.max(np.abs(got - want[c]))) if got.shape == want[c].shape else float("inf")
    return out
