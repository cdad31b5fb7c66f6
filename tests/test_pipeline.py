"""Our estimators inside pyspark.ml Pipelines and CrossValidator, and the best PipelineModel saved,
loaded with ``PipelineModel.load`` and transforming exactly as before."""

import numpy as np
import pytest
from pyspark.ml import Pipeline, PipelineModel
from pyspark.ml.evaluation import BinaryClassificationEvaluator, MulticlassClassificationEvaluator, RegressionEvaluator
from pyspark.ml.feature import VectorAssembler
from pyspark.ml.tuning import CrossValidator, CrossValidatorModel, ParamGridBuilder
from support.data_helpers import raw_columns_frame
from support.helpers import assert_same_outputs

from sparkml.classification import KernelSVC, KernelSVCModel, LogisticRegression, LogisticRegressionModel
from sparkml.regression import LinearRegression, LinearRegressionModel

INPUTS = ["a", "b", "c"]


@pytest.fixture(scope="module")
def raw(spark):
    """id, three raw double columns, a binary, a 3-class and a real-valued target (no vectors yet)."""
    df = raw_columns_frame(spark)
    yield df
    df.unpersist()


def cross_validate(raw, estimator, grid_values, evaluator):
    pipeline = Pipeline(stages=[VectorAssembler(inputCols=INPUTS, outputCol="features"), estimator])
    grid = ParamGridBuilder().addGrid(estimator.regParam, grid_values).build()
    cv = CrossValidator(estimator=pipeline, estimatorParamMaps=grid, evaluator=evaluator, numFolds=2, seed=3)
    return cv.fit(raw)


def check_save_load(raw, best, path, columns, model_types):
    """The best PipelineModel saves, loads through PipelineModel.load and transforms identically."""
    best.write().overwrite().save(path)
    loaded = PipelineModel.load(path)
    assert [type(s).__name__ for s in loaded.stages] == [type(s).__name__ for s in best.stages]
    assert isinstance(loaded.stages[-1], model_types)
    assert loaded.stages[-1].uid == best.stages[-1].uid
    assert loaded.stages[-1].getRegParam() == best.stages[-1].getRegParam()
    before, after = best.transform(raw), loaded.transform(raw)
    assert after.columns == before.columns
    assert_same_outputs(before, after, columns, atol=1e-12)
    return loaded


@pytest.mark.compat  # a Pipeline in pyspark's CrossValidator, on every Spark line
def test_logistic_regression_in_cross_validator(raw, tmp_path):
    from pyspark.ml.classification import LogisticRegressionModel as StockModel

    lr = LogisticRegression(maxIter=50)
    evaluator = BinaryClassificationEvaluator()
    cv_model = cross_validate(raw, lr, [0.01, 0.5], evaluator)
    assert isinstance(cv_model, CrossValidatorModel) and len(cv_model.avgMetrics) == 2
    assert all(0.8 < auc <= 1.0 for auc in cv_model.avgMetrics)
    best = cv_model.bestModel
    assert isinstance(best, PipelineModel)
    model = best.stages[-1]
    assert isinstance(model, LogisticRegressionModel)
    assert model.getRegParam() == [0.01, 0.5][int(np.argmax(cv_model.avgMetrics))]
    assert model.numFeatures == 3 and model.hasSummary
    assert evaluator.evaluate(best.transform(raw)) > 0.8
    loaded = check_save_load(
        raw,
        best,
        str(tmp_path / "best"),
        ["rawPrediction", "probability", "prediction"],
        (LogisticRegressionModel, StockModel),
    )
    np.testing.assert_array_equal(loaded.stages[-1].coefficients.toArray(), model.coefficients.toArray())


def test_linear_regression_in_cross_validator(raw, tmp_path):
    from pyspark.ml.regression import LinearRegressionModel as StockModel

    lr = LinearRegression(labelCol="y")
    evaluator = RegressionEvaluator(labelCol="y", metricName="rmse")
    cv_model = cross_validate(raw, lr, [0.0, 1.0], evaluator)
    assert len(cv_model.avgMetrics) == 2
    assert cv_model.avgMetrics[0] < cv_model.avgMetrics[1]  # rmse: the unregularized fit is the better one here
    best = cv_model.bestModel
    model = best.stages[-1]
    assert isinstance(model, LinearRegressionModel) and model.getRegParam() == 0.0
    np.testing.assert_allclose(model.coefficients.toArray(), [0.8, 1.5, -2.0], atol=0.1)
    assert evaluator.evaluate(best.transform(raw)) < 0.4
    check_save_load(raw, best, str(tmp_path / "best"), ["prediction"], (LinearRegressionModel, StockModel))


def test_multiclass_logistic_regression_in_cross_validator(raw, tmp_path):
    from pyspark.ml.classification import LogisticRegressionModel as StockModel

    lr = LogisticRegression(labelCol="label3", maxIter=50)
    evaluator = MulticlassClassificationEvaluator(labelCol="label3", metricName="f1")
    cv_model = cross_validate(raw, lr, [0.001, 0.3], evaluator)
    assert len(cv_model.avgMetrics) == 2 and all(0.5 < f1 <= 1.0 for f1 in cv_model.avgMetrics)
    assert cv_model.avgMetrics[0] > max(0.75, cv_model.avgMetrics[1])  # heavy regularization costs accuracy
    best = cv_model.bestModel
    model = best.stages[-1]
    assert isinstance(model, LogisticRegressionModel) and model.numClasses == 3 and model.getRegParam() == 0.001
    assert model.coefficientMatrix.numRows == 3
    assert (
        MulticlassClassificationEvaluator(labelCol="label3", metricName="accuracy").evaluate(best.transform(raw)) > 0.6
    )
    check_save_load(
        raw,
        best,
        str(tmp_path / "best"),
        ["rawPrediction", "probability", "prediction"],
        (LogisticRegressionModel, StockModel),
    )


def test_kernel_svc_in_cross_validator(raw, tmp_path):
    svc = KernelSVC(labelCol="label3", numLandmarks=60, probability=True, strategy="allreduce")
    evaluator = MulticlassClassificationEvaluator(labelCol="label3", metricName="accuracy")
    cv_model = cross_validate(raw, svc, [1e-3, 1.0], evaluator)
    assert len(cv_model.avgMetrics) == 2
    assert cv_model.avgMetrics[0] > max(0.75, cv_model.avgMetrics[1])  # regParam 1 = C 1/n: far too smooth
    best = cv_model.bestModel
    model = best.stages[-1]
    assert isinstance(model, KernelSVCModel) and model.numClasses == 3 and model.getRegParam() == 1e-3
    assert evaluator.evaluate(best.transform(raw)) > 0.75
    loaded = check_save_load(
        raw, best, str(tmp_path / "best"), ["rawPrediction", "probability", "prediction"], (KernelSVCModel,)
    )
    np.testing.assert_array_equal(loaded.stages[-1].plattCoefficients.toArray(), model.plattCoefficients.toArray())
