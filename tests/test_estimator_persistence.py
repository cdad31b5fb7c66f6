"""Estimators save and load as pyspark.ml's do, and a fitted model keeps its estimator's uid: an
unfitted Pipeline, a CrossValidator and a fitted CrossValidatorModel holding one of ours round-trip,
and the loaded CrossValidatorModel predicts what the fitted one did."""

import glob
import json
import os

import pytest
from pyspark.ml import Pipeline
from pyspark.ml.evaluation import BinaryClassificationEvaluator
from pyspark.ml.feature import VectorAssembler
from pyspark.ml.tuning import CrossValidator, CrossValidatorModel, ParamGridBuilder
from support.data_helpers import raw_columns_frame
from support.helpers import assert_same_outputs

from sparkml.classification import KernelSVC, LinearSVC, LogisticRegression
from sparkml.regression import LinearRegression

ESTIMATORS = {
    "LogisticRegression": lambda: LogisticRegression(
        regParam=0.1, elasticNetParam=0.2, maxIter=7, strategy="allreduce", dtype="float64", family="binomial"
    ),
    "LinearSVC": lambda: LinearSVC(regParam=0.01, threshold=0.3, localIter=4, strategy="averaging"),
    "LinearRegression": lambda: LinearRegression(solver="l-bfgs", epsilon=2.0, weightCol="w", numWorkers=2),
    "KernelSVC": lambda: KernelSVC(kernel="polynomial", degree=2, gamma=0.5, numLandmarks=50, probability=True),
}
MODULE = {
    "LogisticRegression": "classification",
    "LinearSVC": "classification",
    "KernelSVC": "classification",
    "LinearRegression": "regression",
}


def params_of(stage):
    """(uid, {name: value}) of every Param set or defaulted, as saved."""
    return stage.uid, {p.name: stage.getOrDefault(p) for p in stage.params if stage.isDefined(p)}


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_estimator_saves_and_loads_with_its_params(spark, tmp_path, name):
    est = ESTIMATORS[name]()
    path = str(tmp_path / name)
    est.save(path)
    loaded = type(est).load(path)
    assert type(loaded) is type(est)
    assert params_of(loaded) == params_of(est)
    assert loaded.isSet("strategy") == est.isSet("strategy")
    (metadata,) = glob.glob(os.path.join(path, "metadata", "part-*"))
    with open(metadata) as f:
        assert json.loads(f.readline())["class"] == f"sparkml.{MODULE[name]}.{name}"
    with pytest.raises(Exception, match="already exists"):
        est.save(path)  # as pyspark.ml: overwrite only when asked
    est.setMaxIter(3).write().overwrite().save(path)
    assert type(est).load(path).getMaxIter() == 3


@pytest.fixture(scope="module")
def raw(spark):
    df = raw_columns_frame(spark)
    yield df
    df.unpersist()


def _assembled(raw):
    return VectorAssembler(inputCols=["a", "b", "c"], outputCol="features").transform(raw)


@pytest.mark.parametrize("name", ["LogisticRegression", "LinearSVC"])
def test_the_model_keeps_the_estimator_uid(raw, name):
    est = {"LogisticRegression": LogisticRegression, "LinearSVC": LinearSVC}[name](maxIter=5)
    model = est.fit(_assembled(raw))
    assert model.uid == est.uid
    assert all(p.parent == est.uid for p in model.params)
    assert model.getMaxIter() == 5


def test_an_unfitted_pipeline_and_cross_validator_round_trip(spark, tmp_path):
    lr = LogisticRegression(regParam=0.05, strategy="allreduce")
    pipeline = Pipeline(stages=[VectorAssembler(inputCols=["a", "b", "c"], outputCol="features"), lr])
    pipeline.save(str(tmp_path / "pipeline"))
    loaded = Pipeline.load(str(tmp_path / "pipeline"))
    assert isinstance(loaded.getStages()[1], LogisticRegression)
    assert params_of(loaded.getStages()[1]) == params_of(lr)

    grid = ParamGridBuilder().addGrid(lr.regParam, [0.01, 0.1]).addGrid(lr.maxIter, [5, 20]).build()
    cv = CrossValidator(
        estimator=lr, estimatorParamMaps=grid, evaluator=BinaryClassificationEvaluator(), numFolds=3, seed=9
    )
    cv.save(str(tmp_path / "cv"))
    cv_loaded = CrossValidator.load(str(tmp_path / "cv"))
    est = cv_loaded.getEstimator()
    assert isinstance(est, LogisticRegression) and params_of(est) == params_of(lr)
    assert [{(p.parent, p.name): v for p, v in m.items()} for m in cv_loaded.getEstimatorParamMaps()] == [
        {(p.parent, p.name): v for p, v in m.items()} for m in grid
    ]
    assert cv_loaded.getNumFolds() == 3 and cv_loaded.getSeed() == 9


def test_a_fitted_cross_validator_model_round_trips_and_predicts_the_same(raw, tmp_path):
    df = _assembled(raw)
    lr = LogisticRegression(maxIter=30)
    grid = ParamGridBuilder().addGrid(lr.regParam, [0.01, 0.3]).build()
    cv_model = CrossValidator(
        estimator=lr, estimatorParamMaps=grid, evaluator=BinaryClassificationEvaluator(), numFolds=2, seed=4
    ).fit(df)
    assert cv_model.bestModel.uid == lr.uid
    path = str(tmp_path / "cv_model")
    cv_model.write().overwrite().save(path)
    loaded = CrossValidatorModel.load(path)
    assert isinstance(loaded.getEstimator(), LogisticRegression)
    assert loaded.avgMetrics == cv_model.avgMetrics
    # the best model is saved in MLlib's format, so pyspark loads it as its own (stock) model
    assert loaded.bestModel.uid == cv_model.bestModel.uid
    columns = ["rawPrediction", "probability", "prediction"]
    assert_same_outputs(cv_model.transform(df), loaded.transform(df), columns, atol=1e-12)
