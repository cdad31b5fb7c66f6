"""``sparkml.tuning`` converts a search's dataset once: each fold's training set is a subset of those blocks and the
refit trains on them. The folds, metrics, sub-models and best model are those of fits that convert each fold
themselves (pyspark's ``CrossValidator`` and ``TrainValidationSplit`` with this library's estimator), and a
search that cannot convert once (a fraction or an out-of-range ``foldCol``, ``classWeight``) converts per fold."""

import numpy as np
import pytest
from pyspark.ml.evaluation import BinaryClassificationEvaluator, MulticlassClassificationEvaluator, RegressionEvaluator
from pyspark.ml.linalg import Vectors, VectorUDT
from pyspark.ml.tuning import CrossValidator as StockCrossValidator
from pyspark.ml.tuning import TrainValidationSplit as StockTrainValidationSplit
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, IntegerType, StructField, StructType
from support.helpers import coefficient_vector

from sparkml.classification import LinearSVC, LogisticRegression
from sparkml.data.training_data import TrainingData
from sparkml.regression import LinearRegression
from sparkml.tuning import CrossValidator, ParamGridBuilder, TrainValidationSplit, scores

pytestmark = pytest.mark.usefixtures("conversions_not_kept")  # counts conversions or blocks

N, D = 2400, 6


def _rows(sparse):
    rng = np.random.default_rng(8)
    x = rng.normal(size=(N, D)) * [1.0, 3.0, 0.5, 1.0, 2.0, 1.0] + [0.5, 0.0, -1.0, 0.0, 1.0, 0.0]
    if sparse:
        x[rng.random((N, D)) < 0.6] = 0.0
    m = x @ [0.7, -0.3, 1.1, 0.0, 0.4, -0.6] - 0.2
    label = (m + rng.logistic(size=N) > 0).astype(float)
    y = m + rng.normal(scale=0.4, size=N)
    w = rng.uniform(0.3, 2.5, N)
    for i in range(N):
        v = Vectors.sparse(D, {j: x[i, j] for j in np.flatnonzero(x[i])}) if sparse else Vectors.dense(x[i])
        yield v, float(label[i]), float(y[i]), float(w[i]), int(i % 3), float(i % 3)


def _frame(spark, sparse):
    schema = StructType(
        [StructField("features", VectorUDT())]
        + [StructField(c, DoubleType()) for c in ("label", "y", "w")]
        + [StructField("fold", IntegerType()), StructField("fold_double", DoubleType())]
    )
    df = spark.createDataFrame(spark.sparkContext.parallelize(list(_rows(sparse)), 3), schema).cache()
    df.count()
    return df


@pytest.fixture(scope="module")
def frames(spark):
    """{"dense": ..., "sparse": ...}: features, label (binary), y (real), w (weights), fold and fold_double
    (0, 1, 2); 3 partitions, cached."""
    made = {kind: _frame(spark, kind == "sparse") for kind in ("dense", "sparse")}
    yield made
    for df in made.values():
        df.unpersist()


@pytest.fixture
def data(frames):
    return frames["dense"]


@pytest.fixture
def conversions(monkeypatch):
    """What each conversion converted: "fold ids" (the search's one conversion), "rows" (a fit's own), and each
    ``subset`` taken of it."""
    calls = []
    prepare, subset = TrainingData.prepare.__func__, TrainingData.subset

    def counted_prepare(cls, *args, **kwargs):
        calls.append("fold ids" if kwargs.get("fold") is not None else "rows")
        return prepare(cls, *args, **kwargs)

    def counted_subset(self, fold):
        calls.append(f"subset {fold}")
        return subset(self, fold)

    monkeypatch.setattr(TrainingData, "prepare", classmethod(counted_prepare))
    monkeypatch.setattr(TrainingData, "subset", counted_subset)
    return calls


@pytest.fixture
def scored_from_blocks(monkeypatch):
    """The folds whose validation rows were scored where the search's conversion stored them (their fold ids)."""
    folds = []
    original = scores._metrics_from_blocks

    def counted(plan, evaluator, blocks):
        folds.append(blocks.fold)
        return original(plan, evaluator, blocks)

    monkeypatch.setattr(scores, "_metrics_from_blocks", counted)
    return folds


def _grid(estimator, values=(0.002, 0.4)):
    builder = ParamGridBuilder().addGrid(estimator.regParam, list(values))
    if estimator.hasParam("elasticNetParam") and not isinstance(estimator, LinearSVC):
        builder = builder.addGrid(estimator.elasticNetParam, [0.0, 0.5])
    return builder.build()


