"""KernelSVC: kernel support vector machines on Spark, which MLlib does not have.

Features (``method="nystroem"``): m landmarks L sampled from the training rows, stratified by
class, and the Nystroem map phi(x) = k(x, L) K_LL^{-1/2} (``gpu.nystroem``; the kernels and their
formulas are in ``gpu.kernels``). Each partition computes its phi block once per fit, on the
executor that holds it (``TrainingData.derive``). Then, per class (one-vs-rest; a single problem
when binary), the primal squared-hinge SVM

    min_theta  lambda/2 ||beta||^2 + (1/W) sum_i w_i max(0, 1 - s_i (phi_i . beta + b))^2,
    s_i = +1 for the class and -1 for the rest, W = sum_i w_i, lambda = regParam,

is solved by a distributed Newton method (``sparkml.newton``, one pass per round). Multiplying
by W C shows regParam = 1 / (W C) is scikit-learn's C (``LinearSVC(loss="squared_hinge")`` on
the features, or ``SVC`` up to squared vs plain hinge and the Nystroem approximation, which is
exact when every training row is a landmark).

``gamma="scale"`` is scikit-learn's default, 1 / (d Var(X)) with Var over all entries of X,
computed from the conversion pass's statistics (weighted when ``weightCol`` is set).
Prediction: rawPrediction [-m, m] for two classes (as LinearSVC; prediction 1 iff m > threshold),
one decision value per class otherwise (prediction the argmax).
"""
import numpy as np
from pyspark import keyword_only
from pyspark.ml.classification import ClassificationModel, Classifier, _ClassifierParams
from pyspark.ml.linalg import DenseMatrix, DenseVector, MatrixUDT, VectorUDT
from pyspark.ml.param import Param, Params, TypeConverters
from pyspark.ml.param.shared import (HasAggregationDepth, HasFitIntercept, HasMaxIter, HasProbabilityCol,
                                     HasRegParam, HasSeed, HasThreshold, HasTol, HasWeightCol)
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, IntegerType, StringType, StructField, StructType

from gpu import KERNELS, OneVsRestLoss, SquaredHingeLoss
from sparkml.data.training_data import TrainingData
from sparkml.newton import newton_squared_hinge
from sparkml.linear_model import ModelIO
from sparkml.params import HasTorchTrainingParams, one_of, with_getters, with_setters
from sparkml.prediction import transform_linear
from sparkml.strategies.sync import SyncStrategy
from sparkml.training import check_common_params
from sparkml.validation import classification_labels

METHODS = ("nystroem", "rff")


def _gamma(value):
    if isinstance(value, str):
        if value in ("scale", "auto"):
            return value
        value = float(value)
    value = TypeConverters.toFloat(value)
    if not value > 0:
        raise ValueError(f"gamma must be 'scale', 'auto' or a number > 0; got {value}")
    return value


