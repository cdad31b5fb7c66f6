"""``sparkml.tuning``: the validators give pyspark's results (same folds, metrics, best map, fitted model), each
metric of the one scoring pass equals pyspark's evaluator on ``model.transform``, the pass replaces the models'
``transform``, everything else runs pyspark's own path, the validators save and load as pyspark's, and a grid
from another estimator is refused before any Spark job."""

import threading

import numpy as np
import pytest
from pyspark.ml.evaluation import (
    BinaryClassificationEvaluator,
    Evaluator,
    MulticlassClassificationEvaluator,
    RegressionEvaluator,
)
from pyspark.ml.linalg import Vectors, VectorUDT
from pyspark.ml.tuning import CrossValidator as StockCrossValidator
from pyspark.ml.tuning import CrossValidatorModel as StockCrossValidatorModel
from pyspark.ml.tuning import TrainValidationSplit as StockTrainValidationSplit
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, IntegerType, LongType, StructField, StructType
from support.helpers import coefficient_vector

from sparkml.classification import KernelSVC, LinearSVC, LogisticRegression
from sparkml.classification import LinearSVCModel as OurLinearSVCModel
from sparkml.classification import LogisticRegressionModel as OurLogisticRegressionModel
from sparkml.regression import LinearRegression
from sparkml.regression import LinearRegressionModel as OurLinearRegressionModel
from sparkml.runtime.cancellation import FitCancelled
from sparkml.tuning import (
    CrossValidator,
    CrossValidatorModel,
    ParamGridBuilder,
    TrainValidationSplit,
    scores,
    validator,
)

pytestmark = pytest.mark.usefixtures("conversions_not_kept")  # counts conversions or blocks

N, D, FOLDS = 3000, 5, 3


@pytest.fixture(scope="module")
def data(spark):
    """id, features (5 dense, different scales), label (binary), label3 (3 classes), y (real), w (weights in
    [0.2, 3]), fold (0, 1, 2), half (id % 2: two folds); 4 partitions, cached."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(N, D)) * [1.0, 2.0, 0.5, 3.0, 1.0] + [0.0, 1.0, -1.0, 0.5, 2.0]
    m = x @ [0.8, -0.4, 1.2, 0.2, -0.5] + 0.3
    label = (m + rng.logistic(size=N) > 0).astype(float)
    label3 = np.digitize(m + rng.normal(scale=0.8, size=N), [-0.8, 0.8]).astype(float)
    y = m + rng.normal(scale=0.5, size=N)
    w = rng.uniform(0.2, 3.0, N)
    fold = rng.integers(0, FOLDS, N)
    rows = [
        (i, Vectors.dense(x[i]), float(label[i]), float(label3[i]), float(y[i]), float(w[i]), int(fold[i]), i % 2)
        for i in range(N)
    ]
    schema = StructType(
        [StructField("id", LongType()), StructField("features", VectorUDT())]
        + [StructField(c, DoubleType()) for c in ("label", "label3", "y", "w")]
        + [StructField("fold", IntegerType()), StructField("half", IntegerType())]
    )
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 4), schema).cache()
    df.count()
    yield df
    df.unpersist()


def _grid(estimator, values=(0.001, 0.05, 0.3)):
    return ParamGridBuilder().addGrid(estimator.regParam, list(values)).build()


CASES = {
    "logistic-binomial": (lambda: LogisticRegression(), lambda: BinaryClassificationEvaluator()),
    "logistic-multinomial": (
        lambda: LogisticRegression(labelCol="label3"),
        lambda: MulticlassClassificationEvaluator(labelCol="label3", metricName="logLoss", weightCol="w"),
    ),
    "svc": (lambda: LinearSVC(), lambda: BinaryClassificationEvaluator(metricName="areaUnderPR", weightCol="w")),
    "linear-regression": (lambda: LinearRegression(labelCol="y"), lambda: RegressionEvaluator(labelCol="y")),
}


def _count_transforms(monkeypatch, calls):
    """Appends a model's uid to ``calls`` each time a fitted linear model of this library (LogisticRegressionModel,
    LinearSVCModel, LinearRegressionModel) scores a DataFrame (``_transform``)."""
    for cls in (OurLogisticRegressionModel, OurLinearSVCModel, OurLinearRegressionModel):

        def counted(self, dataset, original=cls._transform):
            calls.append(self.uid)
            return original(self, dataset)

        monkeypatch.setattr(cls, "_transform", counted)


# the cases searched over the fold column's FOLDS folds (the others: 2 folds of the "half" column)
FOLD_COL_CASES = {"logistic-binomial", "logistic-multinomial"}
# the binomial case on every Spark line; LinearSVC's search (scored by its margin, as binomial logistic's) in
# make test-full
CASE_MARKS = {"logistic-binomial": pytest.mark.compat, "svc": pytest.mark.full}


@pytest.fixture
def transforms(monkeypatch):
    """How many times a fitted linear model of this library scored a DataFrame (``_transform``)."""
    calls = []
    _count_transforms(monkeypatch, calls)
    return calls


@pytest.fixture
def one_pass_only(monkeypatch):
    """Scoring a fold model by model (the path where the one pass does not apply) fails the test."""
    _refuse_model_by_model(monkeypatch)


def _refuse_model_by_model(monkeypatch):
    def refused(*args):
        raise AssertionError("a fold was scored model by model")

    monkeypatch.setattr(validator, "evaluate_each", refused)


@pytest.fixture(scope="module")
def searches(data):
    """``searches(case)``: the search of ``CASES[case]`` by a fold column, by this library's ``CrossValidator``
    with scoring model by model refused (``one_pass_only``), then by pyspark's; run once per module (the parity
    and persistence tests read the same searches). The logistic cases search 3 folds (``fold``), the others 2
    (``half``); logistic-binomial ``_grid``'s three regParams, the others its first and last. A dict: ours,
    theirs, grid, evaluator, folds, fold_col, and the fitted models' ``_transform`` calls and the one pass's
    reductions of statistics (``scores._reduce_stats``) in ours ("transforms", "passes"), and the
    ``_transform`` calls in pyspark's ("stock transforms")."""
    cache = {}

    def get(case):
        if case not in cache:
            make, make_evaluator = CASES[case]
            estimator = make()
            grid = _grid(estimator) if case == "logistic-binomial" else _grid(estimator, (0.001, 0.3))
            folds, fold_col = (FOLDS, "fold") if case in FOLD_COL_CASES else (2, "half")
            found = dict(grid=grid, evaluator=make_evaluator(), folds=folds, fold_col=fold_col)
            transforms, passes = [], []
            with pytest.MonkeyPatch.context() as mp:
                _refuse_model_by_model(mp)
                _count_transforms(mp, transforms)
                original = scores._reduce_stats  # the statistics of one pass, from the fold or the stored rows

                def counted(*args):
                    passes.append(1)
                    return original(*args)

                mp.setattr(scores, "_reduce_stats", counted)
                for key, cls in (("ours", CrossValidator), ("theirs", StockCrossValidator)):
                    cv = cls(estimator=estimator, estimatorParamMaps=grid, evaluator=make_evaluator(), foldCol=fold_col)
                    found[key] = cv.setNumFolds(folds).fit(data)
                    if key == "ours":
                        found.update(transforms=list(transforms), passes=list(passes))
                        transforms.clear()
                found["stock transforms"] = list(transforms)
            cache[case] = found
        return cache[case]

    return get