def _same_search(ours, theirs):
    # ours scores the validation rows from the stored copy: features rounded to float32 (relative 6e-8)
    np.testing.assert_allclose(ours.avgMetrics, theirs.avgMetrics, rtol=1e-7)
    np.testing.assert_allclose(coefficient_vector(ours.bestModel), coefficient_vector(theirs.bestModel), rtol=1e-9)
    for fold_ours, fold_theirs in zip(ours.subModels, theirs.subModels):
        for a, b in zip(fold_ours, fold_theirs):
            np.testing.assert_allclose(coefficient_vector(a), coefficient_vector(b), rtol=1e-9, atol=1e-12)
            assert a.summary.totalIterations == b.summary.totalIterations


CASES = {  # data, estimator, evaluator, foldCol
    "logistic-weighted-rand-folds": (
        "dense",
        lambda: LogisticRegression(weightCol="w"),
        BinaryClassificationEvaluator,
        "",
    ),
    "logistic-allreduce-fold-col": (
        "dense",
        lambda: LogisticRegression(strategy="allreduce"),
        BinaryClassificationEvaluator,
        "fold",
    ),
    "svc-rand-folds": ("dense", lambda: LinearSVC(), BinaryClassificationEvaluator, ""),
    "linear-regression-fold-col": (
        "dense",
        lambda: LinearRegression(labelCol="y", weightCol="w"),
        lambda: RegressionEvaluator(labelCol="y"),
        "fold",
    ),
    "sparse-logistic-rand-folds": (
        "sparse",
        lambda: LogisticRegression(weightCol="w"),
        BinaryClassificationEvaluator,
        "",
    ),
    "sparse-linear-regression-fold-col": (
        "sparse",
        lambda: LinearRegression(labelCol="y"),
        lambda: RegressionEvaluator(labelCol="y"),
        "fold",
    ),
    "logistic-weighted-log-loss": (
        "dense",
        lambda: LogisticRegression(weightCol="w", family="multinomial"),
        lambda: MulticlassClassificationEvaluator(weightCol="w", metricName="logLoss"),
        "",
    ),
}


FULL = {  # make test-full
    "svc-rand-folds",
    "linear-regression-fold-col",
    "sparse-linear-regression-fold-col",
    "logistic-weighted-rand-folds",
    "sparse-logistic-rand-folds",  # the sparse subset: test_subset_is_the_conversion_of_the_training_rows
}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.full) if c in FULL else c for c in sorted(CASES)])
def test_cross_validator_converts_once(frames, conversions, scored_from_blocks, case):
    kind, make, evaluator, fold_col = CASES[case]
    estimator = make()
    folds = 3 if fold_col else 2  # the fold column's 3 folds; rand(seed) folds: 2 are enough
    kwargs = dict(
        estimator=estimator,
        estimatorParamMaps=_grid(estimator),
        evaluator=evaluator(),
        numFolds=folds,
        seed=4,
        foldCol=fold_col,
        collectSubModels=True,
    )
    ours = CrossValidator(**kwargs).fit(frames[kind])
    assert conversions == ["fold ids"] + [f"subset {i}" for i in range(folds)]
    assert scored_from_blocks == list(range(folds))  # the validation rows were read where the conversion stored them
    conversions.clear()
    theirs = StockCrossValidator(**kwargs).fit(frames[kind])
    assert conversions.count("rows") == folds + 1  # one per fold and the refit
    _same_search(ours, theirs)


