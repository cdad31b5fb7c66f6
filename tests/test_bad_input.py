"""Bad input is refused before any iteration, with a ValueError naming the column and the problem,
and the executor-resident training blocks of the failed fit are gone afterwards (DESIGN.md section 7)."""

import logging

import numpy as np
import pytest
from pyspark.ml.linalg import DenseMatrix, Vectors, VectorUDT
from pyspark.ml.regression import LinearRegression as StockLinearRegression
from pyspark.sql.types import StringType
from support.data_helpers import SMALL_ROWS, rows_frame, small_rows
from support.helpers import executor_datasets

from sparkml.classification import LinearSVC, LogisticRegression
from sparkml.data import block_store
from sparkml.regression import LinearRegression

pytestmark = pytest.mark.usefixtures("conversions_not_kept")  # counts conversions or blocks

ESTIMATORS = {"LogisticRegression": LogisticRegression, "LinearSVC": LinearSVC, "LinearRegression": LinearRegression}
CLASSIFIERS = ("LogisticRegression", "LinearSVC")
# data_helpers.small_rows: SMALL_ROWS rows, two partitions of 20 in rows_frame; the bad rows go into partition 0 only


@pytest.fixture(scope="module")
def baseline(spark):
    return executor_datasets(spark)


@pytest.fixture
def created_ids(monkeypatch):
    """Records every dataset id a fit asks the block store for."""
    ids = []
    original = block_store.new_dataset_id

    def record():
        ids.append(original())
        return ids[-1]

    monkeypatch.setattr(block_store, "new_dataset_id", record)
    return ids


def assert_refused(spark, caplog, created_ids, estimator, df, *fragments):
    """fit raises ValueError containing every fragment; no iteration ran; no block directory is left."""
    with caplog.at_level(logging.INFO, logger="sparkml"):
        with pytest.raises(ValueError) as info:
            estimator.fit(df)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    iterations = [
        r.getMessage() for r in caplog.records if r.name.startswith("sparkml") and "iteration" in r.getMessage()
    ]
    assert not iterations, f"iterations ran before the error: {iterations}"
    if created_ids:
        left = executor_datasets(spark) & set(created_ids)
        assert not left, f"training blocks left behind: {left}"
    return message


def replace(rows, index, features=..., label=..., weight=...):
    x, y, w = rows[index]
    rows[index] = (x if features is ... else features, y if label is ... else label, w if weight is ... else weight)
    return rows


# ---- problems every estimator must refuse -------------------------------------------------------------


def _nan_features(rows):
    return replace(rows, 3, features=[1.0, float("nan"), 0.0])


def _inf_features(rows):
    return replace(rows, 3, features=[float("inf"), 0.0, 0.0])


def _neg_inf_features(rows):
    return replace(rows, 3, features=[0.0, 0.0, float("-inf")])


def _float32_overflow_features(rows):  # finite, but infinite in the default dtype float32
    return replace(rows, 3, features=[0.0, 1e39, 0.0])


def _null_features(rows):
    return replace(rows, 3, features=None)


def _null_label(rows):
    return replace(rows, 3, label=None)


def _nan_label(rows):
    return replace(rows, 3, label=float("nan"))


def _ragged_in_partition(rows):
    return replace(rows, 3, features=[1.0, 2.0])