@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=CASE_MARKS[c]) if c in CASE_MARKS else c for c in sorted(CASES)]
)
def test_cross_validator_matches_pyspark(searches, case):
    """pyspark's folds, metrics, best map and best model, from the one scoring pass per fold: no fitted model's
    ``transform`` runs in our search (pyspark's runs one per map and fold; the counter counts), and the
    multiclass and regression metrics are one reduction of statistics per fold."""
    found = searches(case)
    ours, theirs, grid = found["ours"], found["theirs"], found["grid"]
    assert type(ours) is CrossValidatorModel and isinstance(ours, StockCrossValidatorModel)
    np.testing.assert_allclose(ours.avgMetrics, theirs.avgMetrics, rtol=1e-6)
    np.testing.assert_allclose(ours.stdMetrics, theirs.stdMetrics, rtol=1e-6, atol=1e-12)
    assert len(set(np.round(ours.avgMetrics, 9))) == len(grid)  # the maps' models differ
    better = np.argmax if found["evaluator"].isLargerBetter() else np.argmin
    assert better(ours.avgMetrics) == better(theirs.avgMetrics)
    np.testing.assert_allclose(coefficient_vector(ours.bestModel), coefficient_vector(theirs.bestModel), rtol=1e-9)
    folds = found["folds"]
    assert ours.getFoldCol() == found["fold_col"] and ours.getNumFolds() == folds
    assert found["transforms"] == []
    if not isinstance(found["evaluator"], BinaryClassificationEvaluator):
        assert len(found["passes"]) == folds
    assert len(found["stock transforms"]) == folds * len(grid)


