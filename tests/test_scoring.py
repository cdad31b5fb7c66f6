"""The scoring package: a model kind and an output column added in ``sparkml.scoring.kinds`` alone score through
the DataFrame path and serving (a toy Poisson regression, checked against its closed form); k models stacked in
one matrix product score as each alone; a model builds its ``ScoringSpec`` once per set of Param values."""

import pickle

import numpy as np
import pandas as pd
import pytest

from sparkml import serving
from sparkml.scoring import kinds
from sparkml.scoring.batch import score_rows
from sparkml.scoring.kinds import KINDS
from sparkml.scoring.spec import Kind, Output, ScoringSpec
from sparkml.scoring.stack import ModelStack, score_models

BETA, B = np.array([0.3, -0.2, 0.05]), 0.1


@pytest.fixture
def poisson(monkeypatch):
    """A toy Poisson regression (log link): a ``link`` output eta = x . beta + b (a new column, ``linkPrediction``)
    and ``prediction`` exp(eta), registered where every kind and output is, for this test only."""
    import torch

    def score(margins, spec):  # defined here, so that Spark pickles it by value into the workers
        eta = margins[:, 0]
        return {"link": eta, "pred": torch.exp(eta)}

    monkeypatch.setitem(kinds.OUTPUTS, "link", Output("link", "linkPrediction", "linkPredictionCol", vector=False))
    monkeypatch.setitem(kinds.KINDS, "poisson", Kind("poisson", ("link", "pred"), score))
    return ScoringSpec(KINDS["poisson"], BETA, [B])


def _rows(n=40, seed=0):
    return np.random.default_rng(seed).normal(size=(n, 3))