def test_train_validation_split_converts_once(data, conversions, scored_from_blocks):
    estimator = LogisticRegression(regParam=0.01)
    kwargs = dict(
        estimator=estimator,
        estimatorParamMaps=_grid(estimator),
        evaluator=BinaryClassificationEvaluator(),
        trainRatio=0.6,
        seed=9,
        collectSubModels=True,
    )
    ours = TrainValidationSplit(**kwargs).fit(data)
    assert conversions == ["fold ids", "subset 0"] and scored_from_blocks == [0]
    theirs = StockTrainValidationSplit(**kwargs).fit(data)
    np.testing.assert_allclose(ours.validationMetrics, theirs.validationMetrics, rtol=1e-7)
    np.testing.assert_allclose(coefficient_vector(ours.bestModel), coefficient_vector(theirs.bestModel), rtol=1e-9)
    for a, b in zip(ours.subModels, theirs.subModels):
        np.testing.assert_allclose(coefficient_vector(a), coefficient_vector(b), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    "evaluator",
    [
        lambda: BinaryClassificationEvaluator(weightCol="w"),
        pytest.param(lambda: RegressionEvaluator(labelCol="y"), marks=pytest.mark.full),
    ],
    ids=["weights-the-fit-did-not-read", "another-label"],
)
def test_validation_rows_the_conversion_lacks_are_read_from_the_fold(data, scored_from_blocks, evaluator):
    """An evaluator weighing the rows by a column the fit did not read, or reading another label: the stored rows
    lack it, so the fold is scored from its DataFrame, with the same metrics as pyspark's."""
    estimator = LogisticRegression()
    grid = _grid(estimator, (0.05,))  # elasticNetParam 0 and 0.5
    kwargs = dict(estimator=estimator, estimatorParamMaps=grid, evaluator=evaluator(), foldCol="fold")
    ours = CrossValidator(**kwargs).fit(data)
    assert scored_from_blocks == []
    theirs = StockCrossValidator(**kwargs).fit(data)
    np.testing.assert_allclose(ours.avgMetrics, theirs.avgMetrics, rtol=1e-9)


@pytest.mark.parametrize(
    "estimator,evaluator",
    [
        (lambda: LinearRegression(labelCol="y", weightCol="w"), lambda: RegressionEvaluator(labelCol="y")),
        (lambda: LogisticRegression(weightCol="w"), BinaryClassificationEvaluator),
    ],
    ids=["regression", "binary"],
)
def test_an_evaluator_without_weights_weighs_each_stored_row_1(data, scored_from_blocks, estimator, evaluator):
    """The fit reads weights and the evaluator none: the fold is scored from the stored rows, each weighing 1 as
    pyspark's evaluator weighs the fold's rows (the stored weights are the fit's, not the evaluator's)."""
    estimator = estimator()
    kwargs = dict(estimator=estimator, estimatorParamMaps=_grid(estimator, (0.05,)), evaluator=evaluator())
    ours = CrossValidator(**kwargs, foldCol="fold").fit(data)
    assert scored_from_blocks == [0, 1, 2]
    theirs = StockCrossValidator(**kwargs, foldCol="fold").fit(data)
    np.testing.assert_allclose(ours.avgMetrics, theirs.avgMetrics, rtol=1e-7)


@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_subset_is_the_conversion_of_the_training_rows(frames, kind):
    """A fold's subset holds the rows, order and statistics of a conversion of that fold's training rows."""
    data = frames[kind]
    arguments = LogisticRegression(weightCol="w")._conversion(data)
    whole = TrainingData.prepare(data, **arguments, fold=F.col("fold"))
    own = TrainingData.prepare(data.where("fold != 1"), **arguments)
    subset = whole.subset(1)
    try:
        assert [b[:2] for b in subset.blocks] == [b[:2] for b in own.blocks]
        a, b = subset.summary, own.summary
        assert (a.rows, a.n_features, a.label_integral) == (b.rows, b.n_features, b.label_integral)
        for field in ("weight_sum", "weight_sq_sum", "mean", "var_unbiased", "label_mean", "class_weights"):
            np.testing.assert_allclose(getattr(a, field), getattr(b, field), rtol=1e-12)
    finally:
        for d in (subset, own, whole):
            d.release()


@pytest.mark.parametrize(
    "fold_col, kwargs",
    [("fold_double", {}), pytest.param("fold", {"classWeight": "balanced"}, marks=pytest.mark.full)],
    ids=["fraction-fold-col", "class-weight"],
)
def test_searches_that_cannot_convert_once_convert_each_fold(data, conversions, fold_col, kwargs):
    estimator = LogisticRegression(**kwargs)
    grid = _grid(estimator, (0.05,))  # elasticNetParam 0 and 0.5
    cv = CrossValidator(estimator=estimator, estimatorParamMaps=grid, foldCol=fold_col, numFolds=3)
    ours = cv.setEvaluator(BinaryClassificationEvaluator()).fit(data)
    assert conversions == ["rows"] * 4
    theirs = StockCrossValidator(**{p.name: v for p, v in cv.extractParamMap().items()}).fit(data)
    np.testing.assert_allclose(ours.avgMetrics, theirs.avgMetrics, rtol=1e-9)


def test_a_fold_col_that_is_not_a_column_is_named(data):
    estimator = LogisticRegression()
    cv = CrossValidator(estimator=estimator, estimatorParamMaps=_grid(estimator), foldCol="fold_id", numFolds=3)
    with pytest.raises(ValueError, match="foldCol 'fold_id' is not a column of the dataset"):
        cv.setEvaluator(BinaryClassificationEvaluator()).fit(data)