def test_random_folds_parallelism_and_sub_models(data, one_pass_only, tmp_path):
    """``rand(seed)`` folds, two threads and collectSubModels: pyspark's folds, metrics and sub-models; saved with
    persistSubModels and loaded, each fold's sub-models are that fold's (pyspark's Python reader gives every fold
    the last fold's), and pyspark reads the same files."""
    estimator = LogisticRegression()
    grid = _grid(estimator, (0.01, 0.2))
    kwargs = dict(estimatorParamMaps=grid, evaluator=MulticlassClassificationEvaluator(), seed=11)
    ours = CrossValidator(estimator=estimator, parallelism=2, collectSubModels=True, numFolds=2, **kwargs).fit(data)
    theirs = StockCrossValidator(estimator=estimator, collectSubModels=True, numFolds=2, **kwargs).fit(data)
    np.testing.assert_allclose(ours.avgMetrics, theirs.avgMetrics, rtol=1e-6)
    assert len(ours.subModels) == 2 and all(len(fold) == len(grid) for fold in ours.subModels)
    for fold_ours, fold_theirs in zip(ours.subModels, theirs.subModels):
        for a, b in zip(fold_ours, fold_theirs):
            np.testing.assert_allclose(coefficient_vector(a), coefficient_vector(b), rtol=1e-9)
    assert isinstance(ours, StockCrossValidatorModel) and type(ours) is CrossValidatorModel
    ours.write().option("persistSubModels", "true").save(str(tmp_path / "cv"))
    loaded = CrossValidatorModel.load(str(tmp_path / "cv"))
    assert type(loaded) is CrossValidatorModel and loaded.uid == ours.uid
    assert loaded.subModels[0] is not loaded.subModels[1]
    for fold_loaded, fold_ours in zip(loaded.subModels, ours.subModels):
        for a, b in zip(fold_loaded, fold_ours):
            np.testing.assert_array_equal(coefficient_vector(a), coefficient_vector(b))
    stock = StockCrossValidatorModel.load(str(tmp_path / "cv"))
    np.testing.assert_array_equal(stock.avgMetrics, ours.avgMetrics)
    np.testing.assert_array_equal(coefficient_vector(stock.bestModel), coefficient_vector(ours.bestModel))
    assert type(ours.copy()) is CrossValidatorModel


@pytest.mark.compat
@pytest.mark.parametrize(
    "make, make_evaluator",
    [
        (lambda: LogisticRegression(), lambda: MulticlassClassificationEvaluator(metricName="accuracy")),
        (lambda: LinearRegression(labelCol="y"), lambda: RegressionEvaluator(labelCol="y", metricName="r2")),
    ],
    ids=["logistic-accuracy", "linear-regression-r2"],
)
def test_train_validation_split_matches_pyspark(data, make, make_evaluator, one_pass_only):
    estimator = make()
    grid = _grid(estimator)
    results = [
        cls(estimator=estimator, estimatorParamMaps=grid, evaluator=make_evaluator(), seed=5, trainRatio=0.7).fit(data)
        for cls in (TrainValidationSplit, StockTrainValidationSplit)
    ]
    np.testing.assert_allclose(results[0].validationMetrics, results[1].validationMetrics, rtol=1e-6)
    np.testing.assert_allclose(coefficient_vector(results[0].bestModel), coefficient_vector(results[1].bestModel))


# ---- each metric of the one pass against pyspark's evaluator on the same models' transform -----------------


@pytest.fixture(scope="module")
def fitted(data):
    """``fitted(kind)``: (models, param maps, validation fold) of a small grid fitted on folds 1 and 2."""
    train = data.where("fold != 0").cache()
    validation = data.where("fold = 0").cache()
    makers = {
        "binomial": lambda: LogisticRegression(),
        "multinomial": lambda: LogisticRegression(labelCol="label3"),
        "svc": lambda: LinearSVC(),
        "regression": lambda: LinearRegression(labelCol="y"),
    }
    cache = {}

    def get(kind):
        if kind not in cache:
            estimator = makers[kind]()
            maps = _grid(estimator, (0.001, 0.2))
            models = [None] * len(maps)
            for index, model in estimator.fitMultiple(train, maps):
                models[index] = model
            cache[kind] = (models, maps, validation)
        return cache[kind]

    yield get
    train.unpersist()
    validation.unpersist()


def _compare(fitted_models, evaluator, rtol=1e-9):
    models, maps, validation = fitted_models
    ours = scores.fold_metrics(models, maps, evaluator, validation)
    assert ours is not None, "the one pass did not apply"
    theirs = [evaluator.evaluate(m.transform(validation, p)) for m, p in zip(models, maps)]
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=1e-12)
    return ours


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("metric", ["rmse", "mse", "r2", "r2-through-origin", "mae", "var"])
def test_regression_metrics(fitted, metric, weighted):
    evaluator = RegressionEvaluator(labelCol="y", metricName=metric.split("-")[0])
    if metric == "r2-through-origin":
        evaluator.setThroughOrigin(True)
    if weighted:
        evaluator.setWeightCol("w")
    _compare(fitted("regression"), evaluator)


