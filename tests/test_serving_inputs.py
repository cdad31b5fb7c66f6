"""The rows ``sparkml.serving`` scores, through ``Scorer.score`` and the python_function flavor's ``predict``:
no rows give empty outputs of the model's columns and types; a row that is not the model's count of numbers is
one ValueError naming the ``features`` column and the row; infinite and NaN features score as ``transform``
scores them (MLlib's softmax and argmax for a multinomial LogisticRegression).

The models are built from their numbers (no fit) and saved once."""

import numpy as np
import pandas as pd
import pytest
from pyspark.ml.linalg import DenseMatrix, DenseVector, Vectors, VectorUDT
from pyspark.sql.types import LongType, StructField, StructType

from sparkml import serving
from sparkml.classification import KernelSVCModel, LinearSVCModel, LogisticRegressionModel
from sparkml.gpu.feature_maps import NystroemSpec
from sparkml.regression import LinearRegressionModel

D = 4
SCHEMA = StructType([StructField("id", LongType()), StructField("features", VectorUDT())])


def _models():
    rng = np.random.default_rng(3)
    w3 = rng.normal(size=(3, D))
    binary = LogisticRegressionModel(DenseMatrix(1, D, w3[0], True), DenseVector([0.2]), 2, False)
    multinomial = LogisticRegressionModel(DenseMatrix(3, D, w3.ravel(), True), DenseVector([0.1, -0.2, 0.1]), 3, True)
    landmarks = rng.normal(size=(5, D))
    spec = NystroemSpec("rbf", landmarks, np.linalg.qr(rng.normal(size=(5, 5)))[0], 0.5, 3, 0.0)
    platt = np.array([[-1.5, 0.1], [-1.2, 0.0], [-1.0, -0.1]])
    return {
        "lr_binary": binary.copy().setThreshold(0.4),
        "lr_binary_thresholds": binary.copy()._set(thresholds=[0.3, 0.7]),
        "lr_multinomial": multinomial,
        "lr_multinomial_thresholds": multinomial.copy()._set(thresholds=[0.2, 0.5, 0.3]),
        "svc": LinearSVCModel(DenseVector(w3[1]), -0.1),
        "linreg": LinearRegressionModel(DenseVector(w3[2]), 0.7, 1.0),
        "kernel_svc": KernelSVCModel(
            spec, rng.normal(size=(3, 5)), [0.1, 0.0, -0.1], 3, 0.5, platt, [(0, 1), (0, 2), (1, 2)]
        ),
    }


@pytest.fixture(scope="module")
def saved(spark, tmp_path_factory):
    """kind -> (the model, the directory it was saved to)."""
    root = tmp_path_factory.mktemp("serving_inputs")
    out = {}
    for kind, model in _models().items():
        model.save(str(root / kind))
        out[kind] = (model, str(root / kind))
    return out


def _transform(spark, model, rows, columns):
    frame = spark.createDataFrame([(i, Vectors.dense(r)) for i, r in enumerate(rows)], SCHEMA)
    got = model.transform(frame).orderBy("id").collect()
    return {c: np.array([r[c].toArray() if hasattr(r[c], "toArray") else r[c] for r in got]) for c in columns}


@pytest.mark.parametrize("kind", ["lr_binary", "lr_multinomial", "svc", "linreg", "kernel_svc"])
def test_no_rows_give_empty_columns_of_the_models_types(spark, saved, kind):
    model, path = saved[kind]
    scorer = serving.load(path)
    out = scorer.score(np.zeros((0, D)))
    empty = model.transform(spark.createDataFrame([], SCHEMA))
    assert empty.count() == 0 and set(out) == set(empty.columns) - {"id", "features"}
    width = 0 if kind == "linreg" else 3 if kind in ("lr_multinomial", "kernel_svc") else 2
    for name, values in out.items():
        assert values.dtype == np.float64 and values.shape == ((0,) if name == "prediction" else (0, width)), name
    for given in (pd.DataFrame({"features": []}), pd.DataFrame({"features": pd.Series([], dtype=object)}, index=[])):
        frame = serving._load_pyfunc(path).predict(given)
        assert list(frame.columns) == list(scorer.outputs) and len(frame) == 0
        assert {c: str(t) for c, t in frame.dtypes.items()} == {
            c: "float64" if c == "prediction" else "object" for c in scorer.outputs
        }
    assert scorer.score([])["prediction"].shape == (0,)


