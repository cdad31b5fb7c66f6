"""Training summaries that are pyspark.ml's own summary classes.

A fitted model's ``summary`` is an instance of the pyspark.ml class MLlib's model returns
(``BinaryLogisticRegressionTrainingSummary``, ``LogisticRegressionTrainingSummary``,
``LinearSVCTrainingSummary``, ``LinearRegressionTrainingSummary``), so ``isinstance`` checks in user
code hold. Two sources feed it:

* every metric and DataFrame (``predictions``, ``roc``, ``pr``, ``areaUnderROC``, ``accuracy``,
  ``r2``, ``residuals``, ...) is MLlib's: the stock model with the same coefficients and Params
  (``ConvertsToStock.toSpark``) evaluates the training DataFrame in Spark, exactly as MLlib's
  ``model.evaluate(df)`` does, in classic and Spark Connect sessions;
* ``objectiveHistory`` and ``totalIterations`` are this library's optimizer's record (the objective
  MLlib reports: scaled loss plus penalty, the initial point first).

``LinearRegression``'s ``normal`` solver adds what MLlib's normal solver adds: with
D = diag((A^T W A)^-1) (A = [X, 1], in the user's units, the L2 term included as MLlib includes it)
and sigma^2 = RSS / degreesOfFreedom (RSS weighted when a weight column is set),

    coefficientStandardErrors_j = sqrt(D_j sigma^2),  tValues_j = estimate_j / se_j,
    pValues_j = 2 (1 - F_t(|t_j|; degreesOfFreedom))     (F_t: Student's t CDF)

for the coefficients, then the intercept. Other solvers raise as MLlib's do.

KernelSVC has no MLlib twin. Its summaries (``KernelSVCSummary`` for two classes, with the curves
of the decision value ``rawPrediction``, as ``LinearSVCSummary``; ``KernelSVCMulticlassSummary``
otherwise, and their ``...TrainingSummary`` forms) are pyspark.ml's binary / multi-class
classification summaries computed by MLlib's own summary code in the JVM over this model's
predictions: classic sessions only (a Spark Connect server builds summaries of its own models only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from pyspark.ml import classification as _classification
from pyspark.ml import regression as _regression
from pyspark.ml.classification import _BinaryClassificationSummary, _ClassificationSummary, _TrainingSummary

if TYPE_CHECKING:
    from typing_extensions import Self

    from sparkml.optim.iterations import TrainingSummary


class _OptimizerRecord:
    """``objectiveHistory``, ``totalIterations`` (and ``converged``, ``message``, ``seconds``,
    ``iterationSeconds``) from this library's optimizer; callable, because pyspark's
    ``LinearSVCModel.summary`` is a method where its other models' is a property."""

    _record: TrainingSummary  # set by the function that makes the summary

    @property
    def objectiveHistory(self) -> list[float]:
        return list(self._record.objectiveHistory)

    @property
    def totalIterations(self) -> int:
        return self._record.totalIterations

    @property
    def converged(self) -> bool:
        return self._record.converged

    @property
    def message(self) -> str:
        return self._record.message

    @property
    def seconds(self) -> float:
        return self._record.seconds

    @property
    def iterationSeconds(self) -> list[float]:
        return list(self._record.iterationSeconds)

    def __call__(self) -> Self:
        return self


class BinaryLogisticRegressionTrainingSummary(
    _OptimizerRecord, _classification.BinaryLogisticRegressionTrainingSummary
):
    """pyspark.ml's binary logistic regression training summary."""


class LogisticRegressionTrainingSummary(_OptimizerRecord, _classification.LogisticRegressionTrainingSummary):
    """pyspark.ml's multinomial logistic regression training summary."""


class LinearSVCTrainingSummary(_OptimizerRecord, _classification.LinearSVCTrainingSummary):
    """pyspark.ml's LinearSVC training summary."""


class LinearRegressionTrainingSummary(_OptimizerRecord, _regression.LinearRegressionTrainingSummary):
    """pyspark.ml's linear regression training summary, with the normal solver's standard errors."""

    _diag_inv_atwa: np.ndarray | None = None  # diag((A^T W A)^-1), coefficients then intercept; None: not available
    _estimate: np.ndarray | None = None  # the coefficients, then the intercept when fitted
    _weight_col: str | None  # the weight column's name, None when every row weighs 1

    @property
    def coefficientStandardErrors(self):
        if self._diag_inv_atwa is None:
            return super().coefficientStandardErrors  # MLlib's error: no standard errors for this solver
        return list(np.sqrt(self._diag_inv_atwa * self._residual_sum_of_squares() / self.degreesOfFreedom))

    @property
    def tValues(self):
        if self._diag_inv_atwa is None:
            return super().tValues
        return list(self._estimate / np.asarray(self.coefficientStandardErrors))

    @property
    def pValues(self):
        if self._diag_inv_atwa is None:
            return super().pValues
        from scipy.stats import t

        return list(2.0 * (1.0 - t.cdf(np.abs(self.tValues), self.degreesOfFreedom)))

    def _residual_sum_of_squares(self):
        weight = self._weight_col
        if not weight:
            return self.meanSquaredError * self.numInstances
        from pyspark.sql import functions as F

        r = F.col(self.labelCol) - F.col(self.predictionCol)
        row = self.predictions.select(F.sum(r * r * F.col(weight))).first()
        assert row is not None  # an aggregation's one row
        return float(row[0])