MULTICLASS = [
    "f1",
    "accuracy",
    "weightedPrecision",
    "weightedRecall",
    "weightedTruePositiveRate",
    "weightedFalsePositiveRate",
    "weightedFMeasure",
    "truePositiveRateByLabel",
    "falsePositiveRateByLabel",
    "precisionByLabel",
    "recallByLabel",
    "fMeasureByLabel",
    "hammingLoss",
    "logLoss",
]


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("metric", MULTICLASS)
def test_multiclass_metrics(fitted, metric, weighted):
    evaluator = MulticlassClassificationEvaluator(labelCol="label3", metricName=metric, metricLabel=2.0, beta=0.5)
    if weighted:
        evaluator.setWeightCol("w")
    _compare(fitted("multinomial"), evaluator)


@pytest.mark.parametrize(
    "kind, params",
    [
        ("binomial", dict(metricName="f1")),
        ("binomial", dict(metricName="logLoss", eps=0.05, weightCol="w")),
        ("binomial", dict(metricName="precisionByLabel", metricLabel=1.0)),
        ("svc", dict(metricName="weightedFalsePositiveRate", weightCol="w")),
        ("svc", dict(metricName="fMeasureByLabel", metricLabel=0.0, beta=2.0)),
    ],
)
def test_multiclass_metrics_of_binary_models(fitted, kind, params):
    _compare(fitted(kind), MulticlassClassificationEvaluator(**params))


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize(
    "kind, params",
    [
        ("binomial", dict(metricName="areaUnderROC")),
        ("binomial", dict(metricName="areaUnderPR")),
        ("binomial", dict(metricName="areaUnderROC", rawPredictionCol="probability")),
        ("svc", dict(metricName="areaUnderROC")),
        ("svc", dict(metricName="areaUnderPR", rawPredictionCol="prediction")),
    ],
)
def test_binary_metrics(fitted, kind, params, weighted, monkeypatch):
    """The areas computed on the driver (folds up to ``DRIVER_VALUES``) and by the stock evaluator on the
    cached frame of scores (larger folds), each against the stock evaluator on each model's transform."""
    evaluator = BinaryClassificationEvaluator(**params)
    if weighted:
        evaluator.setWeightCol("w")
    on_driver = _compare(fitted(kind), evaluator)
    monkeypatch.setattr(scores, "DRIVER_VALUES", 0)
    models, maps, validation = fitted(kind)
    cached_frame = scores.fold_metrics(models, maps, evaluator, validation)
    np.testing.assert_allclose(cached_frame, on_driver, rtol=1e-9, atol=1e-12)


def test_area_under_roc_is_the_rank_statistic():
    """Without down-sampling the trapezoidal ROC area is the weighted Mann-Whitney statistic (ties count
    half): scikit-learn's roc_auc_score, on scores with many ties."""
    from sklearn.metrics import roc_auc_score

    from sparkml.tuning import curves

    rng = np.random.default_rng(5)
    s = np.round(rng.normal(size=2000), 1)
    y = (s + rng.normal(size=2000) > 0).astype(float)
    w = rng.uniform(0.1, 2.0, 2000)
    assert curves.area("areaUnderROC", s, y, w, 0) == pytest.approx(roc_auc_score(y, s, sample_weight=w), rel=1e-12)
    assert curves.area("areaUnderROC", s, y, w, 1000) == pytest.approx(roc_auc_score(y, s, sample_weight=w), rel=1e-12)
    # numBins 5 on 62 distinct scores: groups of 12 distinct scores, the curve through each group's last score
    order = np.argsort(-s, kind="stable")
    distinct = np.unique(s)[::-1]
    g = len(distinct) // 5
    ends = [distinct[min(i + g - 1, len(distinct) - 1)] for i in range(0, len(distinct), g)]
    tpr = [w[order][(s[order] >= e) & (y[order] == 1)].sum() / w[y == 1].sum() for e in ends]
    fpr = [w[order][(s[order] >= e) & (y[order] == 0)].sum() / w[y == 0].sum() for e in ends]
    x_, y_ = np.r_[0.0, fpr, 1.0], np.r_[0.0, tpr, 1.0]
    expected = float(np.sum(np.diff(x_) * (y_[1:] + y_[:-1]) / 2))
    assert g == 12 and curves.area("areaUnderROC", s, y, w, 5) == pytest.approx(expected, rel=1e-12)


@pytest.mark.compat
def test_binary_metrics_of_three_classes_are_pysparks(fitted):
    """rawPrediction vectors of 3 classes: Spark 4 refuses them, 3.5 reads entry 1; the stock path says which."""
    models, maps, validation = fitted("multinomial")
    assert scores.fold_metrics(models, maps, BinaryClassificationEvaluator(labelCol="label3"), validation) is None