def test_a_kind_and_an_output_added_in_one_place_score_through_the_dataframe_path(spark, poisson):
    from pyspark.ml.linalg import Vectors, VectorUDT
    from pyspark.sql.types import LongType, StructField, StructType

    from sparkml.scoring.dataframe import score_dataframe

    x = _rows()
    schema = StructType([StructField("id", LongType()), StructField("features", VectorUDT())])
    df = spark.createDataFrame([(i, Vectors.dense(r)) for i, r in enumerate(x)], schema)
    out = score_dataframe(df, "features", {"link": "linkPrediction", "pred": "prediction"}, poisson)
    assert out.columns == ["id", "features", "linkPrediction", "prediction"]
    assert dict(out.dtypes)["linkPrediction"] == "double" and dict(out.dtypes)["prediction"] == "double"
    rows = out.orderBy("id").collect()
    eta = x @ BETA + B
    np.testing.assert_allclose([r.linkPrediction for r in rows], eta, rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose([r.prediction for r in rows], np.exp(eta), rtol=1e-14)
    # an empty name skips the output, as in MLlib
    assert score_dataframe(df, "features", {"link": "", "pred": "p"}, poisson).columns == ["id", "features", "p"]


def test_a_kind_and_an_output_added_in_one_place_score_through_serving(poisson):
    x = _rows(seed=1)
    scorer = serving.Scorer("PoissonRegressionModel", poisson)
    assert scorer.outputs == ("linkPrediction", "prediction") and scorer.n_features == 3
    got = scorer.score(x)
    eta = x @ BETA + B
    np.testing.assert_allclose(got["linkPrediction"], eta, rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(got["prediction"], np.exp(eta), rtol=1e-14)
    frame = serving.PandasModel(scorer).predict(pd.DataFrame({"features": list(x)}, index=range(5, 45)))
    assert list(frame.columns) == ["linkPrediction", "prediction"] and list(frame.index) == list(range(5, 45))
    np.testing.assert_array_equal(frame["prediction"].to_numpy(), got["prediction"])


def _grid(rng, d, integral):
    """A param grid's worth of fitted models of every built-in linear kind (integral: dyadic values whose
    products and sums are exact in float64, whatever order BLAS adds them in)."""

    def values(*shape):
        return rng.integers(-8, 9, size=shape) / 4 if integral else rng.normal(size=shape)

    return [
        ScoringSpec(KINDS["logistic"], values(1, d), values(1), raw_threshold=0.25),
        ScoringSpec(KINDS["logistic"], values(3, d), values(3), num_classes=3),
        ScoringSpec(KINDS["logistic"], values(3, d), values(3), thresholds=[0.5, 0.2, 0.3], num_classes=3),
        ScoringSpec(KINDS["svc"], values(1, d), values(1), raw_threshold=-0.5, num_classes=2),
        ScoringSpec(KINDS["regression"], values(1, d), values(1)),
        ScoringSpec(KINDS["logistic"], values(1, d), values(1)),
    ]


def test_k_models_in_one_product_score_exactly_as_each_alone_where_the_arithmetic_is_exact():
    rng = np.random.default_rng(3)
    x = rng.integers(-4, 5, size=(500, 7)).astype(np.float64)
    specs = _grid(rng, 7, integral=True)
    together = score_models(x, specs)
    for spec, got in zip(specs, together):
        alone = score_rows(x, spec)
        assert list(got) == list(alone) == list(spec.outputs)
        for key in alone:
            np.testing.assert_array_equal(got[key], alone[key], err_msg=f"{spec.kind.name} {key}")


def test_k_models_in_one_product_score_as_each_alone_to_the_last_bits(monkeypatch):
    import sparkml.gpu.prediction as math

    products = []
    product = math.linear_margins
    monkeypatch.setattr(math, "linear_margins", lambda x, w, b: products.append(tuple(w.shape)) or product(x, w, b))
    rng = np.random.default_rng(4)
    x = rng.normal(size=(1000, 20))
    specs = _grid(rng, 20, integral=False)
    stack = ModelStack(tuple(specs))
    together = stack.score(x)
    assert products == [(10, 20)] and stack.bounds == ((0, 1), (1, 4), (4, 7), (7, 8), (8, 9), (9, 10))
    for spec, got in zip(specs, together):
        alone = score_rows(x, spec)
        for key in alone:
            np.testing.assert_allclose(got[key], alone[key], rtol=1e-12, atol=1e-12, err_msg=f"{spec.kind.name} {key}")
        if spec.kind.name != "regression":  # the same classes
            np.testing.assert_array_equal(got["pred"], alone["pred"])
    # the outputs asked for, of every model; a kernel model or another input size is refused
    assert [list(o) for o in stack.score(x, keys=("pred",))] == [["pred"]] * len(specs)
    with pytest.raises(ValueError, match="different sizes"):
        ModelStack((specs[0], ScoringSpec(KINDS["regression"], np.ones((1, 3)), [0.0])))


def test_the_spec_is_normalized_and_fingerprinted_once():
    spec = ScoringSpec(KINDS["svc"], [1, 2], 0.5, raw_threshold=1, platt=[0.5, -1.0])
    assert spec.coefficients.shape == (1, 2) and spec.coefficients.dtype == np.float64
    assert spec.intercepts.tolist() == [0.5] and spec.platt.shape == (1, 2) and spec.raw_threshold == 1.0
    assert spec.outputs == ("raw", "prob", "pred")  # Platt's probability
    assert ScoringSpec(KINDS["svc"], [1, 2], 0.5).outputs == ("raw", "pred")
    again = pickle.loads(pickle.dumps(spec))  # what a Spark task receives: the fingerprint travels
    assert again.fingerprint == spec.fingerprint == ScoringSpec(KINDS["svc"], [1.0, 2.0], [0.5]).fingerprint
    assert ScoringSpec(KINDS["svc"], [1.0, 2.5], [0.5]).fingerprint != spec.fingerprint
    with pytest.raises(ValueError, match="2 coefficient rows and 1 intercepts"):
        ScoringSpec(KINDS["logistic"], np.ones((2, 3)), [0.0])


def test_a_model_builds_its_spec_once_per_param_values():
    pytest.importorskip("pyspark")
    from pyspark.ml.linalg import Vectors

    from sparkml.classification import LinearSVCModel

    model = LinearSVCModel(Vectors.dense([1.0, -2.0]), 0.5)
    first = model.scoringSpec()
    assert model.scoringSpec() is first and first.raw_threshold == 0.0
    model.setThreshold(0.7)
    moved = model.scoringSpec()
    assert moved is not first and moved.raw_threshold == 0.7 and moved.fingerprint == first.fingerprint
    np.testing.assert_array_equal(score_rows(np.array([[1.0, 0.1]]), moved)["pred"], [1.0])  # 1.3 > 0.7
    np.testing.assert_array_equal(score_rows(np.array([[0.1, 0.0]]), moved)["pred"], [0.0])  # 0.6 <= 0.7


def test_margins_past_float64s_range_are_mllibs_whatever_the_matrix_product():
    """Each product x_j w_kj rounds on its own, as in MLlib's dot product: 1e308 * 2 + 1e308 * -2 is inf + -inf = NaN
    (the fused multiply-add kernels of some CPUs' BLAS give inf: on AVX-512 with MKL an 8 x 4 by 4 x 3 product
    does), inf * 0 is NaN, and finite rows keep the matrix product's value."""
    import torch

    from sparkml.gpu.prediction import linear_margins

    x = torch.zeros(8, 4, dtype=torch.float64)
    x[0, :2] = 1e308
    x[1, 0] = float("inf")
    x[2] = torch.tensor([1.0, 2.0, -1.0, 0.5])
    w = torch.tensor([[2.0, -2.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [3.0, 1.5, 0.0, 0.0]], dtype=torch.float64)
    b = torch.tensor([0.5, 0.0, -1.0], dtype=torch.float64)
    m = linear_margins(x, w, b).numpy()
    assert np.isnan(m[0, 0]) and m[0, 1] == 1e308 and m[0, 2] == np.inf
    assert np.isnan(m[1, 1]) and m[1, 0] == np.inf and m[1, 2] == np.inf
    np.testing.assert_array_equal(m[2], [2.0 - 4.0 + 0.5, 2.0, 3.0 + 3.0 - 1.0])
    np.testing.assert_array_equal(m[3:], np.tile(b.numpy(), (5, 1)))