def _ragged_across_partitions(rows):  # every partition is consistent on its own
    return [(x + [0.5], y, w) if i >= SMALL_ROWS // 2 else (x, y, w) for i, (x, y, w) in enumerate(rows)]


def _negative_weight(rows):
    return replace(rows, 3, weight=-1.0)


GENERIC_CASES = {
    "nan_features": (_nan_features, {}, ("'features'", "NaN")),
    "inf_features": (_inf_features, {}, ("'features'", "infinite")),
    "neg_inf_features": (_neg_inf_features, {}, ("'features'", "infinite")),
    "float32_overflow_features": (
        _float32_overflow_features,
        {},
        ("'features'", "beyond +-3.4e38 is infinite", "set dtype='float64'"),
    ),
    "null_features": (_null_features, {}, ("'features'", "null")),
    "null_label": (_null_label, {}, ("'label'", "null")),
    "nan_label": (_nan_label, {}, ("'label'", "NaN")),
    "ragged_in_partition": (_ragged_in_partition, {}, ("'features'", "different sizes")),
    "ragged_across_partitions": (_ragged_across_partitions, {}, ("'features'", "different sizes")),
    "negative_weight": (_negative_weight, {"weightCol": "w"}, ("'w'", "negative")),
}


def _generic_params():
    """Every (estimator, case); ``make test`` runs each case with one estimator, in rotation (every estimator
    meets several cases), ``make test-full`` all of them: test_fuzz_conversion.py also generates these
    problems for every model."""
    names = sorted(ESTIMATORS)
    return [
        pytest.param(name, case, id=f"{name}-{case}", marks=() if j == i % len(names) else (pytest.mark.full,))
        for i, case in enumerate(sorted(GENERIC_CASES))
        for j, name in enumerate(names)
    ]


@pytest.mark.parametrize("name, case", _generic_params())
def test_generic_bad_values(spark, caplog, created_ids, baseline, name, case):
    mutate, params, fragments = GENERIC_CASES[case]
    df = rows_frame(spark, mutate(small_rows()))
    assert_refused(spark, caplog, created_ids, ESTIMATORS[name](**params), df, *fragments)
    assert created_ids, "the check should run in the conversion pass"


SPARSE_CASES = {
    "nan_features": (Vectors.sparse(11, {9: float("nan")}), "NaN"),
    "inf_features": (Vectors.sparse(11, {2: float("inf")}), "infinite"),
    "null_features": (None, "null"),
    "ragged_in_partition": (Vectors.sparse(7, {1: 1.0}), "different sizes"),
}


@pytest.mark.parametrize("case", sorted(SPARSE_CASES))
def test_sparse_features_bad_values(spark, caplog, created_ids, baseline, case):
    bad, problem = SPARSE_CASES[case]
    rows = [([0.0] * 8 + x, y, w) for x, y, w in small_rows()]  # 11 features, at most 3 non-zero: CSR path
    df = rows_frame(spark, replace(rows, 3, features=bad), "sparse")
    assert_refused(spark, caplog, created_ids, LogisticRegression(), df, "'features'", problem)


def test_a_fit_that_overflows_returns_no_model(spark, caplog, created_ids):
    """Features of 1e200 in dtype float64: finite, but their squares are not, and the normal equations end in
    non-finite coefficients (pyspark.ml's LinearRegression returns that model, whose every prediction is NaN); here
    a ValueError naming the Params set, and no model, from ``fit`` and from each map of ``fitMultiple``."""
    rows = [([1e200 * (i % 7 + 1), float(i), 1.0], float(i % 2), 1.0) for i in range(SMALL_ROWS)]
    df = rows_frame(spark, rows)
    stock = StockLinearRegression().fit(df)
    assert not np.all(np.isfinite(np.append(stock.coefficients.toArray(), stock.intercept)))
    with pytest.raises(
        ValueError, match=r"LinearRegression: the fit ended with non-finite coefficients.*dtype='float64'"
    ):
        LinearRegression(dtype="float64").fit(df)
    estimator = LinearRegression(dtype="float64")  # fitMultiple (a search's grid): each map's own error
    maps = [{estimator.regParam: 0.0}, {estimator.regParam: 0.5, estimator.elasticNetParam: 0.0}]
    models = estimator.fitMultiple(df, maps)
    for _ in maps:
        with pytest.raises(ValueError, match=r"non-finite coefficients.*dtype='float64'.*regParam=0\.[05]"):
            next(models)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_empty_dataset(spark, caplog, created_ids, baseline, name):
    no_rows = rows_frame(spark, [])
    assert_refused(spark, caplog, created_ids, ESTIMATORS[name](), no_rows, "empty")
    filtered = rows_frame(spark, small_rows()).where("label > 100")  # partitions exist, rows do not
    assert_refused(spark, caplog, created_ids, ESTIMATORS[name](), filtered, "empty")


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
@pytest.mark.parametrize(
    "role,params,missing",
    [
        ("features", {"featuresCol": "feats"}, "'feats'"),
        ("label", {"labelCol": "target"}, "'target'"),
        ("weight", {"weightCol": "weight"}, "'weight'"),
    ],
)
def test_missing_column(spark, caplog, created_ids, baseline, name, role, params, missing):
    df = rows_frame(spark, small_rows())
    message = assert_refused(spark, caplog, created_ids, ESTIMATORS[name](**params), df, missing, role)
    assert "not in the DataFrame" in message


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_features_not_a_vector(spark, caplog, created_ids, baseline, name):
    arrays = rows_frame(spark, small_rows(), features_type="array")
    assert_refused(spark, caplog, created_ids, ESTIMATORS[name](), arrays, "'features'", "Vector")
    doubles = rows_frame(spark, small_rows()).selectExpr("label AS features", "label", "w")
    assert_refused(spark, caplog, created_ids, ESTIMATORS[name](), doubles, "'features'", "Vector")


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_string_label_column(spark, caplog, created_ids, baseline, name):
    rows = [(x, "yes" if y else "no", w) for x, y, w in small_rows()]
    df = rows_frame(spark, rows, label_type=StringType())
    assert_refused(spark, caplog, created_ids, ESTIMATORS[name](), df, "'label'", "numeric")


# ---- label problems of the classifiers --------------------------------------------------------------


@pytest.mark.parametrize("name", CLASSIFIERS)
@pytest.mark.parametrize("label", [0.0, 1.0])
def test_single_class(spark, caplog, created_ids, baseline, name, label):
    df = rows_frame(spark, [(x, label, w) for x, _, w in small_rows()])
    assert_refused(spark, caplog, created_ids, ESTIMATORS[name](), df, "'label'", "single class")


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_single_class_with_positive_weight(spark, caplog, created_ids, baseline, name):
    df = rows_frame(spark, [(x, y, 0.0 if y == 1 else 1.0) for x, y, _ in small_rows()])
    assert_refused(spark, caplog, created_ids, ESTIMATORS[name](weightCol="w"), df, "'label'", "single class")


@pytest.mark.parametrize("label,problem", [(0.5, "non-integer"), (-1.0, "negative")])
def test_logistic_labels_not_class_indices(spark, caplog, created_ids, baseline, label, problem):
    df = rows_frame(spark, replace(small_rows(), 25, label=label))
    assert_refused(spark, caplog, created_ids, LogisticRegression(), df, "'label'", problem)


def test_logistic_binomial_labels_outside_0_1(spark, caplog, created_ids, baseline):
    df = rows_frame(spark, replace(small_rows(), 25, label=2.0))
    assert_refused(spark, caplog, created_ids, LogisticRegression(family="binomial"), df, "'label'", "binomial")


@pytest.mark.parametrize("label", [2.0, -1.0, 0.5])
def test_linear_svc_labels_outside_0_1(spark, caplog, created_ids, baseline, label):
    df = rows_frame(spark, replace(small_rows(), 25, label=label))
    assert_refused(spark, caplog, created_ids, LinearSVC(), df, "'label'", "0 or 1")


@pytest.mark.parametrize("delay", [0.0, 3.0])
def test_failed_conversion_job_leaves_no_blocks(spark, created_ids, baseline, delay):
    """A DataFrame whose computation fails in one partition while the other converts: Spark's error
    comes through unmasked and the converted partition's blocks are deleted. delay 0: the job
    aborts while the healthy partition still converts (its task is killed, or commits late); 3 s:
    after it has written its blocks."""
    from pyspark.sql import functions as F

    def poison(features, weight):
        if weight == 7.0:
            import time

            time.sleep(delay)
            raise RuntimeError("poisoned row")
        return features

    rows = replace(small_rows(), SMALL_ROWS - 3, weight=7.0)  # partition 1; partition 0 converts fine
    df = rows_frame(spark, rows).withColumn("features", F.udf(poison, VectorUDT())("features", "w"))
    with pytest.raises(Exception, match="poisoned row"):
        LinearRegression().fit(df)
    assert created_ids
    assert not executor_datasets(spark) & set(created_ids)


def test_no_block_directory_survives_the_module(spark, baseline):
    # runs last in this module: every failed fit above cleaned up after itself
    assert executor_datasets(spark) - baseline == set()


# ---- bad Params ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,params,param",
    [
        ("LogisticRegression", {"elasticNetParam": 2.0}, "elasticNetParam"),
        ("LinearRegression", {"elasticNetParam": 2.0}, "elasticNetParam"),
        ("LogisticRegression", {"elasticNetParam": -0.5}, "elasticNetParam"),
        ("LogisticRegression", {"maxIter": -1}, "maxIter"),
        ("LinearSVC", {"maxIter": -1}, "maxIter"),
        ("LinearRegression", {"maxIter": -1}, "maxIter"),
        ("LogisticRegression", {"regParam": -0.1}, "regParam"),
        ("LinearSVC", {"regParam": -0.1}, "regParam"),
        ("LinearSVC", {"tol": -1.0}, "tol"),
        ("LinearRegression", {"aggregationDepth": 1}, "aggregationDepth"),
    ],
)
def test_bad_param_values_refused_before_the_data_is_touched(spark, caplog, created_ids, name, params, param):
    df = rows_frame(spark, small_rows())
    message = assert_refused(spark, caplog, created_ids, ESTIMATORS[name](**params), df, param)
    assert str(list(params.values())[0]).lstrip("-") in message
    assert created_ids == [], "the Params must be checked before the conversion pass"