def test_binary_metrics_down_sampled_curve(fitted):
    """numBins below half the fold's distinct scores: Spark down-samples the curve per partition of its sort,
    whose range boundaries come from a sample seeded by the RDD's id, so two runs of the stock evaluator on the
    same scores differ in the fourth digit; the driver's curve is down-sampled as one partition."""
    models, maps, validation = fitted("binomial")
    evaluator = BinaryClassificationEvaluator(numBins=50)
    ours = scores.fold_metrics(models, maps, evaluator, validation)
    theirs = [evaluator.evaluate(m.transform(validation, p)) for m, p in zip(models, maps)]
    np.testing.assert_allclose(ours, theirs, atol=5e-3)
    exact = scores.fold_metrics(models, maps, BinaryClassificationEvaluator(numBins=0), validation)
    assert np.abs(np.subtract(ours, exact)).max() > 1e-5  # the curve was down-sampled


@pytest.mark.parametrize("every", [1, 3], ids=["all-sparse", "every-third-sparse"])
@pytest.mark.parametrize("dense_features", [1024, 0], ids=["as-arrays", "as-vector-struct"])
def test_sparse_rows(fitted, every, dense_features, monkeypatch):
    """Rows stored as sparse vectors (feature 2 left out) score as MLlib scores them: read as arrays (up to
    ``DENSE_FEATURES`` features), or as the vector struct (more, when the first row is sparse)."""
    monkeypatch.setattr(scores, "DENSE_FEATURES", dense_features)
    models, maps, validation = fitted("multinomial")
    to_sparse = F.udf(lambda v: Vectors.sparse(len(v), {i: x for i, x in enumerate(v) if i != 2}), VectorUDT())
    mixed = validation.withColumn(
        "features", F.when(F.col("id") % every == 0, to_sparse("features")).otherwise(F.col("features"))
    )
    evaluator = MulticlassClassificationEvaluator(labelCol="label3", metricName="logLoss")
    _compare((models, maps, mixed), evaluator)


def test_feature_rows_of_the_vector_struct():
    """Dense and sparse rows of one batch of the VectorUDT struct make one CSR matrix; a row of another size, an
    index out of range or a non-finite value make the batch irregular (None)."""
    import pyarrow as pa

    from sparkml.tuning.batches import feature_rows

    doubles = pa.list_(pa.float64())
    fields = [("type", pa.int8()), ("size", pa.int32()), ("indices", pa.list_(pa.int32())), ("values", doubles)]
    struct = pa.struct(fields)

    def batch(*rows):
        return pa.array([dict(zip(("type", "size", "indices", "values"), r)) for r in rows], type=struct)

    x = feature_rows(batch((1, None, None, [1.0, 2.0, 3.0]), (0, 3, [2], [5.0]), (0, 3, [], [])), 3)
    np.testing.assert_array_equal(x.toarray(), [[1, 2, 3], [0, 0, 5], [0, 0, 0]])
    dense = feature_rows(batch((1, None, None, [1.0, 2.0]), (1, None, None, [3.0, 4.0])).slice(1), 2)
    np.testing.assert_array_equal(dense, [[3, 4]])  # a sliced batch: the struct's offset is applied
    assert feature_rows(batch((1, None, None, [1.0, 2.0]), (0, 3, [0], [1.0])), 3) is None  # size 2 != 3
    assert feature_rows(batch((0, 3, [3], [1.0])), 3) is None
    assert feature_rows(batch((1, None, None, [np.nan, 1.0, 2.0])), 3) is None
    assert feature_rows(pa.array([[1.0, 2.0], [3.0]], type=doubles), 2) is None
    np.testing.assert_array_equal(feature_rows(pa.array([[1.0, 2.0]], type=doubles), 2), [[1, 2]])


# ---- the one pass replaces the models' transform (counted by the parity tests above); else pyspark's path --


class MeanAbsoluteLabelGap(Evaluator):
    """A user's evaluator: mean |label - prediction|, smaller is better."""

    def _evaluate(self, dataset):
        return dataset.select(F.avg(F.abs(F.col("label") - F.col("prediction")))).first()[0]

    def isLargerBetter(self):
        return False


class MyRegressionEvaluator(RegressionEvaluator):
    """A subclass of pyspark's evaluator: it may compute anything, so the pass does not stand in for it."""