@with_getters("kernel", "gamma", "degree", "coef0", "method", "numLandmarks", "probability")
class _KernelSVCParams(_ClassifierParams, HasMaxIter, HasTol, HasRegParam, HasFitIntercept, HasWeightCol,
                       HasThreshold, HasSeed, HasProbabilityCol, HasAggregationDepth, HasTorchTrainingParams):
    kernel = Param(Params._dummy(), "kernel", "Kernel: " + ", ".join(KERNELS) + " (formulas in gpu.kernels).",
                   typeConverter=one_of("kernel", KERNELS))
    gamma = Param(Params._dummy(), "gamma",
                  "Kernel coefficient of rbf, polynomial, sigmoid and laplacian: 'scale' (1 / (d Var(X)), "
                  "scikit-learn's default), 'auto' (1 / d) or a number > 0.", typeConverter=_gamma)
    degree = Param(Params._dummy(), "degree", "Degree of the polynomial kernel (>= 1).",
                   typeConverter=TypeConverters.toInt)
    coef0 = Param(Params._dummy(), "coef0", "Independent term of the polynomial and sigmoid kernels.",
                  typeConverter=TypeConverters.toFloat)
    method = Param(Params._dummy(), "method", "Kernel approximation: 'nystroem' ('rff' is not built yet).",
                   typeConverter=one_of("method", METHODS))
    numLandmarks = Param(Params._dummy(), "numLandmarks",
                         "Nystroem landmarks sampled from the training rows, stratified by class (>= 1); all "
                         "rows when there are fewer. More: closer to the exact kernel machine, m^2 per row "
                         "per Newton round.", typeConverter=TypeConverters.toInt)
    probability = Param(Params._dummy(), "probability",
                        "Fit Platt scaling for the probability column (not built yet).",
                        typeConverter=TypeConverters.toBoolean)

    def __init__(self, *args):
        super().__init__(*args)
        self._setDefault(maxIter=100, tol=1e-6, regParam=1e-4, fitIntercept=True, threshold=0.0,
                         aggregationDepth=2, kernel="rbf", gamma="scale", degree=3, coef0=0.0,
                         method="nystroem", numLandmarks=1000, probability=False, seed=0)

    def _kernel_args(self, gamma):
        return {"gamma": gamma, "degree": self.getDegree(), "coef0": self.getCoef0()}


def resolve_gamma(gamma, summary):
    """A number: as given, 1 / d ('auto'), or 1 / (d Var(X)) over all entries of X ('scale')."""
    d = summary.n_features
    if gamma == "auto":
        return 1.0 / d
    if gamma != "scale":
        return float(gamma)
    second = float(np.mean(summary.var_population + summary.mean ** 2))
    var = second - float(np.mean(summary.mean)) ** 2
    return 1.0 / (d * var) if var > 0 else 1.0


def sample_landmarks(dataset, features_col, label_col, summary, m, seed):
    """About m training rows as a float64 (m', d) array, each class's share as in the data (at least one
    row per class), sampled on Spark with ``sampleBy``; every row when there are at most m."""
    label = F.col(label_col).cast("double").alias("label")
    rows = dataset.select(F.col(features_col).alias("x"), label)
    if summary.rows <= m:
        picked = rows.collect()
    else:
        share = summary.class_weights / summary.class_weights.sum()
        quota = {float(c): max(1, int(round(m * p))) for c, p in enumerate(share) if p > 0}
        fractions = {c: min(1.0, 1.5 * q / max(1.0, share[int(c)] * summary.rows)) + 1e-6
                     for c, q in quota.items()}
        taken = {c: 0 for c in quota}
        picked = []
        for r in rows.sampleBy("label", fractions, seed).collect():
            if taken.get(r.label, 0) < quota.get(r.label, 0):
                taken[r.label] += 1
                picked.append(r)
    return np.array([r.x.toArray() for r in picked], dtype=np.float64)


@with_setters("maxIter", "tol", "regParam", "fitIntercept", "weightCol", "threshold", "seed", "aggregationDepth",
              "kernel", "gamma", "degree", "coef0", "method", "numLandmarks", "probability")
