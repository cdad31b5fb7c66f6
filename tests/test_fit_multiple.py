"""``fitMultiple`` (what CrossValidator and TrainValidationSplit call) converts the data once per
distinct conversion, gives the models separate fits give, and leaves no training blocks behind.

The grids here vary Params that separate regularization paths (``fitIntercept``, ``standardization``), so
each map is fitted alone, as ``fit`` fits it, bit for bit; ``tests/test_regularization_path.py`` checks the
maps a path solves together (regParam, elasticNetParam, maxIter, tol grids), whose warm-started models
equal cold fits to the optimizer's tolerance. The normal equations' path is exact: one Gram pass, each map
solved as its own fit solves it."""

import gc

import numpy as np
import pytest
from pyspark.ml import Estimator
from pyspark.ml.evaluation import BinaryClassificationEvaluator
from pyspark.ml.linalg import Vectors
from pyspark.ml.tuning import CrossValidator, ParamGridBuilder
from support.data_helpers import label_and_target_frame
from support.helpers import coefficient_vector, executor_datasets

from sparkml.classification import KernelSVC, LinearSVC, LogisticRegression
from sparkml.data.training_data import TrainingData
from sparkml.regression import LinearRegression

pytestmark = pytest.mark.usefixtures("conversions_not_kept")  # counts conversions or blocks


@pytest.fixture(scope="module")
def data(spark):
    """600 rows, 4 features of different scales, a binary label and a real target, 4 partitions."""
    df = label_and_target_frame(spark)
    df.count()
    yield df
    df.unpersist()


@pytest.fixture
def conversions(monkeypatch):
    """The arguments of every ``TrainingData.prepare`` call (each is one conversion job)."""
    calls = []
    original = TrainingData.prepare.__func__

    def prepare(cls, df, *args, **kwargs):
        calls.append(kwargs)
        return original(cls, df, *args, **kwargs)

    monkeypatch.setattr(TrainingData, "prepare", classmethod(prepare))
    return calls


def one_by_one(estimator, df, maps):
    """pyspark's own fitMultiple: one fit, so one conversion, per map."""
    models = [None] * len(maps)
    for index, model in Estimator.fitMultiple(estimator, df, maps):
        models[index] = model
    return models


@pytest.mark.parametrize(
    "make, grid",
    [
        (
            lambda: LogisticRegression(strategy="sync", regParam=0.05, elasticNetParam=0.5),
            {"standardization": [True, False]},
        ),
        (lambda: LogisticRegression(strategy="allreduce", regParam=0.01), {"fitIntercept": [True, False]}),
        (lambda: LinearSVC(strategy="allreduce", regParam=0.1), {"standardization": [True, False]}),
        (
            lambda: LinearRegression(labelCol="y", solver="l-bfgs", strategy="sync", regParam=0.3),
            {"fitIntercept": [True, False]},
        ),
        (lambda: LinearRegression(labelCol="y", strategy="allreduce"), {"regParam": [0.0, 0.3]}),
    ],
    ids=["lr-sync", "lr-allreduce", "svc-allreduce", "linreg-lbfgs-sync", "linreg-normal-allreduce"],
)
def test_one_conversion_same_models(spark, data, conversions, make, grid):
    estimator = make()
    builder = ParamGridBuilder()
    for name, values in grid.items():
        builder = builder.addGrid(estimator.getParam(name), values)
    maps = builder.build()
    before = executor_datasets(spark)
    models = estimator.fit(data, maps)
    assert len(conversions) == 1
    assert executor_datasets(spark) == before  # every block released
    separate = one_by_one(estimator, data, maps)
    assert len(conversions) == 1 + len(maps)
    for m, shared, alone in zip(maps, models, separate):
        for param, value in m.items():
            assert shared.getOrDefault(param.name) == value
        np.testing.assert_allclose(coefficient_vector(shared), coefficient_vector(alone), rtol=1e-9, atol=1e-12)
        assert shared.summary.totalIterations == alone.summary.totalIterations
    # the grid's fits differ: the shared conversion did not hand every map the first map's model
    assert len({tuple(np.round(coefficient_vector(m).ravel(), 10)) for m in models}) == len(maps)


def test_maps_that_convert_differently_get_their_own_conversion(spark, data, conversions):
    lr = LogisticRegression(strategy="sync", regParam=0.01)
    maps = [
        {lr.dtype: "float32"},
        {lr.dtype: "float64"},
        {lr.dtype: "float32", lr.fitIntercept: False},
        {lr.strategy: "allreduce"},
    ]
    before = executor_datasets(spark)
    models = lr.fit(data, maps)
    assert sorted((c["dtype"], c["barrier"]) for c in conversions) == [
        ("float32", False),
        ("float32", True),
        ("float64", False),
    ]
    assert executor_datasets(spark) == before
    # float32 storage against float64: the features' rounding only
    np.testing.assert_allclose(coefficient_vector(models[0]), coefficient_vector(models[1]), rtol=1e-5)
    np.testing.assert_allclose(coefficient_vector(models[0]), coefficient_vector(models[3]), rtol=1e-9)