@pytest.mark.parametrize(
    "make_evaluator",
    [
        pytest.param(lambda: MeanAbsoluteLabelGap(), id="own-evaluator"),
        pytest.param(lambda: MyRegressionEvaluator(metricName="mae"), marks=pytest.mark.full, id="subclass"),
    ],
)
def test_other_evaluators_run_pysparks_path(data, transforms, make_evaluator):
    estimator = LogisticRegression()
    grid = _grid(estimator, (0.01, 0.5))
    kwargs = dict(estimator=estimator, estimatorParamMaps=grid, evaluator=make_evaluator(), numFolds=2, seed=3)
    results = [cls(**kwargs).fit(data) for cls in (CrossValidator, StockCrossValidator)]
    np.testing.assert_allclose(results[0].avgMetrics, results[1].avgMetrics, rtol=1e-9)
    assert len(transforms) == 2 * 2 * len(grid)  # both scored model by model, each map on each of 2 folds


@pytest.mark.full  # KernelSVC in pyspark's CrossValidator: tests/test_pipeline.py, in a Pipeline
def test_kernel_svc_grid_runs_pysparks_path(data):
    small = data.where("id < 400")
    estimator = KernelSVC(maxIter=20)
    grid = _grid(estimator, (0.01, 0.1))
    kwargs = dict(estimator=estimator, estimatorParamMaps=grid, evaluator=BinaryClassificationEvaluator())
    ours = CrossValidator(numFolds=2, seed=3, **kwargs).fit(small)
    theirs = StockCrossValidator(numFolds=2, seed=3, **kwargs).fit(small)
    np.testing.assert_allclose(ours.avgMetrics, theirs.avgMetrics, rtol=1e-9)


# ---- a Pipeline in the search ---------------------------------------------------------------------------------


@pytest.fixture
def scaler_fits(monkeypatch):
    """How many times a StandardScaler was fitted."""
    from pyspark.ml.feature import StandardScaler

    calls = []
    original = StandardScaler._fit

    def counted(self, dataset):
        calls.append(self.uid)
        return original(self, dataset)

    monkeypatch.setattr(StandardScaler, "_fit", counted)
    return calls


def _pipeline(data):
    """(raw columns c0..c4 with label, w and fold; Pipeline(VectorAssembler, StandardScaler, LinearRegression))."""
    from pyspark.ml import Pipeline
    from pyspark.ml.feature import StandardScaler, VectorAssembler
    from pyspark.ml.functions import vector_to_array

    columns = [f"c{i}" for i in range(D)]
    raw = data.select(*[vector_to_array("features")[i].alias(c) for i, c in enumerate(columns)], "y", "w", "fold")
    assembler = VectorAssembler(inputCols=columns, outputCol="assembled")
    scaler = StandardScaler(inputCol="assembled", outputCol="scaled", withMean=True)
    return raw, Pipeline(stages=[assembler, scaler, LinearRegression(featuresCol="scaled", labelCol="y")])


