"""``model.summary`` and ``model.evaluate(df)`` are pyspark.ml's own summary classes and agree with
those of MLlib's model fitted side by side on the same data: every public attribute and method of
the class (metrics to 1e-9, DataFrames row for row to 1e-8), the objective history included.

Both sides fit to tol 1e-12 so that they stop at the same optimum, and ours stores the features in
float64: with the default float32 storage the coefficients (and so every metric) agree to about
1e-7 instead. The Spark Connect session checks the same walk (connect_fits.py, test_connect.py).
"""

import numpy as np
import pytest
from pyspark.ml import classification as stock_classification
from pyspark.ml import regression as stock_regression
from pyspark.sql import functions as F
from support.helpers import training_summary
from support.model_kinds import KINDS
from support.summary_walk import summary_differences

TIGHT = {"tol": 1e-12, "maxIter": 1000}
CASES = {  # name: (model kind, extra Params, training summary class, evaluation summary class)
    "lr_binary": (
        "lr_binary",
        TIGHT,
        stock_classification.BinaryLogisticRegressionTrainingSummary,
        stock_classification.BinaryLogisticRegressionSummary,
    ),
    "lr_multinomial": (
        "lr_multinomial",
        TIGHT,
        stock_classification.LogisticRegressionTrainingSummary,
        stock_classification.LogisticRegressionSummary,
    ),
    "svc": ("svc", {}, stock_classification.LinearSVCTrainingSummary, stock_classification.LinearSVCSummary),
    "linreg_normal": (
        "linreg",
        {"solver": "normal"},
        stock_regression.LinearRegressionTrainingSummary,
        stock_regression.LinearRegressionSummary,
    ),
    "linreg_normal_weighted": (
        "linreg",
        {"solver": "normal", "weightCol": "w"},
        stock_regression.LinearRegressionTrainingSummary,
        stock_regression.LinearRegressionSummary,
    ),
    "linreg_lbfgs": (
        "linreg",
        {"solver": "l-bfgs", **TIGHT},
        stock_regression.LinearRegressionTrainingSummary,
        stock_regression.LinearRegressionSummary,
    ),
}


@pytest.fixture(scope="module")
def frames(data):
    weighted = data.withColumn("w", 1.0 + (F.col("id") % 3).cast("double") / 2).cache()
    train, test = weighted.where(F.col("id") % 4 != 0).cache(), weighted.where(F.col("id") % 4 == 0).cache()
    yield train, test
    for df in (weighted, train, test):
        df.unpersist()


@pytest.fixture(scope="module")
def side_by_side(frames):
    cache = {}

    def get(case):
        if case not in cache:
            kind, extra, _, _ = CASES[case]
            k, params = KINDS[kind], {**KINDS[kind].params, **extra}
            cache[case] = (
                k.estimator(**params, dtype="float64").fit(frames[0]),
                k.stock_estimator(**params).fit(frames[0]),
            )
        return cache[case]

    return get


@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=pytest.mark.compat) if c != "svc" else c for c in sorted(CASES)]
)  # the summary classes on every Spark line (LinearSVC's by its evaluate test: its fit here is the slowest)
def test_training_summary_is_mllibs(side_by_side, case):
    ours, theirs = (training_summary(m) for m in side_by_side(case))
    cls = CASES[case][2]
    assert isinstance(ours, cls) and isinstance(theirs, cls)
    diffs, compared = summary_differences(ours, theirs, cls)
    assert diffs == {} and compared >= 17, diffs
    np.testing.assert_allclose(ours.objectiveHistory, theirs.objectiveHistory, rtol=1e-9, atol=1e-12)
    assert ours.totalIterations == theirs.totalIterations


@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=pytest.mark.compat) if c == "svc" else c for c in sorted(CASES)]
)
def test_evaluate_is_mllibs(side_by_side, frames, case):
    ours, theirs = (m.evaluate(frames[1]) for m in side_by_side(case))
    cls = CASES[case][3]
    assert type(ours) is cls and type(theirs) is cls
    diffs, compared = summary_differences(ours, theirs, cls)
    assert diffs == {} and compared >= 15, diffs
    assert ours.predictions.count() == frames[1].count()


def test_standard_errors_are_the_normal_solvers_only(side_by_side):
    """MLlib gives standard errors, t and p values for the normal solver's fit only; the walk above
    compared them (and their error elsewhere). Here: they are real numbers, not both errors."""
    summary = training_summary(side_by_side("linreg_normal")[0])
    se, t, p = (np.array(v) for v in (summary.coefficientStandardErrors, summary.tValues, summary.pValues))
    assert se.shape == t.shape == p.shape == (5,) and np.all(se > 0) and np.all((p >= 0) & (p <= 1))
    with pytest.raises(Exception, match="No Std. Error"):
        training_summary(side_by_side("linreg_lbfgs")[0]).coefficientStandardErrors


def test_linear_svc_summary_is_a_method_and_a_property(side_by_side):
    """pyspark's ``LinearSVCModel.summary`` is a method; code that calls it, or reads it as the other
    models' property, both work."""
    model = side_by_side("svc")[0]
    assert model.summary() is model.summary
    assert model.summary().accuracy == model.summary.accuracy


@pytest.mark.parametrize("label", [pytest.param("label", marks=pytest.mark.compat), "label3"])
def test_kernel_svc_summary_is_mllibs_classification_summary(frames, label):
    """KernelSVC (no MLlib twin): pyspark.ml's binary / multi-class classification summary over its
    predictions, computed by MLlib's summary code; checked against scikit-learn's metrics of the
    same predictions."""
    from pyspark.ml.classification import _BinaryClassificationSummary, _ClassificationSummary, _TrainingSummary
    from sklearn import metrics

    from sparkml.classification import KernelSVC

    train, test = frames
    model = KernelSVC(labelCol=label, numLandmarks=60, gamma=0.3, weightCol="w").fit(train)
    summary, evaluation = model.summary, model.evaluate(test)
    assert isinstance(summary, _ClassificationSummary) and isinstance(summary, _TrainingSummary)
    assert not isinstance(evaluation, _TrainingSummary)
    assert summary.objectiveHistory == model.summaries[0].objectiveHistory
    for s, df in ((summary, train), (evaluation, test)):
        rows = model.transform(df).select(label, "w", "prediction", "rawPrediction").collect()
        y, w, pred = (np.array([r[i] for r in rows]) for i in range(3))
        assert s.accuracy == pytest.approx(metrics.accuracy_score(y, pred, sample_weight=w), abs=1e-12)
        np.testing.assert_allclose(
            s.precisionByLabel, metrics.precision_score(y, pred, average=None, sample_weight=w), atol=1e-12
        )
        assert s.weightedRecall == pytest.approx(
            metrics.recall_score(y, pred, average="weighted", sample_weight=w), abs=1e-12
        )
        if label == "label":
            assert isinstance(s, _BinaryClassificationSummary)
            score = np.array([r[3][1] for r in rows])
            assert s.areaUnderROC == pytest.approx(metrics.roc_auc_score(y, score, sample_weight=w), abs=1e-9)
            assert s.roc.count() >= 3