@pytest.mark.parametrize(
    "name,params,fragments",
    [
        # MLlib: "Fitting under bound constrained optimization only supports L2 regularization"
        (
            "LogisticRegression",
            {"elasticNetParam": 0.5, "upperBoundsOnCoefficients": DenseMatrix(1, 3, [1.0] * 3)},
            ("elasticNetParam", "upperBoundsOnCoefficients", "only supports L2 regularization", "0.5"),
        ),
        (
            "LogisticRegression",
            {"elasticNetParam": 1.0, "regParam": 0.0, "lowerBoundsOnIntercepts": Vectors.dense([0.0])},
            ("elasticNetParam", "lowerBoundsOnIntercepts", "only supports L2 regularization"),
        ),
        # MLlib: "Please don't set bounds on intercepts if fitting without intercept."
        (
            "LogisticRegression",
            {"fitIntercept": False, "upperBoundsOnIntercepts": Vectors.dense([1.0])},
            ("upperBoundsOnIntercepts", "fitIntercept"),
        ),
        # MLlib: huber "only supports L2 regularization", "doesn't support normal solver", epsilon > 1.0
        ("LinearRegression", {"loss": "huber", "elasticNetParam": 0.3}, ("elasticNetParam", "huber", "L2", "0.3")),
        ("LinearRegression", {"loss": "huber", "solver": "normal"}, ("solver='normal'", "huber")),
        ("LinearRegression", {"loss": "huber", "epsilon": 1.0}, ("epsilon", "> 1.0", "1.0")),
        ("LinearRegression", {"loss": "absolute"}, ("loss", "squaredError, huber", "absolute")),
    ],
)
def test_mllib_param_rules_refused_before_the_data_is_touched(spark, caplog, created_ids, name, params, fragments):
    df = rows_frame(spark, small_rows())
    assert_refused(spark, caplog, created_ids, ESTIMATORS[name](**params), df, *fragments)
    assert created_ids == [], "the Params must be checked before the conversion pass"