@pytest.mark.parametrize("cls", [CrossValidator, pytest.param(TrainValidationSplit, marks=pytest.mark.full)])
def test_pipeline_stages_before_the_estimator_are_fitted_once_per_split(data, one_pass_only, scaler_fits, cls):
    from pyspark.ml import PipelineModel

    from sparkml.data.training_data import TrainingData

    raw, pipeline = _pipeline(data)
    last = pipeline.getStages()[-1]
    # two maps, each setting two of the last stage's Params
    grid = [{last.regParam: 0.001, last.elasticNetParam: 0.0}, {last.regParam: 1.0, last.elasticNetParam: 0.5}]
    evaluator = RegressionEvaluator(labelCol="y", weightCol="w", metricName="mae")
    stock = StockCrossValidator if cls is CrossValidator else StockTrainValidationSplit
    kwargs = dict(estimator=pipeline, estimatorParamMaps=grid, evaluator=evaluator, collectSubModels=True)
    extra = dict(foldCol="fold", numFolds=FOLDS) if cls is CrossValidator else dict(seed=5)
    splits = FOLDS if cls is CrossValidator else 1
    prepare = TrainingData.prepare.__func__
    conversions = []

    def counted_prepare(klass, *args, **kw):
        conversions.append(1)
        return prepare(klass, *args, **kw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(TrainingData, "prepare", classmethod(counted_prepare))
        ours = cls(**kwargs, **extra).fit(raw)
    assert len(scaler_fits) == splits + 1  # once per split, then the best map's pipeline on all rows
    assert len(conversions) == splits + 1  # one conversion per split for the whole grid
    theirs = stock(**kwargs, **extra).fit(raw)
    assert len(scaler_fits) == splits + 1 + splits * len(grid) + 1  # pyspark's: once per map and split
    metric = "avgMetrics" if cls is CrossValidator else "validationMetrics"
    np.testing.assert_allclose(getattr(ours, metric), getattr(theirs, metric), rtol=1e-6)
    assert len(set(np.round(getattr(ours, metric), 9))) == len(grid)
    assert int(np.argmin(getattr(ours, metric))) == int(np.argmin(getattr(theirs, metric)))
    assert type(ours.bestModel) is PipelineModel and len(ours.bestModel.stages) == 3
    np.testing.assert_allclose(
        coefficient_vector(ours.bestModel.stages[-1]), coefficient_vector(theirs.bestModel.stages[-1]), rtol=1e-6
    )
    sub_ours = ours.subModels if cls is CrossValidator else [ours.subModels]
    sub_theirs = theirs.subModels if cls is CrossValidator else [theirs.subModels]
    for fold_ours, fold_theirs in zip(sub_ours, sub_theirs):
        assert [type(m) for m in fold_ours] == [PipelineModel] * len(grid)
        for a, b in zip(fold_ours, fold_theirs):
            np.testing.assert_allclose(a.stages[1].mean.toArray(), b.stages[1].mean.toArray(), rtol=1e-12)
            np.testing.assert_allclose(coefficient_vector(a.stages[-1]), coefficient_vector(b.stages[-1]), rtol=1e-6)


def test_pipeline_grid_over_an_earlier_stage_runs_pysparks_path(data, transforms, scaler_fits):
    raw, pipeline = _pipeline(data)
    scaler = pipeline.getStages()[1]
    grid = ParamGridBuilder().addGrid(scaler.withStd, [True, False]).build()
    kwargs = dict(estimator=pipeline, estimatorParamMaps=grid, evaluator=RegressionEvaluator(labelCol="y"))
    results = [cls(numFolds=2, seed=3, **kwargs).fit(raw) for cls in (CrossValidator, StockCrossValidator)]
    np.testing.assert_allclose(results[0].avgMetrics, results[1].avgMetrics, rtol=1e-9)
    assert len(scaler_fits) == 2 * (2 * len(grid) + 1)  # both fitted the scaler for every map of 2 folds


def test_refused_weights_give_pysparks_error(data):
    """A negative weight: the pass hands the fold to pyspark's path, whose evaluator raises its own error."""
    bad = data.withColumn("w", F.when(F.col("id") == 7, -1.0).otherwise(F.col("w")))
    estimator = LinearRegression(labelCol="y")
    evaluator = RegressionEvaluator(labelCol="y", weightCol="w")
    errors = []
    for cls in (CrossValidator, StockCrossValidator):
        with pytest.raises(Exception) as raised:
            cls(estimator=estimator, estimatorParamMaps=_grid(estimator, (0.1,)), evaluator=evaluator).fit(bad)
        errors.append(raised.value)
    assert type(errors[0]) is type(errors[1]) and "Weights MUST NOT be Negative" in str(errors[0])


# ---- persistence ---------------------------------------------------------------------------------------------


@pytest.mark.compat
def test_fitted_model_loads_in_pyspark(searches, tmp_path):
    """The logistic-binomial search of test_cross_validator_matches_pyspark, saved and loaded by pyspark."""
    model = searches("logistic-binomial")["ours"]
    model.save(str(tmp_path / "cv"))
    loaded = StockCrossValidatorModel.load(str(tmp_path / "cv"))
    np.testing.assert_allclose(loaded.avgMetrics, model.avgMetrics, rtol=1e-15)
    np.testing.assert_allclose(loaded.stdMetrics, model.stdMetrics, rtol=1e-15)
    np.testing.assert_allclose(loaded.bestModel.coefficients.toArray(), model.bestModel.coefficients.toArray())
    assert type(loaded.getEstimator()) is LogisticRegression


@pytest.mark.compat
@pytest.mark.parametrize("cls, stock", [(CrossValidator, StockCrossValidator), (TrainValidationSplit, None)])
def test_validators_save_and_load(tmp_path, cls, stock):
    estimator = LinearSVC(maxIter=7)
    grid = _grid(estimator, (0.01, 0.2))
    evaluator = BinaryClassificationEvaluator(metricName="areaUnderPR")
    saved = cls(estimator=estimator, estimatorParamMaps=grid, evaluator=evaluator, seed=9, parallelism=2)
    saved.save(str(tmp_path / "v"))
    stock = stock or StockTrainValidationSplit
    for reader, expected in ((cls, cls), (stock, stock)):
        loaded = reader.load(str(tmp_path / "v"))
        assert type(loaded) is expected and loaded.uid == saved.uid
        assert loaded.getSeed() == 9 and loaded.getParallelism() == 2
        assert type(loaded.getEstimator()) is LinearSVC and loaded.getEstimator().getMaxIter() == 7
        assert loaded.getEvaluator().getMetricName() == "areaUnderPR"
        assert [m[loaded.getEstimator().regParam] for m in loaded.getEstimatorParamMaps()] == [0.01, 0.2]


# ---- a grid from another estimator ---------------------------------------------------------------------------


@pytest.mark.compat
@pytest.mark.parametrize(
    "bad_grid, match",
    [
        (lambda: ParamGridBuilder().addGrid(LinearSVC().regParam, [0.1, 1.0]).build(), r"sets regParam of another"),
        (lambda: [{LogisticRegression.regParam: 0.1}], r"sets regParam of another"),
        (None, r"estimatorParamMaps\[1\]: regParam must be a finite number >= 0; got inf"),
    ],
    ids=["another-estimator", "class-param", "bad-value"],
)
@pytest.mark.parametrize("cls", [CrossValidator, TrainValidationSplit])
def test_bad_grid_is_refused_before_any_job(spark, data, cls, bad_grid, match):
    estimator = LogisticRegression()
    grid = bad_grid() if bad_grid else [{estimator.regParam: 0.1}, {estimator.regParam: float("inf")}]
    validator = cls(estimator=estimator, estimatorParamMaps=grid, evaluator=BinaryClassificationEvaluator())
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("bad-grid", "bad-grid")
    try:
        with pytest.raises(ValueError, match=match):
            validator.fit(data)
        assert tracker.getJobIdsForGroup("bad-grid") == []
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)