def test_a_fold_col_out_of_range_is_pysparks_error(data, conversions):
    bad = data.withColumn("fold", F.when(F.col("y") > 2.5, F.lit(7)).otherwise(F.col("fold")))
    estimator = LogisticRegression()
    cv = CrossValidator(estimator=estimator, estimatorParamMaps=_grid(estimator), foldCol="fold", numFolds=3)
    with pytest.raises(Exception, match="[Ff]old number"):
        cv.setEvaluator(BinaryClassificationEvaluator()).fit(bad)
    assert conversions[0] == "fold ids"  # converted once, found the bad ids, returned to pyspark's folds


@pytest.fixture(scope="module")
def raw_columns(frames):
    """The dense frame's features as raw columns c0..c5 (what a VectorAssembler starts from), cached."""
    from pyspark.ml.functions import vector_to_array

    values = vector_to_array(F.col("features"))
    df = frames["dense"].select(*[values[j].alias(f"c{j}") for j in range(D)], "label", "w", "fold").cache()
    df.count()
    yield df
    df.unpersist()


def _assembled(estimator, prefix=()):
    from pyspark.ml import Pipeline
    from pyspark.ml.feature import VectorAssembler

    assembler = VectorAssembler(inputCols=[f"c{j}" for j in range(D)], outputCol="features")
    return Pipeline(stages=[*prefix, assembler, estimator])


@pytest.mark.parametrize(
    "cls, extra",
    [
        pytest.param(CrossValidator, {"foldCol": "fold"}, marks=pytest.mark.full, id="cv-fold-col"),
        pytest.param(CrossValidator, {"numFolds": 2}, id="cv-rand-folds"),
        pytest.param(TrainValidationSplit, {}, marks=pytest.mark.full, id="tvs"),
    ],
)
def test_a_pipeline_of_transformers_converts_once(raw_columns, conversions, scored_from_blocks, cls, extra):
    """Pipeline(VectorAssembler, LogisticRegression): the rows are assembled and converted once for every split and
    the refit. The folds and models are those of the bare estimator's search on the assembled rows; pyspark's
    search of the pipeline fits each map alone, and its metrics are the same (the maps are solved side by side, each
    from its own fit's start) and name the same best map."""
    from pyspark.ml import PipelineModel

    estimator = LogisticRegression(weightCol="w")
    pipeline = _assembled(estimator)
    kwargs = dict(estimatorParamMaps=_grid(estimator), evaluator=BinaryClassificationEvaluator(), seed=4)
    kwargs.update(collectSubModels=True, **extra)
    ours = cls(estimator=pipeline, **kwargs).fit(raw_columns)
    splits = kwargs.get("numFolds", 3) if cls is CrossValidator else 1
    assert conversions == ["fold ids"] + [f"subset {i}" for i in range(splits)]
    assert scored_from_blocks == list(range(splits))
    bare = cls(estimator=estimator, **kwargs).fit(pipeline.getStages()[0].transform(raw_columns))
    theirs = (StockCrossValidator if cls is CrossValidator else StockTrainValidationSplit)(
        estimator=pipeline, **kwargs
    ).fit(raw_columns)
    metric = "avgMetrics" if cls is CrossValidator else "validationMetrics"
    np.testing.assert_allclose(getattr(ours, metric), getattr(bare, metric), rtol=1e-12)
    np.testing.assert_allclose(getattr(ours, metric), getattr(theirs, metric), rtol=1e-9)
    assert np.argmax(getattr(ours, metric)) == np.argmax(getattr(theirs, metric))
    assert type(ours.bestModel) is PipelineModel
    assert [s.uid for s in ours.bestModel.stages[:-1]] == [s.uid for s in pipeline.getStages()[:-1]]
    np.testing.assert_allclose(coefficient_vector(ours.bestModel.stages[-1]), coefficient_vector(bare.bestModel))
    sub_ours = ours.subModels if cls is CrossValidator else [ours.subModels]
    sub_bare = bare.subModels if cls is CrossValidator else [bare.subModels]
    for fold_ours, fold_bare in zip(sub_ours, sub_bare):
        for a, b in zip(fold_ours, fold_bare):
            assert type(a) is PipelineModel and len(a.stages) == 2
            np.testing.assert_allclose(coefficient_vector(a.stages[-1]), coefficient_vector(b), rtol=1e-12)