@pytest.mark.parametrize("strategy, parallelism", [pytest.param("allreduce", 1, marks=pytest.mark.full), ("sync", 2)])
def test_cross_validator_converts_once_per_fold(spark, data, conversions, strategy, parallelism):
    from pyspark.ml.classification import LogisticRegression as MLlibLR

    grid_values = [0.001, 0.3]
    evaluator = BinaryClassificationEvaluator()
    results = {}
    for name, estimator in {"ours": LogisticRegression(strategy=strategy), "mllib": MLlibLR()}.items():
        grid = ParamGridBuilder().addGrid(estimator.regParam, grid_values).build()
        cv = CrossValidator(
            estimator=estimator,
            estimatorParamMaps=grid,
            evaluator=evaluator,
            numFolds=3,
            seed=4,
            parallelism=parallelism,
        )
        results[name] = cv.fit(data)
    assert len(conversions) == 3 + 1  # one per fold (not per fold and map), then the best map on all rows
    np.testing.assert_allclose(results["ours"].avgMetrics, results["mllib"].avgMetrics, rtol=1e-4)
    assert results["ours"].bestModel.getRegParam() == grid_values[int(np.argmax(results["mllib"].avgMetrics))]


@pytest.mark.parametrize(
    "params",
    [dict(strategy="sync", loss="squared_hinge"), dict(strategy="allreduce", probability=True)],
    ids=["sync", "allreduce-platt"],
)
def test_kernel_svc_grid_over_c_shares_one_feature_map(spark, data, conversions, monkeypatch, params):
    """A grid over regParam (C) and the stopping rule: one conversion, one landmark selection and one derivation
    of the kernel blocks for the whole grid; each model the one its own fit returns."""
    import sparkml.kernel.kernel_svc as kernel_svc

    feature_maps = []
    original = kernel_svc.fit_feature_map

    def fit_feature_map(*args, **kwargs):
        feature_maps.append(args[0].getRegParam())
        return original(*args, **kwargs)

    monkeypatch.setattr(kernel_svc, "fit_feature_map", fit_feature_map)
    svc = KernelSVC(numLandmarks=30, maxIter=20, **params)
    maps = (
        ParamGridBuilder()
        .addGrid(svc.regParam, [1e-3, 1e-1])
        .addGrid(svc.threshold, [0.0, 0.5])  # no fit reads it: the maps that differ in it share a solve
        .build()
    )
    before = executor_datasets(spark)
    models = svc.fit(data, maps)
    assert len(conversions) == 1 and len(feature_maps) == 1 and executor_datasets(spark) == before
    frame = data.select("features")
    distinct = [0, 2]  # the maps of different regParam; 1 and 3 share their solves
    np.testing.assert_array_equal(coefficient_vector(models[1]), coefficient_vector(models[0]))
    np.testing.assert_array_equal(coefficient_vector(models[3]), coefficient_vector(models[2]))
    assert [models[i].getThreshold() for i in range(4)] == [0.0, 0.5, 0.0, 0.5]
    for m, shared, alone in zip(
        [maps[i] for i in distinct], [models[i] for i in distinct], one_by_one(svc, data, [maps[i] for i in distinct])
    ):
        assert shared.getRegParam() == m[svc.regParam] and shared.getThreshold() == m[svc.threshold]
        np.testing.assert_allclose(coefficient_vector(shared), coefficient_vector(alone), rtol=1e-9, atol=1e-12)
        assert shared.summary.totalIterations == alone.summary.totalIterations
        if params.get("probability"):
            p_shared, p_alone = (
                np.array([r.probability.toArray() for r in model.transform(frame).collect()])
                for model in (shared, alone)
            )
            np.testing.assert_allclose(p_shared, p_alone, rtol=1e-9, atol=1e-12)
    assert len(feature_maps) == 1 + len(distinct)  # the separate fits: one feature map each
    assert not np.allclose(coefficient_vector(models[0]), coefficient_vector(models[2]))


def test_a_failing_map_stops_the_grid_and_leaves_no_blocks(spark, data, conversions):
    lr = LogisticRegression(strategy="sync")
    # the third map is on a path of its own (fitIntercept), solved at its request
    maps = [{lr.regParam: 0.01}, {lr.elasticNetParam: 2.0}, {lr.regParam: 0.1, lr.fitIntercept: False}]
    before = executor_datasets(spark)
    fits = lr.fitMultiple(data, maps)
    index, model = next(fits)
    assert index == 0 and model.getRegParam() == 0.01
    with pytest.raises(ValueError, match="elasticNetParam must be in"):
        next(fits)
    assert len(conversions) == 1 and executor_datasets(spark) != before  # the third map still needs it
    del fits  # the grid was abandoned: the iterator's finalizer releases the conversion
    gc.collect()
    assert executor_datasets(spark) == before


def test_bad_data_is_refused_by_every_map(spark, conversions):
    df = spark.createDataFrame(
        [(Vectors.dense([1.0, 2.0]), 0.0), (Vectors.dense([1.0, float("nan")]), 1.0)], ["features", "label"]
    )
    lr = LogisticRegression()
    fits = lr.fitMultiple(df, [{lr.regParam: 0.0}, {lr.regParam: 1.0}])
    for _ in range(2):
        with pytest.raises(ValueError, match="features column 'features' has 1 NaN or infinite values"):
            next(fits)
    with pytest.raises(StopIteration):
        next(fits)
