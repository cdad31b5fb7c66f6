"""LogisticRegression (binomial and multinomial), a drop-in for pyspark.ml's.

Objective (MLlib's, W = sum of weights, lambda = regParam, a = elasticNetParam):

    binomial:     (1/W) sum_i w_i [log(1 + e^{m_i}) - y_i m_i],  m_i = x_i.beta + b
    multinomial:  (1/W) sum_i w_i [logsumexp_k M_ik - M_{i,y_i}],  M_i = B x_i + b
    + lambda (1 - a)/2 sum (s_j beta_j)^2 + lambda a sum s_j |beta_j|   (s_j = std_j if standardization)

trained in MLlib's scaled and centered parametrization (``sparkml.optim.linear_objective``) with L-BFGS, or
OWL-QN when a * lambda > 0. Initial intercept log(W_1 / W_0) (binomial) or centered log(1 + W_k).

Bound constraints (``lowerBoundsOnCoefficients`` <= beta <= ``upperBoundsOnCoefficients``, (K, d)
matrices, and ``lowerBoundsOnIntercepts`` <= b <= ``upperBoundsOnIntercepts``, (K,) vectors;
``linear.bounds``), as MLlib: L2 regularization only, L-BFGS-B over the box in the scaled space, the
start clipped into it, no virtual centering when an intercept bound is finite, and a multinomial
model's coefficients and intercepts left as fitted (no centering: it could leave the box).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from pyspark import keyword_only
from pyspark.ml.classification import LogisticRegressionModel as _StockModel
from pyspark.ml.classification import (
    ProbabilisticClassificationModel,
    ProbabilisticClassifier,
    _LogisticRegressionParams,
)
from pyspark.ml.linalg import DenseMatrix, DenseVector, MatrixUDT, Vectors, VectorUDT
from pyspark.sql.types import BooleanType, IntegerType, StructField, StructType

from sparkml.base.model import ConvertsToStock, KeepsTrainingSummary, ModelIO
from sparkml.base.params import HasClassWeight, HasTorchTrainingParams, declared_estimator, declares
from sparkml.base.summary import (
    BinaryLogisticRegressionTrainingSummary,
    LogisticRegressionTrainingSummary,
    training_summary,
)
from sparkml.base.validation import BOUND_PARAMS, check_bounds_params, classification_labels
from sparkml.gpu import LogisticLoss, SoftmaxLoss
from sparkml.linear.bounds import coefficient_bounds
from sparkml.linear.estimator import LinearEstimator, LinearProblem
from sparkml.params.estimators import LOGISTIC_REGRESSION
from sparkml.scoring.dataframe import ScoresWithSpec
from sparkml.scoring.kinds import KINDS
from sparkml.scoring.spec import ScoringSpec, logistic_raw_threshold

if TYPE_CHECKING:
    from pyspark.ml.linalg import Matrix, Vector
    from typing_extensions import Self


@declares(*LOGISTIC_REGRESSION)
class _Params(_LogisticRegressionParams, HasTorchTrainingParams, HasClassWeight):
    pass


@declared_estimator(LOGISTIC_REGRESSION)
class LogisticRegression(LinearEstimator, ProbabilisticClassifier, _Params):
    """pyspark.ml's LogisticRegression, trained with PyTorch kernels on the executors.

    Same Params and defaults as ``pyspark.ml.classification.LogisticRegression`` plus ``strategy``,
    ``device`` and ``dtype``; ``setInitialModel`` warm-starts from a previous model.
    """

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
            elasticNetParam: float = 0.0,
            tol: float = 1e-06,
            fitIntercept: bool = True,
            threshold: float = 0.5,
            thresholds: list[float] | None = None,
            probabilityCol: str = "probability",
            rawPredictionCol: str = "rawPrediction",
            standardization: bool = True,
            weightCol: str | None = None,
            aggregationDepth: int = 2,
            family: str = "auto",
            lowerBoundsOnCoefficients: Matrix | None = None,
            upperBoundsOnCoefficients: Matrix | None = None,
            lowerBoundsOnIntercepts: Vector | None = None,
            upperBoundsOnIntercepts: Vector | None = None,
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

        def setElasticNetParam(self, value: float) -> Self: ...

        def setTol(self, value: float) -> Self: ...

        def setFitIntercept(self, value: bool) -> Self: ...

        def setStandardization(self, value: bool) -> Self: ...

        def setWeightCol(self, value: str) -> Self: ...

        def setAggregationDepth(self, value: int) -> Self: ...

        def setFamily(self, value: str) -> Self: ...

        def setLowerBoundsOnCoefficients(self, value: Matrix) -> Self: ...

        def setUpperBoundsOnCoefficients(self, value: Matrix) -> Self: ...

        def setLowerBoundsOnIntercepts(self, value: Vector) -> Self: ...

        def setUpperBoundsOnIntercepts(self, value: Vector) -> Self: ...

        def setMaxBlockSizeInMB(self, value: float) -> Self: ...

    # </param-stubs>

    @keyword_only
    def setParams(self, **kwargs: Any) -> Self:
        self._set(**kwargs)
        self._checkThresholdConsistency()
        return self

    def _check_params(self):
        super()._check_params()
        check_bounds_params(self)

    def _bounded_checkpoint_refusal(self):
        if any(self.isSet(name) for name in BOUND_PARAMS):
            return "bound-constrained fits (L-BFGS-B) write no checkpoints (their averaging rounds do)"
        return None

    def _problem(self, s):
        family = self.getFamily()
        num_classes = classification_labels(s, self.getLabelCol(), family)
        multinomial = family == "multinomial" or num_classes > 2
        k = num_classes if multinomial else 1
        fit_intercept = self.getFitIntercept()
        loss = (
            SoftmaxLoss(n_classes=k, fit_intercept=fit_intercept)
            if multinomial
            else LogisticLoss(fit_intercept=fit_intercept)
        )
        b = np.zeros(k)
        if fit_intercept:  # MLlib's start: the intercept(s) of the class frequencies
            hist = np.pad(s.class_weights, (0, max(0, num_classes - len(s.class_weights))))
            b = np.log1p(hist[:k]) - np.log1p(hist[:k]).mean() if multinomial else np.array([np.log(hist[1] / hist[0])])
        lam, a = self.getRegParam(), self.getElasticNetParam()
        box = coefficient_bounds(self, k, s.n_features)
        return LinearProblem(
            loss,
            k,
            reg_l2=lam * (1 - a),
            reg_l1=lam * a,
            start=(np.zeros((k, s.n_features)), b),
            context=(num_classes, multinomial),
            bounds=box,
            center=box is None or not box.bounds_intercepts(),
        )

    def _model(self, beta, b, problem):
        num_classes, multinomial = problem.context
        k = problem.n_outputs
        if multinomial and problem.bounds is None:  # MLlib centers neither under bounds
            b = b - b.mean()  # intercepts are never penalized: MLlib reports the centered ones
            if self.getRegParam() == 0:
                beta = beta - beta.mean(axis=0)  # unregularized: MLlib's identifiable (centered) choice
        return LogisticRegressionModel(
            DenseMatrix(k, beta.shape[1], beta.ravel(), True), Vectors.dense(b), num_classes, multinomial
        )


class LogisticRegressionModel(
    ProbabilisticClassificationModel, _Params, ModelIO, KeepsTrainingSummary, ConvertsToStock, ScoresWithSpec
):
    """A fitted LogisticRegression: MLlib's attributes, output columns and file layout."""

    _java_class = "org.apache.spark.ml.classification.LogisticRegressionModel"
    _stock_class = _StockModel

    def __init__(self, coefficientMatrix=None, interceptVector=None, numClasses=2, isMultinomial=False) -> None:
        super().__init__()
        self._coefficientMatrix = coefficientMatrix
        self._interceptVector = interceptVector
        self._numClasses = numClasses
        self._isMultinomial = isMultinomial

    @property
    def coefficientMatrix(self) -> DenseMatrix:
        return self._coefficientMatrix

    @property
    def interceptVector(self) -> DenseVector:
        return self._interceptVector

    @property
    def coefficients(self) -> DenseVector:
        if self._isMultinomial:
            raise ValueError("Multinomial models contain a matrix of coefficients, use coefficientMatrix instead.")
        return DenseVector(self._coefficientMatrix.toArray()[0])

    @property
    def intercept(self) -> float:
        if self._isMultinomial:
            raise ValueError("Multinomial models contain a vector of intercepts, use interceptVector instead.")
        return float(self._interceptVector[0])

    @property
    def numClasses(self) -> int:
        return self._numClasses

    @property
    def numFeatures(self) -> int:
        return self._coefficientMatrix.numCols

    def _margins(self, value):
        """The row's margins B x + b, summed as transform and serving sum them (``linear_margins``: with huge
        values the order of the sum decides between inf and NaN)."""
        import torch

        from sparkml.gpu.prediction import linear_margins

        x = torch.from_numpy(np.asarray(value.toArray(), dtype=np.float64)[None, :])
        coef, intercept = self._coefficientMatrix.toArray(), self._interceptVector.toArray()
        return linear_margins(x, torch.from_numpy(coef), torch.from_numpy(intercept))[0].numpy()

    def predictRaw(self, value: Vector) -> DenseVector:
        m = self._margins(value)
        return Vectors.dense([-m[0], m[0]] if not self._isMultinomial else m)

    def predictProbability(self, value: Vector) -> DenseVector:
        m = self._margins(value)
        if not self._isMultinomial:
            p = 1.0 / (1.0 + np.exp(-m[0]))
            return Vectors.dense([1 - p, p])
        import torch

        from sparkml.gpu.prediction import softmax_probability

        # MLlib's softmax, as transform: +inf and NaN margins included
        return Vectors.dense(softmax_probability(torch.from_numpy(m[None, :]))[0].numpy())

    def predict(self, value: Vector) -> float:
        if not self._isMultinomial:
            return float(self._margins(value)[0] > self._raw_threshold())
        import torch

        from sparkml.gpu.prediction import mllib_argmax

        t = self._multinomial_thresholds()
        if t is None:  # MLlib's argmax of the margins (NaN never the largest), as transform
            return float(mllib_argmax(torch.from_numpy(self._margins(value)[None, :]))[0])
        p = self.predictProbability(value).toArray()
        return float(mllib_argmax(torch.from_numpy((p / t)[None, :]), nan_first_wins=False)[0])

    def _raw_threshold(self):
        return logistic_raw_threshold(self.getThreshold())

    def _multinomial_thresholds(self):
        return np.asarray(self.getThresholds(), dtype=np.float64) if self.isSet(self.thresholds) else None

    def _build_scoring_spec(self) -> ScoringSpec:
        multinomial = self._isMultinomial
        return ScoringSpec(
            KINDS["logistic"],
            self._coefficientMatrix.toArray(),
            self._interceptVector.toArray(),
            raw_threshold=0.0 if multinomial else self._raw_threshold(),
            thresholds=self._multinomial_thresholds() if multinomial else None,
            num_classes=self._numClasses,
        )

    def _transform(self, dataset):
        return self._stock_transform(dataset, lambda: self._score_in_python(dataset))

    _data_schema = StructType(
        [
            StructField("numClasses", IntegerType()),
            StructField("numFeatures", IntegerType()),
            StructField("interceptVector", VectorUDT()),
            StructField("coefficientMatrix", MatrixUDT()),
            StructField("isMultinomial", BooleanType()),
        ]
    )

    def _data_frame(self, spark):
        row = (self._numClasses, self.numFeatures, self._interceptVector, self._coefficientMatrix, self._isMultinomial)
        return spark.createDataFrame([row], self._data_schema)

    @classmethod
    def _data_shapes(cls, row):
        outputs = row.numClasses if row.isMultinomial else 1
        return {"coefficientMatrix": (outputs, row.numFeatures), "interceptVector": (outputs,)}

    @classmethod
    def _from_data(cls, row):
        return cls(
            DenseMatrix(
                row.coefficientMatrix.numRows,
                row.coefficientMatrix.numCols,
                row.coefficientMatrix.toArray().ravel(),
                True,
            ),
            DenseVector(row.interceptVector.toArray()),
            int(row.numClasses),
            bool(row.isMultinomial),
        )

    def _java_args(self):
        return [self._coefficientMatrix, self._interceptVector, self._numClasses, self._isMultinomial]

    def _training_summary(self, record, dataset):
        binary = self._numClasses <= 2
        return training_summary(
            BinaryLogisticRegressionTrainingSummary if binary else LogisticRegressionTrainingSummary,
            self.toSpark(),
            dataset,
            record,
        )