@pytest.mark.parametrize(
    "cls, params, match, stock_refuses",
    [
        (CrossValidator, dict(numFolds=1), r"numFolds must be >= 2; got 1", False),
        (CrossValidator, dict(numFolds=-2), r"numFolds must be >= 2; got -2", False),
        (TrainValidationSplit, dict(trainRatio=0.0), r"trainRatio must be in \(0, 1\).*; got 0.0", False),
        (TrainValidationSplit, dict(trainRatio=1.0), r"trainRatio must be in \(0, 1\).*; got 1.0", False),
        (CrossValidator, dict(parallelism=0), r"parallelism must be >= 1; got 0", True),
        (TrainValidationSplit, dict(parallelism=-1), r"parallelism must be >= 1; got -1", True),
        (CrossValidator, dict(estimatorParamMaps=[]), r"estimatorParamMaps is empty", True),
    ],
    ids=["one-fold", "negative-folds", "train-ratio-0", "train-ratio-1", "parallelism-0", "parallelism--1", "no-maps"],
)
def test_searches_that_cannot_run_are_refused_before_any_job(spark, data, cls, params, match, stock_refuses):
    """What MLlib's validators refuse (numFolds >= 2, trainRatio in [0, 1], parallelism >= 1: pyspark's thread
    pool raises), a split that leaves no rows to train or validate on, and an empty grid: a ValueError naming the
    Param before any job, where pyspark fails inside a task (numpy's casting error, a ZeroDivisionError) or runs."""
    estimator = LogisticRegression(maxIter=5)
    params = dict(dict(estimatorParamMaps=[{estimator.regParam: 0.1}]), **params)
    validator = cls(estimator=estimator, evaluator=BinaryClassificationEvaluator(), **params)
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("bad-search", "bad-search")
    try:
        with pytest.raises(ValueError, match=f"^{cls.__name__}: .*{match}"):
            validator.fit(data)
        assert tracker.getJobIdsForGroup("bad-search") == []
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    if stock_refuses:
        stock = {CrossValidator: StockCrossValidator, TrainValidationSplit: StockTrainValidationSplit}[cls]
        with pytest.raises(ValueError):  # pyspark's ThreadPool: "Number of processes must be at least 1"
            stock(estimator=estimator, evaluator=BinaryClassificationEvaluator(), **params).fit(data)


@pytest.mark.parametrize("cls", [CrossValidator, TrainValidationSplit])
def test_a_cancelled_job_of_the_search_itself_ends_it_with_fit_cancelled(spark, data, monkeypatch, cls):
    """A cancellation that lands in the search's own scoring step (not in a model's fit) ends the search with
    ``FitCancelled`` naming it, as a cancelled fit does, not with py4j's error; the next search runs."""
    sc = spark.sparkContext

    def cancelled_scoring(*args, **kwargs):
        threading.Timer(1.0, sc.cancelAllJobs).start()
        # a real job of hours, cancelled by the timer; in the JVM alone, so no Python worker is killed
        spark.range(0, 1 << 40, 1, 2).where("id % 7 = 100").count()

    monkeypatch.setattr(validator, "fold_metrics", cancelled_scoring)
    estimator = LogisticRegression(maxIter=5)
    search = cls(
        estimator=estimator, estimatorParamMaps=_grid(estimator, (0.1,)), evaluator=BinaryClassificationEvaluator()
    )
    with pytest.raises(FitCancelled, match=rf"^{cls.__name__} fit cancelled: .*[Jj]ob \d+ cancelled"):
        search.fit(data)
    monkeypatch.undo()
    assert len(search.fit(data).avgMetrics if cls is CrossValidator else search.fit(data).validationMetrics) == 1