@pytest.mark.parametrize(
    "params,fragments",
    [  # small_rows: 3 features, 2 classes (binomial: K = 1)
        (
            {"lowerBoundsOnCoefficients": DenseMatrix(1, 2, [0.0, 0.0])},
            ("lowerBoundsOnCoefficients", "(1, 3)", "(1, 2)"),
        ),
        (
            {"family": "multinomial", "upperBoundsOnCoefficients": DenseMatrix(1, 3, [1.0] * 3)},
            ("upperBoundsOnCoefficients", "(2, 3)", "multinomial", "(1, 3)"),
        ),
        ({"upperBoundsOnIntercepts": Vectors.dense([1.0, 2.0])}, ("upperBoundsOnIntercepts", "size 1", "got 2")),
        (
            {
                "lowerBoundsOnCoefficients": DenseMatrix(1, 3, [0.0, 2.0, 0.0]),
                "upperBoundsOnCoefficients": DenseMatrix(1, 3, [1.0, 1.0, 1.0]),
            },
            ("lowerBoundsOnCoefficients", "<= upperBoundsOnCoefficients"),
        ),
        ({"lowerBoundsOnIntercepts": Vectors.dense([float("nan")])}, ("lowerBoundsOnIntercepts", "NaN")),
    ],
)
def test_bound_shapes_refused_before_any_iteration(spark, caplog, created_ids, baseline, params, fragments):
    """MLlib checks the bounds' shapes once it knows the classes and features (its
    assertBoundConstrainedOptimizationParamsValid): so do we, after the conversion pass, deleting its blocks."""
    df = rows_frame(spark, small_rows())
    assert_refused(spark, caplog, created_ids, LogisticRegression(**params), df, *fragments)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
@pytest.mark.parametrize("param,value", [("strategy", "nope"), ("device", "tpu"), ("dtype", "float16")])
def test_bad_torch_params_raise_when_set(name, param, value):
    cls = ESTIMATORS[name]
    with pytest.raises(ValueError, match=rf"{param}.*{value}"):
        cls(**{param: value})
    est = cls()
    setter = getattr(est, "set" + param[0].upper() + param[1:])
    with pytest.raises(ValueError, match=rf"{param}.*{value}"):
        setter(value)
    assert est.getOrDefault(param) != value


def test_cuda_device_names_are_accepted():
    assert LogisticRegression(device="cuda:1").getDevice() == "cuda:1"
    assert LinearSVC(device="cpu").getDevice() == "cpu"