class KernelSVC(Classifier, _KernelSVCParams):
    """Kernel SVM classifier (binary and one-vs-rest multi-class) trained on Spark with PyTorch kernels.

    See the module docstring for the model and objective. ``strategy`` is 'sync' (one Spark job per
    Newton round); the barrier strategies are not wired to the Newton solver yet.
    """

    @keyword_only
    def __init__(self, *, featuresCol="features", labelCol="label", predictionCol="prediction",
                 rawPredictionCol="rawPrediction", probabilityCol="probability", kernel="rbf", gamma="scale",
                 degree=3, coef0=0.0, regParam=1e-4, method="nystroem", numLandmarks=1000, probability=False,
                 maxIter=100, tol=1e-6, seed=0, fitIntercept=True, threshold=0.0, weightCol=None,
                 aggregationDepth=2, strategy="sync", device="auto", dtype="float64", numWorkers=0, localIter=10):
        super().__init__()
        self._set(**self._input_kwargs)

    @keyword_only
    def setParams(self, **kwargs):
        return self._set(**kwargs)

    def _check_params(self):
        check_common_params(self)
        if not self.getRegParam() > 0:
            raise ValueError(f"regParam must be > 0 for KernelSVC (1 / (n C)); got {self.getRegParam()}")
        if self.getNumLandmarks() < 1:
            raise ValueError(f"numLandmarks must be >= 1; got {self.getNumLandmarks()}")
        if self.getDegree() < 1:
            raise ValueError(f"degree must be >= 1; got {self.getDegree()}")
        if self.getMethod() != "nystroem":
            raise NotImplementedError("method='rff' (random Fourier features) is not built yet; use 'nystroem'")
        if self.getProbability():
            raise NotImplementedError("probability=True (Platt scaling) is not built yet")
        if self.getStrategy() != "sync":
            raise NotImplementedError(f"KernelSVC runs its Newton rounds with strategy='sync' only for now; "
                                      f"got {self.getStrategy()!r}")

    def _fit(self, dataset):
        from gpu.nystroem import NystroemMap

        self._check_params()
        weight_col = self.getOrDefault("weightCol") if self.isDefined("weightCol") else None
        data = TrainingData.prepare(dataset, self.getFeaturesCol(), self.getLabelCol(), weight_col, self.getDtype())
        features = None
        try:
            s = data.summary
            num_classes = classification_labels(s, self.getLabelCol())
            gamma = resolve_gamma(self.getGamma(), s)
            landmarks = sample_landmarks(dataset, self.getFeaturesCol(), self.getLabelCol(), s,
                                         self.getNumLandmarks(), self.getSeed())
            fmap = NystroemMap(self.getKernel(), landmarks, **self._kernel_args(gamma))
            features = data.derive(_feature_fn(self.getKernel(), landmarks, fmap.projection.numpy(),
                                               self._kernel_args(gamma)), self.getDevice())
            coef, intercepts, summaries = self._solve(features, num_classes, fmap.n_components, s.weight_sum)
        finally:
            if features is not None:
                features.release()
            data.release()
        model = KernelSVCModel(landmarks, fmap.projection.numpy(), coef, intercepts, num_classes, gamma)
        model._summaries = summaries
        return self._copyValues(model)

    def _solve(self, features, num_classes, m, weight_sum):
        fit_intercept = self.getFitIntercept()
        problems = [None] if num_classes == 2 else list(range(num_classes))
        coef, intercepts, summaries = [], [], []
        for k in problems:
            binary = SquaredHingeLoss(fit_intercept=fit_intercept)
            strategy = SyncStrategy(features, binary if k is None else OneVsRestLoss(binary, k), self.getDevice(),
                                    self.getAggregationDepth())
            theta, summary = newton_squared_hinge(
                strategy.loss_gradient_hessian, strategy.loss_gradient, np.zeros(m + fit_intercept),
                reg=self.getRegParam(), weight_sum=weight_sum, fit_intercept=fit_intercept,
                max_iter=self.getMaxIter(), tol=self.getTol(), name=f"KernelSVC class {k}" if k is not None
                else "KernelSVC")
            coef.append(theta[:m])
            intercepts.append(theta[m] if fit_intercept else 0.0)
            summaries.append(summary)
        return np.array(coef), np.array(intercepts), summaries


def _feature_fn(kind, landmarks, projection, kernel_args):
    """phi(rows) on the executors (numpy in the closure: no tensors pickled)."""
    cache = {}

    def phi(rows):
        from gpu.nystroem import NystroemMap

        if rows.device not in cache:  # one map per executor process and device, its casts cached
            cache[rows.device] = NystroemMap(kind, landmarks, projection=projection, **kernel_args).to(rows.device)
        return cache[rows.device].transform(rows)

    return phi