class GeneralizedLinearRegressionTrainingSummary(_regression.GeneralizedLinearRegressionTrainingSummary):
    """pyspark.ml's GLR training summary where MLlib cannot build it (Spark Connect: the server's copy of the
    model has no parent estimator, no training summary): MLlib's evaluation of the stock model on the training
    rows, with IRLS's iteration count, solver and D = diag((A^T W A)^-1) from the fit and MLlib's formulas,

        coefficientStandardErrors_j = sqrt(dispersion D_j),  tValues_j = estimate_j / se_j,
        pValues_j = 2 (1 - Phi(|t_j|)) (binomial, poisson) or 2 (1 - F_t(|t_j|; residualDegreeOfFreedom)),

    for the coefficients, then the intercept. Without D (the L-BFGS / OWL-QN fits) they raise as MLlib's do."""

    _numIterations: int
    _solver: str
    _diag_inv_atwa: np.ndarray | None
    _estimate: np.ndarray  # the coefficients, then the intercept when fitted
    _family_name: str  # the family, lower case

    @property
    def numIterations(self) -> int:
        return self._numIterations

    @property
    def solver(self) -> str:
        return self._solver

    def _need_standard_errors(self):
        if self._diag_inv_atwa is None:
            from pyspark.errors import UnsupportedOperationException

            raise UnsupportedOperationException(
                "No Std. Error of coefficients available for this GeneralizedLinearRegressionModel"
            )

    @property
    def coefficientStandardErrors(self) -> list[float]:
        self._need_standard_errors()
        return list(np.sqrt(np.asarray(self._diag_inv_atwa) * self.dispersion))

    @property
    def tValues(self) -> list[float]:
        self._need_standard_errors()
        return list(self._estimate / np.asarray(self.coefficientStandardErrors))

    @property
    def pValues(self) -> list[float]:
        from scipy.stats import norm, t

        t_abs = np.abs(self.tValues)
        if self._family_name in ("binomial", "poisson"):
            return list(2.0 * (1.0 - norm.cdf(t_abs)))
        return list(2.0 * (1.0 - t.cdf(t_abs, self.residualDegreeOfFreedom)))


class KernelSVCSummary(_BinaryClassificationSummary):
    """A two-class KernelSVC's evaluation: pyspark.ml's binary classification summary, score =
    ``rawPrediction`` (the decision value)."""


class KernelSVCTrainingSummary(_OptimizerRecord, KernelSVCSummary, _TrainingSummary):
    """A two-class KernelSVC's training summary; the record is its Newton solve's."""


class KernelSVCMulticlassSummary(_ClassificationSummary):
    """A multi-class KernelSVC's evaluation: pyspark.ml's multi-class classification summary."""


class KernelSVCMulticlassTrainingSummary(_OptimizerRecord, KernelSVCMulticlassSummary, _TrainingSummary):
    """A multi-class KernelSVC's training summary; the record is the first one-vs-rest problem's."""


def jvm_classification_summary(model, dataset, record=None):
    """MLlib's classification summary over ``model.transform(dataset)`` (classic sessions): the
    binary one (``LinearSVCSummaryImpl``, scored by ``rawPrediction``) for two classes, else the
    multi-class one. With the optimizer's ``record``: the training-summary class."""
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is None or not hasattr(dataset, "_jdf"):
        raise NotImplementedError(
            f"{type(model).__name__}'s summary metrics are computed by MLlib in the JVM: they need a classic "
            "session (in Spark Connect, use pyspark.ml.evaluation's evaluators on transform())"
        )
    predictions = model.transform(dataset)._jdf
    weight = (model.getOrDefault("weightCol") if model.isDefined("weightCol") else None) or ""
    assert sc._jvm is not None  # set while a SparkContext is active
    jvm = sc._jvm.org.apache.spark.ml.classification
    cls: type[_ClassificationSummary]
    if model.numClasses == 2:
        java = jvm.LinearSVCSummaryImpl(
            predictions, model.getRawPredictionCol(), model.getPredictionCol(), model.getLabelCol(), weight
        )
        cls = KernelSVCSummary if record is None else KernelSVCTrainingSummary
    else:
        java = jvm.MultilayerPerceptronClassificationSummaryImpl(
            predictions, model.getPredictionCol(), model.getLabelCol(), weight
        )
        cls = KernelSVCMulticlassSummary if record is None else KernelSVCMulticlassTrainingSummary
    summary = cls(java)
    if isinstance(summary, _OptimizerRecord):  # a training summary: ``record`` is given
        summary._record = record
    return summary


def training_summary(cls, stock, dataset, record, **attributes):
    """``cls`` (one of the classes above) over MLlib's evaluation of ``stock`` (the stock model) on
    ``dataset``, with the optimizer's ``record`` and ``attributes`` set on it."""
    summary = cls(stock._call_java("evaluate", dataset))
    summary._record = record
    for name, value in attributes.items():
        setattr(summary, name, value)
    summary.__source_transformer__ = stock  # keeps a Spark Connect server's model alive with the summary
    return summary