BAD_ROWS = {  # rows -> the message naming the first bad one
    "ragged": ([[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0]], "row 1 has 3 values; the model takes rows of 4 numbers"),
    "a string": ([[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, "a"]], "row 1 holds 'a', not a number"),
    "a numeric string": ([["1.0", 2.0, 3.0, 4.0]], "row 0 holds '1.0', not a number"),
    "a null row": ([[1.0, 2.0, 3.0, 4.0], None], "row 1 is null"),
    "a null value": ([[1.0, None, 3.0, 4.0]], "row 0 holds None, not a number"),
    "a scalar": ([1.0, 2.0], "row 0 is 1.0, not a list of numbers"),
    "a nested list": ([[[1.0, 2.0], [3.0, 4.0]]], "row 0 is not a flat list of numbers"),
    "a wider array": (np.zeros((2, 5)), "row 0 has 5 values; the model takes rows of 4 numbers"),
}


@pytest.mark.parametrize("name", sorted(BAD_ROWS))
def test_a_bad_row_is_one_error_naming_the_column_and_the_row(saved, name):
    rows, message = BAD_ROWS[name]
    path = saved["lr_multinomial"][1]
    expected = f"^features column 'features': {message}"
    with pytest.raises(ValueError, match=expected):
        serving.load(path).score(rows)
    with pytest.raises(ValueError, match=expected):
        serving._load_pyfunc(path).predict(pd.DataFrame({"features": list(rows)}))


def test_rows_as_arrays_lists_and_object_arrays_score_alike(saved):
    path = saved["kernel_svc"][1]
    x = np.random.default_rng(5).normal(size=(6, D))
    expected = serving.load(path).score(x)
    for rows in ([list(r) for r in x], list(x), x.astype(object), [tuple(r) for r in x]):
        got = serving._load_pyfunc(path).predict(pd.DataFrame({"features": list(rows)}, index=range(10, 16)))
        assert list(got.index) == list(range(10, 16))
        np.testing.assert_array_equal(got["prediction"], expected["prediction"])
        np.testing.assert_array_equal(np.stack(got["probability"]), expected["probability"])


INF = float("inf")
EDGE_ROWS = [
    [INF, 0.0, 0.0, 0.0],
    [-INF, 0.0, 0.0, 0.0],
    [INF, -INF, 0.0, 0.0],
    [0.0, INF, 0.0, 0.0],
    [float("nan"), 0.0, 0.0, 0.0],
    [0.0, 0.0, float("nan"), 1.0],
    [1e308, 1e308, 0.0, 0.0],
    [0.5, -1.0, 2.0, 0.25],
]


@pytest.mark.parametrize(
    "kind",
    ["lr_multinomial", "lr_multinomial_thresholds", "lr_binary", "lr_binary_thresholds", "svc", "linreg", "kernel_svc"],
)
def test_infinite_and_nan_features_score_as_transform(spark, saved, kind):
    """A multinomial LogisticRegression's transform is MLlib's: a row with a +inf margin has probability 1 at
    its first +inf margin and NaN at the other infinite ones ([nan, 1.0, nan] for [-inf, inf, -inf]); its
    prediction ignores NaN. Serving scores the same."""
    model, path = saved[kind]
    got = serving.load(path).score(EDGE_ROWS)
    expected = _transform(spark, model, EDGE_ROWS, list(got))
    for column, values in got.items():
        np.testing.assert_allclose(values, expected[column], rtol=1e-12, atol=1e-300, equal_nan=True, err_msg=column)
    if kind == "lr_multinomial":
        assert np.isnan(got["probability"]).any() and (got["probability"] == 1.0).any()
    if kind.startswith("lr_"):  # the model's single-row methods, too
        single = {
            "probability": [model.predictProbability(Vectors.dense(r)).toArray() for r in EDGE_ROWS],
            "prediction": [model.predict(Vectors.dense(r)) for r in EDGE_ROWS],
        }
        for column, values in single.items():
            np.testing.assert_allclose(
                np.array(values), expected[column], rtol=1e-12, atol=1e-300, equal_nan=True, err_msg=column
            )