class KernelSVCModel(ClassificationModel, _KernelSVCParams, ModelIO):
    """A fitted KernelSVC: the landmarks, the Nystroem projection, one coefficient row per problem."""

    _java_class = "sparkml.classification.KernelSVCModel"  # no Scala twin: MLlib has no kernel SVM

    def __init__(self, landmarks=None, projection=None, coefficients=None, intercepts=None, numClasses=2,
                 gammaValue=1.0):
        super().__init__()
        self._landmarks = None if landmarks is None else np.asarray(landmarks, dtype=np.float64)
        self._projection = None if projection is None else np.asarray(projection, dtype=np.float64)
        self._coef = None if coefficients is None else np.atleast_2d(np.asarray(coefficients, dtype=np.float64))
        self._intercepts = None if intercepts is None else np.atleast_1d(np.asarray(intercepts, dtype=np.float64))
        self._num_classes, self._gamma_value = int(numClasses), float(gammaValue)
        self._summaries = None

    @property
    def numClasses(self):
        return self._num_classes

    @property
    def numFeatures(self):
        return int(self._landmarks.shape[1])

    @property
    def numLandmarksUsed(self):
        return int(self._landmarks.shape[0])

    @property
    def gammaValue(self):
        """The kernel's gamma as a number ('scale' and 'auto' resolved on the training data)."""
        return self._gamma_value

    @property
    def landmarks(self):
        return DenseMatrix(*self._landmarks.shape, self._landmarks.ravel(), True)

    @property
    def coefficientMatrix(self):
        """(1 or numClasses, numLandmarks): the linear model on the Nystroem features."""
        return DenseMatrix(*self._coef.shape, self._coef.ravel(), True)

    @property
    def interceptVector(self):
        return DenseVector(self._intercepts)

    @property
    def hasSummary(self):
        return self._summaries is not None

    @property
    def summary(self):
        """The Newton record of the (first) problem; ``summaries`` has one per one-vs-rest class."""
        if self._summaries is None:
            raise RuntimeError("No training summary available for this KernelSVCModel")
        return self._summaries[0]

    @property
    def summaries(self):
        return list(self._summaries or [])

    def setThreshold(self, value):
        return self._set(threshold=value)

    def _feature_map(self):
        return self.getKernel(), self._landmarks, self._projection, self._kernel_args(self._gamma_value)

    def _margins(self, value):
        import torch

        from gpu.nystroem import NystroemMap

        kernel, landmarks, projection, args = self._feature_map()
        x = torch.from_numpy(np.asarray(value.toArray(), dtype=np.float64)[None, :])
        phi = NystroemMap(kernel, landmarks, projection=projection, **args).transform(x).numpy()[0]
        return self._coef @ phi + self._intercepts

    def predictRaw(self, value):
        m = self._margins(value)
        return DenseVector([-m[0], m[0]] if len(m) == 1 else m)

    def predict(self, value):
        m = self._margins(value)
        return float(m[0] > self.getThreshold()) if len(m) == 1 else float(np.argmax(m))

    def _transform(self, dataset):
        outputs = {"raw": self.getRawPredictionCol(), "pred": self.getPredictionCol()}
        return transform_linear(dataset, self.getFeaturesCol(), outputs, "svc", self._coef, self._intercepts,
                                raw_threshold=self.getThreshold(), feature_map=self._feature_map())

    def _data_frame(self, spark):
        schema = StructType([StructField("numClasses", IntegerType()), StructField("gamma", DoubleType()),
                             StructField("kernel", StringType()), StructField("landmarks", MatrixUDT()),
                             StructField("projection", MatrixUDT()), StructField("coefficientMatrix", MatrixUDT()),
                             StructField("interceptVector", VectorUDT())])
        proj = DenseMatrix(*self._projection.shape, self._projection.ravel(), True)
        row = (self._num_classes, self._gamma_value, self.getKernel(), self.landmarks, proj, self.coefficientMatrix,
               self.interceptVector)
        return spark.createDataFrame([row], schema)

    @classmethod
    def _from_data(cls, row):
        return cls(row.landmarks.toArray(), row.projection.toArray(), row.coefficientMatrix.toArray(),
                   row.interceptVector.toArray(), int(row.numClasses), float(row.gamma))