def test_a_pipeline_stage_that_drops_the_draws_converts_each_fold(raw_columns, conversions, scored_from_blocks):
    """A stage that leaves out the column the folds are drawn from: each fold is converted on its own, and the
    search is still pyspark's."""
    from pyspark.ml.feature import SQLTransformer

    estimator = LogisticRegression()
    keep = ", ".join([f"c{j}" for j in range(D)] + ["label"])
    pipeline = _assembled(estimator, prefix=[SQLTransformer(statement=f"SELECT {keep} FROM __THIS__")])
    kwargs = dict(estimator=pipeline, estimatorParamMaps=_grid(estimator, (0.01, 0.2)), seed=4)
    kwargs.update(evaluator=BinaryClassificationEvaluator(), numFolds=2)
    ours = CrossValidator(**kwargs).fit(raw_columns)
    assert "fold ids" not in conversions and conversions.count("rows") == 3  # one per fold, then the refit
    theirs = StockCrossValidator(**kwargs).fit(raw_columns)  # cold fits of each map: the solvers' tolerance
    np.testing.assert_allclose(ours.avgMetrics, theirs.avgMetrics, rtol=1e-5)


class _SaysNothing(LogisticRegression):
    """This library's estimator that tells a search it allows nothing beyond ``fitMultiple``."""

    def searchSupport(self, dataset, paramMaps):
        from sparkml.base.search_support import NOT_SUPPORTED

        return NOT_SUPPORTED


def _plan_cases():
    from pyspark.ml import Pipeline
    from pyspark.ml.classification import LogisticRegression as StockLogisticRegression
    from pyspark.ml.feature import SQLTransformer, StandardScaler

    from sparkml.classification import KernelSVC

    class Subclassed(BinaryClassificationEvaluator):
        pass

    scaled = LogisticRegression(featuresCol="scaled")
    return {
        "bare": (LogisticRegression(), "fold", "converted once"),
        "random-folds": (LinearRegression(labelCol="y"), None, "converted once"),
        "class-weight": (LogisticRegression(classWeight="balanced"), "fold", "each split"),
        "fraction-fold-col": (LogisticRegression(), "fold_double", "each split"),
        "transformers": (
            Pipeline(stages=[SQLTransformer(statement="SELECT * FROM __THIS__"), LogisticRegression()]),
            "fold",
            "transformed once",
        ),
        "fitted-stage": (
            Pipeline(stages=[StandardScaler(inputCol="features", outputCol="scaled"), scaled]),
            "fold",
            "stages per split",
        ),
        "kernel-svc": (KernelSVC(), "fold", None),
        "pyspark-estimator": (StockLogisticRegression(), "fold", None),
        "says-nothing": (_SaysNothing(), "fold", None),
        "evaluator-subclass": (LogisticRegression(), "fold", Subclassed),
    }


_PLAN_CASES = ["bare", "random-folds", "class-weight", "fraction-fold-col", "transformers", "fitted-stage"]
_PLAN_CASES += ["kernel-svc", "pyspark-estimator", "says-nothing", "evaluator-subclass"]


@pytest.mark.parametrize("case", _PLAN_CASES)
def test_the_search_plan_is_decided_once_from_what_the_estimator_says(data, case):
    """``plan_search`` picks each route from the estimator's ``searchSupport`` (not its type), the grid, the
    evaluator and the folds; None is pyspark's own search. A subclass of this library's estimator that says it
    allows nothing is searched by pyspark's code, as a third party's would be."""
    from sparkml.tuning.plan import plan_search

    estimator, fold_col, route = _plan_cases()[case]
    evaluator = route() if isinstance(route, type) else BinaryClassificationEvaluator(labelCol="label")
    expected = None if isinstance(route, type) else route
    last = estimator.getStages()[-1] if hasattr(estimator, "getStages") else estimator
    grid = ParamGridBuilder().addGrid(last.regParam, [0.01, 0.1]).build()
    cv = CrossValidator(estimator=estimator, estimatorParamMaps=grid, numFolds=3, foldCol=fold_col or "")
    plan = plan_search(estimator, grid, evaluator, data, cv._fold_ids(data), fold_col or cv.uid + "_rand")
    try:
        assert (plan.route if plan is not None else None) == expected
        if plan is not None:
            assert (plan.once is not None) == (expected in ("converted once", "transformed once"))
            assert (plan.stages is not None) == (expected == "stages per split")
    finally:
        if plan is not None:
            plan.release()
