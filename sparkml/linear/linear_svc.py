"""LinearSVC, a drop-in for pyspark.ml's.

Objective (MLlib's, W = sum of weights, lambda = regParam, s_j = std_j if standardization else 1):

    (1/W) sum_i w_i max(0, 1 - (2 y_i - 1) m_i) + lambda/2 sum_j (s_j beta_j)^2,  m_i = x_i.beta + b

The hinge loss is not differentiable at the kink, so, as MLlib does, OWL-QN (with no L1 term) and
its backtracking line search take the steps. Raw prediction [-m, m]; prediction 1 iff m > threshold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from pyspark.ml.classification import ClassificationModel, Classifier, _LinearSVCParams
from pyspark.ml.classification import LinearSVCModel as _StockModel
from pyspark.ml.linalg import DenseVector, Vectors, VectorUDT
from pyspark.sql.types import DoubleType, StructField, StructType

from sparkml.base.model import ConvertsToStock, HasCoefficientVector, KeepsTrainingSummary, ModelIO
from sparkml.base.params import HasClassWeight, HasTorchTrainingParams, declared_estimator, declares
from sparkml.base.summary import LinearSVCTrainingSummary, training_summary
from sparkml.base.validation import binary_labels
from sparkml.gpu import HingeLoss
from sparkml.linear.estimator import LinearEstimator, LinearProblem
from sparkml.params.estimators import LINEAR_SVC
from sparkml.scoring.dataframe import ScoresWithSpec
from sparkml.scoring.kinds import KINDS
from sparkml.scoring.spec import ScoringSpec

if TYPE_CHECKING:
    from pyspark.ml.linalg import Vector
    from typing_extensions import Self


@declares(*LINEAR_SVC)
class _Params(_LinearSVCParams, HasTorchTrainingParams, HasClassWeight):
    pass


@declared_estimator(LINEAR_SVC)
class LinearSVC(LinearEstimator, Classifier, _Params):
    """pyspark.ml's LinearSVC, trained with PyTorch kernels on the executors."""

    # <param-stubs>
    if TYPE_CHECKING:  # made from the Params' declarations (tools/write_param_stubs.py)

        def __init__(
            self,
            *,
            featuresCol: str = "features",
            labelCol: str = "label",
            predictionCol: str = "prediction",
            maxIter: int = 100,
            regParam: float = 0.0,
            tol: float = 1e-06,
            rawPredictionCol: str = "rawPrediction",
            fitIntercept: bool = True,
            standardization: bool = True,
            threshold: float = 0.0,
            weightCol: str | None = None,
            aggregationDepth: int = 2,
            maxBlockSizeInMB: float = 0.0,
            strategy: str = "auto",
            device: str = "auto",
            dtype: str = "float32",
            numWorkers: int = 0,
            localIter: int = 10,
            staleness: int = 3,
            topology: str = "ring",
            checkpointDir: str | None = None,
            checkpointInterval: int = 10,
            classWeight: str | dict[float, float] | None = None,
        ) -> None: ...

        def setMaxIter(self, value: int) -> Self: ...

        def setRegParam(self, value: float) -> Self: ...

        def setTol(self, value: float) -> Self: ...

        def setFitIntercept(self, value: bool) -> Self: ...

        def setStandardization(self, value: bool) -> Self: ...

        def setThreshold(self, value: float) -> Self: ...

        def setWeightCol(self, value: str) -> Self: ...

        def setAggregationDepth(self, value: int) -> Self: ...

        def setMaxBlockSizeInMB(self, value: float) -> Self: ...

    # </param-stubs>

    def _problem(self, s):
        binary_labels(s, self.getLabelCol())
        return LinearProblem(HingeLoss(fit_intercept=self.getFitIntercept()), 1, reg_l2=self.getRegParam(), owlqn=True)

    def _model(self, beta, b, problem):
        return LinearSVCModel(Vectors.dense(beta[0]), float(b[0]))


class LinearSVCModel(
    HasCoefficientVector, ClassificationModel, _Params, ModelIO, KeepsTrainingSummary, ConvertsToStock, ScoresWithSpec
):
    """A fitted LinearSVC: ``coefficients``, ``intercept``, rawPrediction and prediction columns."""

    _java_class = "org.apache.spark.ml.classification.LinearSVCModel"
    _stock_class = _StockModel

    def __init__(self, coefficients=None, intercept=0.0) -> None:
        super().__init__()
        self._coefficients, self._intercept = coefficients, float(intercept)

    @property
    def numClasses(self) -> int:
        return 2

    def setThreshold(self, value: float) -> Self:
        return self._set(threshold=value)

    def predictRaw(self, value: Vector) -> DenseVector:
        m = self._margin(value)
        return Vectors.dense([-m, m])

    def predict(self, value: Vector) -> float:
        return float(self._margin(value) > self.getThreshold())

    def _build_scoring_spec(self) -> ScoringSpec:
        return ScoringSpec(
            KINDS["svc"], self._coefficients.toArray(), np.array([self._intercept]), self.getThreshold(), num_classes=2
        )

    def _transform(self, dataset):
        return self._stock_transform(dataset, lambda: self._score_in_python(dataset))

    _data_schema = StructType([StructField("coefficients", VectorUDT()), StructField("intercept", DoubleType())])

    def _data_frame(self, spark):
        return spark.createDataFrame([(self._coefficients, self._intercept)], self._data_schema)

    @classmethod
    def _data_shapes(cls, row):
        return {"coefficients": ("numFeatures",)}

    @classmethod
    def _from_data(cls, row):
        return cls(DenseVector(row.coefficients.toArray()), row.intercept)

    def _java_args(self):
        return [self._coefficients, self._intercept]

    def _training_summary(self, record, dataset):
        return training_summary(LinearSVCTrainingSummary, self.toSpark(), dataset, record)
