"""KernelSVC: kernel support vector machines on Spark, which MLlib does not have.

Features (``method="nystroem"``): m landmarks L per class in proportion to the class counts,
the centres of k-means over a sample of the training rows (``landmarkSelection="kmeans"``, the
default; ``sparkml.landmarks``) or the sampled rows themselves (``"random"``), and the Nystroem map
phi(x) = k(x, L) V_r diag(lambda_r^{-1/2}) (``gpu.nystroem`` with
``rcond``: K_LL^{-1/2} in K_LL's eigenbasis, the r <= m directions with lambda >= 1e-6 lambda_max;
the kernels and their formulas are in ``gpu.kernels``). Each partition computes its kernel block
K(X_p, L) once per fit, on the executor that holds it (``TrainingData.derive``), and keeps it apart
from the projection (``gpu.factored``): the n m r flops of forming phi are never spent, and every
pass costs what a pass over phi would. ``method="rff"``: m random Fourier features
z(x) = sqrt(2/m) cos(x W + b) of the rbf or laplacian kernel instead (``gpu.fourier``), no
landmarks and no m x m projection, but more features for the same accuracy. Then, per class
(one-vs-rest; a single problem when binary), the primal SVM

    min_theta  lambda/2 ||beta||^2 + (1/W) sum_i w_i l(s_i (phi_i . beta + b)),
    s_i = +1 for the class and -1 for the rest, W = sum_i w_i, lambda = regParam,

with ``loss="hinge"`` (the default, as ``SVC``) l(t) = max(0, 1 - t) smoothed by a quadratic over
|1 - t| <= 0.1 (``gpu.SmoothedHingeLoss``, at most 0.025 above the hinge), started from two Newton
rounds of the squared hinge; or ``loss="squared_hinge"``, l(t) = max(0, 1 - t)^2. The hinge
tracks SVC's accuracy (the benchmark's problem, 4000 landmarks: within 0.2 points at 10k to 100k
rows; the squared hinge is 0.6 to 0.7 above it at 10k and 30k and 0.6 below at 100k); its
Hessians are over the rows in the band only, but it takes more rounds (up to twice the fit time
on small data). It is solved by a distributed Newton method (``sparkml.newton``; H formed for up
to 256 features with
``allreduce``, 1024 with ``sync``, Newton-CG beyond, preconditioned by the shape of the features'
second moment for Nystroem and by the diagonal for rff): every round is ONE pass over the features for
all the classes still running (``gpu.OneVsRestProblems``), a Spark job per pass
(``strategy="sync"``) or an all-reduce inside one barrier stage for the whole solve
(``strategy="allreduce"``). Multiplying
by W C shows regParam = 1 / (W C) is scikit-learn's C (``SVC`` up to the smoothing and the Nystroem
approximation, which is exact when every training row is a landmark; with ``loss="squared_hinge"``,
``LinearSVC(loss="squared_hinge")`` on the features).

``gamma="scale"`` is scikit-learn's default, 1 / (d Var(X)) with Var over all entries of X,
computed from the conversion pass's statistics (weighted when ``weightCol`` is set).
Prediction: rawPrediction [-m, m] for two classes (as LinearSVC; prediction 1 iff m > threshold),
one decision value per class otherwise (prediction the argmax).

``probability=True``: Platt scaling, P(class k | x) = sigmoid(a_k m_k(x) + b_k), fitted per problem
by Newton on the log loss of the training decision values against Platt's smoothed targets
(``gpu.PlattProblems``; the same fit as scikit-learn's ``CalibratedClassifierCV(method="sigmoid")``
on those values). Unlike ``SVC(probability=True)`` the sigmoids are fitted on the training rows,
not by an internal 5-fold cross-validation (which would cost 5 more fits): on rows the SVM fits
very well the probabilities are somewhat overconfident. Multi-class: the K sigmoids normalized to
sum to one; ``prediction`` stays the argmax of the decision values.
"""
import numpy as np
from pyspark import keyword_only
from pyspark.ml.classification import ClassificationModel, Classifier, _ClassifierParams
from pyspark.ml.linalg import DenseMatrix, DenseVector, MatrixUDT, VectorUDT
from pyspark.ml.param import Param, Params, TypeConverters
from pyspark.ml.param.shared import (HasAggregationDepth, HasFitIntercept, HasMaxIter, HasProbabilityCol,
                                     HasRegParam, HasSeed, HasThreshold, HasTol, HasWeightCol)
from pyspark.sql.types import DoubleType, IntegerType, StringType, StructField, StructType

from gpu import KERNELS, OneVsRestProblems, PlattProblems, SmoothedHingeLoss, SquaredHingeLoss
from gpu.feature_maps import input_features, make_feature_map
from gpu.fourier import FOURIER_KERNELS
from sparkml.fit_multiple import ConvertsOnce
from sparkml.landmarks import LANDMARK_SELECTIONS, choose_landmarks
from sparkml.linear_model import ModelIO
from sparkml.params import HasTorchTrainingParams, one_of, with_getters, with_setters
from sparkml.prediction import transform_linear
from sparkml.strategies import make_strategy
from sparkml.training import check_common_params
from sparkml.validation import classification_labels

METHODS = ("nystroem", "rff")
LOSSES = ("hinge", "squared_hinge")
# loss="hinge": the hinge smoothed over |1 - t| <= this (gpu.SmoothedHingeLoss: at most this / 4 above the
# hinge per row), solved from this many Newton rounds of the squared hinge (its minimizer's
# neighbourhood, where the smoothed hinge's band is populated)
_HINGE_WIDTH, _HINGE_WARM_START_ROUNDS = 0.1, 2
NEWTON_STRATEGIES = ("sync", "allreduce")  # the Newton passes are exact sums: no model averaging
_PLATT_MAX_ITER, _PLATT_TOL = 100, 1e-14
# Up to this many features a Newton round forms H (n_active p^2 flops, one pass); beyond, truncated
# Newton-CG (2 n p flops per CG pass, about 40 passes per round) is cheaper. Inside a barrier stage a
# pass is an all-reduce (milliseconds); with sync it is a Spark job (a tenth of a second), hence two limits.
_CHOLESKY_MAX_FEATURES = {"allreduce": 257, "sync": 1025}
# Nystroem directions kept: |lambda| >= this * max |lambda| of K_LL (bounds the projection for float32 products)
_NYSTROEM_RCOND = 1e-6


def _gamma(value):
    if isinstance(value, str):
        if value in ("scale", "auto"):
            return value
        value = float(value)
    value = TypeConverters.toFloat(value)
    if not value > 0:
        raise ValueError(f"gamma must be 'scale', 'auto' or a number > 0; got {value}")
    return value


@with_getters("kernel", "gamma", "degree", "coef0", "method", "numLandmarks", "landmarkSelection", "loss",
              "probability")
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
    method = Param(Params._dummy(), "method",
                   "Kernel approximation: 'nystroem' (landmarks chosen from the data; any kernel) or 'rff' "
                   "(random Fourier features; rbf and laplacian only).", typeConverter=one_of("method", METHODS))
    numLandmarks = Param(Params._dummy(), "numLandmarks",
                         "Feature count m: Nystroem landmarks, stratified by class (landmarkSelection; all rows when "
                         "there are fewer), or random Fourier features. More: closer to the exact "
                         "kernel machine, m^2 per active row per Newton round.", typeConverter=TypeConverters.toInt)
    landmarkSelection = Param(Params._dummy(), "landmarkSelection",
                              "Nystroem landmarks: 'kmeans' (per class, the centres of Lloyd's k-means over a "
                              "sample of about 10 rows per landmark: a closer kernel approximation for the same m) "
                              "or 'random' (the sampled rows themselves).",
                              typeConverter=one_of("landmarkSelection", LANDMARK_SELECTIONS))
    loss = Param(Params._dummy(), "loss",
                 "The SVM's loss: 'hinge' (scikit-learn's SVC and MLlib's LinearSVC; smoothed over a band of "
                 "half-width 0.1 at the kink so Newton's method applies; tracks SVC's accuracy) or 'squared_hinge' "
                 "(fewer Newton rounds; its accuracy can differ from SVC's either way).",
                 typeConverter=one_of("loss", LOSSES))
    probability = Param(Params._dummy(), "probability",
                        "Fit Platt scaling (one sigmoid per one-vs-rest problem, on the training decision values) "
                        "and output the probability column; the multi-class probabilities are the sigmoids "
                        "normalized to sum to 1.", typeConverter=TypeConverters.toBoolean)

    def __init__(self, *args):
        super().__init__(*args)
        self._setDefault(maxIter=100, tol=1e-6, regParam=1e-4, fitIntercept=True, threshold=0.0,
                         aggregationDepth=2, kernel="rbf", gamma="scale", degree=3, coef0=0.0,
                         method="nystroem", numLandmarks=1000, landmarkSelection="kmeans", loss="hinge",
                         probability=False, seed=0)

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


@with_setters("maxIter", "tol", "regParam", "fitIntercept", "weightCol", "threshold", "seed", "aggregationDepth",
              "kernel", "gamma", "degree", "coef0", "method", "numLandmarks", "landmarkSelection", "loss",
              "probability")
class KernelSVC(ConvertsOnce, Classifier, _KernelSVCParams):
    """Kernel SVM classifier (binary and one-vs-rest multi-class) trained on Spark with PyTorch kernels.

    See the module docstring for the model and objective. ``strategy`` is 'sync' (one Spark job per
    Newton pass) or 'allreduce' (one barrier stage for the SVM solve, one for Platt scaling).
    """

    @keyword_only
    def __init__(self, *, featuresCol="features", labelCol="label", predictionCol="prediction",
                 rawPredictionCol="rawPrediction", probabilityCol="probability", kernel="rbf", gamma="scale",
                 degree=3, coef0=0.0, regParam=1e-4, method="nystroem", numLandmarks=1000, landmarkSelection="kmeans",
                 loss="hinge", probability=False, maxIter=100, tol=1e-6, seed=0, fitIntercept=True, threshold=0.0,
                 weightCol=None,
                 aggregationDepth=2, strategy="sync", device="auto", dtype="float32", numWorkers=0, localIter=10):
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
        if self.getMethod() == "rff" and self.getKernel() not in FOURIER_KERNELS:
            raise ValueError(f"method='rff' needs a shift-invariant kernel ({', '.join(FOURIER_KERNELS)}); "
                             f"kernel is {self.getKernel()!r}: use method='nystroem'")
        if self.getStrategy() not in NEWTON_STRATEGIES:
            raise ValueError(f"KernelSVC solves by Newton's method, whose passes are exact sums: strategy must be "
                             f"one of {', '.join(NEWTON_STRATEGIES)} (no model averaging); got {self.getStrategy()!r}")

    _compute_dtype = None  # computes in ``dtype``: its features are derived in it

    def _train(self, raw, last_pass):
        """``raw``: the input's blocks, from which this fit derives its feature blocks; ``last_pass``:
        no later fit reads ``raw``, so it is released as soon as the features are derived."""
        s = raw.summary
        num_classes = classification_labels(s, self.getLabelCol())
        gamma = resolve_gamma(self.getGamma(), s)
        spec, gram = self._feature_map_spec(raw.source, s, gamma, self._weight_col())
        m = make_feature_map(spec).n_components
        # Nystroem: the blocks hold K(X, L); the projection is applied per product (gpu.factored)
        features = raw.derive(_feature_fn(spec), self.getDevice(), right_factor=spec.get("projection"))
        try:
            if last_pass:
                raw.release()  # the derived features are all the solver reads
            strategy = make_strategy(self.getStrategy(), features, None, self.getDevice(), self.getAggregationDepth(),
                                     self.getNumWorkers())
            theta, summaries = self._solve(strategy, num_classes, m, s, gram)
            platt = self._platt(strategy, num_classes, theta, s) if self.getProbability() else None
        finally:
            features.release()
        intercepts = theta[:, m] if self.getFitIntercept() else np.zeros(len(theta))
        model = KernelSVCModel(spec, theta[:, :m], intercepts, num_classes, gamma, platt)
        model._summaries = summaries
        return self._copyValues(model)

    def _feature_map_spec(self, dataset, summary, gamma, weight_col=None):
        """(The fitted feature map's data (``gpu.feature_maps``): the landmarks (from the rows of positive
        ``weight_col`` weight, k-means weighted by it) and K_LL^-1/2 in K_LL's
        truncated eigenbasis, or drawn Fourier frequencies; the shape (None, s) of the rows' average
        phi phi^T ~ diag(s) that preconditions Newton-CG (``sparkml.newton``), or None for rff)."""
        import torch

        from gpu.fourier import RandomFourierMap
        from gpu.nystroem import NystroemMap

        if self.getMethod() == "rff":
            rff = RandomFourierMap(self.getKernel(), summary.n_features, self.getNumLandmarks(), gamma=gamma,
                                   seed=self.getSeed())
            return {"method": "rff", "kernel": self.getKernel(), "frequencies": rff.frequencies.numpy(),
                    "offsets": rff.offsets.numpy()}, None
        landmarks, rows = choose_landmarks(dataset, self.getFeaturesCol(), self.getLabelCol(), summary,
                                           self.getNumLandmarks(), self.getLandmarkSelection(), self.getSeed(),
                                           weight_col or None)
        nystroem = NystroemMap(self.getKernel(), landmarks, rcond=_NYSTROEM_RCOND, **self._kernel_args(gamma))
        if rows is None:  # landmarks sampled from the rows: their average phi phi^T is diag(lambda) / m
            s = nystroem.gram_spectrum()[1].numpy() / len(landmarks)
        else:  # k-means centres: the diagonal of the sampled rows' average phi phi^T
            s = (nystroem.transform(torch.from_numpy(rows)) ** 2).mean(0).numpy()
        return {"method": "nystroem", "kernel": self.getKernel(), "landmarks": landmarks,
                "projection": nystroem.projection.numpy(), **self._kernel_args(gamma)}, (None, s)

    def _solve(self, strategy, num_classes, m, summary, gram=None):
        """All one-vs-rest problems (one when binary: class 1 against 0) by Newton, one pass per round;
        Newton-CG preconditioned by the features' second-moment shape ``gram`` when given
        (``sparkml.newton``). ``loss="hinge"``: the smoothed hinge from ``_HINGE_WARM_START_ROUNDS``
        rounds of the squared hinge (from 0 every row is on the hinge's linear part: no curvature)."""
        classes = _problem_classes(num_classes)
        fit_intercept = self.getFitIntercept()
        names = ["KernelSVC"] if num_classes == 2 else [f"KernelSVC class {int(c)}" for c in classes]
        p = m + fit_intercept
        solver = _newton_solver(p, self.getStrategy())

        def problems(binary):
            return lambda idx: OneVsRestProblems(binary, [classes[j] for j in idx])

        squared = problems(SquaredHingeLoss(fit_intercept))
        if self.getLoss() == "squared_hinge":
            main, warm_start = squared, None
        else:  # both solves in one Spark job sequence or barrier stage
            main = problems(SmoothedHingeLoss(fit_intercept, width=_HINGE_WIDTH))
            warm_start = (squared, _HINGE_WARM_START_ROUNDS)
        return strategy.newton(main, np.zeros((len(classes), p)), warm_start=warm_start, solver=solver,
                               preconditioner=gram if solver == "cg" else None, reg=self.getRegParam(),
                               weight_sum=summary.weight_sum, fit_intercept=fit_intercept, max_iter=self.getMaxIter(),
                               tol=self.getTol(), names=names, last_pass=not self.getProbability())

    def _platt(self, strategy, num_classes, theta, summary):
        """(k, 2): Platt's (a, b) per problem, fitted on the training decision values."""
        classes = _problem_classes(num_classes)
        pos = np.array([summary.class_weights[int(c)] for c in classes])
        neg = summary.weight_sum - pos
        targets = np.stack([(pos + 1) / (pos + 2), 1 / (neg + 2)], axis=1)
        theta0 = np.stack([np.zeros(len(classes)), np.log((pos + 1) / (neg + 1))], axis=1)  # the prior, as libsvm
        fit_intercept = self.getFitIntercept()
        ab, _ = strategy.newton(
            lambda idx: PlattProblems(theta[idx], [classes[j] for j in idx], targets[idx], fit_intercept),
            theta0, reg=0.0, weight_sum=summary.weight_sum, fit_intercept=True, max_iter=_PLATT_MAX_ITER,
            tol=_PLATT_TOL, names=[f"Platt scaling, problem {j}" for j in range(len(classes))], last_pass=True)
        return ab


def _newton_solver(p, strategy):
    return "cholesky" if p <= _CHOLESKY_MAX_FEATURES[strategy] else "cg"


def _problem_classes(num_classes):
    """The positive class of each one-vs-rest problem: [1] when binary, else 0..K-1."""
    return [1.0] if num_classes == 2 else [float(k) for k in range(num_classes)]


def _feature_fn(spec):
    """On the executors (numpy in the closure: no tensors pickled): the random Fourier features of
    rows, or their Nystroem kernel block K(rows, L) (the projection is the right factor, shipped
    apart: the closure carries only the landmarks)."""
    if spec["method"] == "nystroem":
        kernel = {k: spec[k] for k in ("kernel", "landmarks", "gamma", "degree", "coef0")}
        cache = {}

        def block(rows):
            import torch

            from gpu.kernels import kernel_matrix

            key = (rows.device, rows.dtype)
            if key not in cache:  # the landmarks on each device and dtype, once per executor process
                cache[key] = torch.as_tensor(kernel["landmarks"]).to(device=rows.device, dtype=rows.dtype)
            return kernel_matrix(kernel["kernel"], rows, cache[key], gamma=kernel["gamma"],
                                 degree=kernel["degree"], coef0=kernel["coef0"])

        return block
    cache = {}

    def phi(rows):
        from gpu.feature_maps import make_feature_map

        if rows.device not in cache:  # one map per executor process and device, its casts cached
            cache[rows.device] = make_feature_map(spec).to(rows.device)
        return cache[rows.device].transform(rows)

    return phi


class KernelSVCModel(ClassificationModel, _KernelSVCParams, ModelIO):
    """A fitted KernelSVC: the feature map's data (landmarks and the Nystroem projection, or the random
    Fourier frequencies and phases) and one coefficient row per problem."""

    _java_class = "sparkml.classification.KernelSVCModel"  # no Scala twin: MLlib has no kernel SVM

    def __init__(self, featureMap=None, coefficients=None, intercepts=None, numClasses=2, gammaValue=1.0,
                 platt=None):
        super().__init__()
        self._spec = None if featureMap is None else {
            # C order whatever the source (a loaded DenseMatrix is column-major): the same BLAS summation order,
            # so a loaded model scores bit for bit as the fitted one
            k: np.ascontiguousarray(v, dtype=np.float64) if isinstance(v, (list, np.ndarray)) else v
            for k, v in featureMap.items()}
        self._coef = None if coefficients is None else np.ascontiguousarray(np.atleast_2d(coefficients),
                                                                            dtype=np.float64)
        self._intercepts = None if intercepts is None else np.atleast_1d(np.asarray(intercepts, dtype=np.float64))
        self._num_classes, self._gamma_value = int(numClasses), float(gammaValue)
        self._platt = None if platt is None else np.asarray(platt, dtype=np.float64).reshape(-1, 2)
        self._summaries = None

    @property
    def numClasses(self):
        return self._num_classes

    @property
    def numFeatures(self):
        return input_features(self._spec)

    @property
    def numLandmarksUsed(self):
        """Nystroem landmarks chosen, or random Fourier features drawn."""
        x = self._spec.get("landmarks")
        return int(self._coef.shape[1] if x is None else x.shape[0])

    @property
    def numKernelFeatures(self):
        """The length of each coefficient row: the random Fourier features, or the Nystroem
        directions kept (K_LL's eigen-directions with lambda >= 1e-6 lambda_max; at most
        numLandmarksUsed, fewer when the landmarks' kernel matrix is numerically low-rank)."""
        return int(self._coef.shape[1])

    @property
    def gammaValue(self):
        """The kernel's gamma as a number ('scale' and 'auto' resolved on the training data)."""
        return self._gamma_value

    @property
    def landmarks(self):
        """(numLandmarksUsed, numFeatures) landmarks of a Nystroem model: k-means centres, or training rows
        with landmarkSelection='random' (None for method='rff')."""
        x = self._spec.get("landmarks")
        return None if x is None else DenseMatrix(*x.shape, x.ravel(), True)

    @property
    def coefficientMatrix(self):
        """(1 or numClasses, numKernelFeatures): the linear model on the kernel features."""
        return DenseMatrix(*self._coef.shape, self._coef.ravel(), True)

    @property
    def interceptVector(self):
        return DenseVector(self._intercepts)

    @property
    def plattCoefficients(self):
        """(problems, 2): Platt's (a, b) per one-vs-rest problem, P = sigmoid(a m + b); None without
        ``probability=True``."""
        return None if self._platt is None else DenseMatrix(*self._platt.shape, self._platt.ravel(), True)

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

    def _margins(self, value):
        import torch

        x = torch.from_numpy(np.asarray(value.toArray(), dtype=np.float64)[None, :])
        phi = make_feature_map(self._spec).transform(x).numpy()[0]
        return self._coef @ phi + self._intercepts

    def predictRaw(self, value):
        m = self._margins(value)
        return DenseVector([-m[0], m[0]] if len(m) == 1 else m)

    def predict(self, value):
        m = self._margins(value)
        return float(m[0] > self.getThreshold()) if len(m) == 1 else float(np.argmax(m))

    def predictProbability(self, value):
        """The probability vector of one feature vector (needs a model fitted with probability=True)."""
        import torch

        from gpu.prediction import platt_probability

        if self._platt is None:
            raise RuntimeError("this KernelSVCModel has no Platt scaling: fit it with probability=True")
        margins = torch.from_numpy(self._margins(value)[None, :])
        return DenseVector(platt_probability(margins, torch.from_numpy(self._platt)).numpy()[0])

    def _transform(self, dataset):
        outputs = {"raw": self.getRawPredictionCol(), "pred": self.getPredictionCol()}
        if self._platt is not None:
            outputs["prob"] = self.getProbabilityCol()
        return transform_linear(dataset, self.getFeaturesCol(), outputs, "svc", self._coef, self._intercepts,
                                raw_threshold=self.getThreshold(), feature_map=self._spec,
                                platt=self._platt)

    def _data_frame(self, spark):
        def matrix(x):
            return None if x is None else DenseMatrix(*np.atleast_2d(x).shape, np.ravel(x), True)

        spec = self._spec
        rff = spec["method"] == "rff"
        schema = StructType([StructField("numClasses", IntegerType()), StructField("gamma", DoubleType()),
                             StructField("degree", IntegerType()), StructField("coef0", DoubleType()),
                             StructField("kernel", StringType()), StructField("method", StringType()),
                             StructField("basis", MatrixUDT()), StructField("projection", MatrixUDT()),
                             StructField("offsets", VectorUDT()), StructField("coefficientMatrix", MatrixUDT()),
                             StructField("interceptVector", VectorUDT()), StructField("platt", MatrixUDT())])
        row = (self._num_classes, self._gamma_value, self.getDegree(), self.getCoef0(), spec["kernel"], spec["method"],
               matrix(spec["frequencies"].T if rff else spec["landmarks"]), None if rff else matrix(spec["projection"]),
               DenseVector(spec["offsets"]) if rff else None, self.coefficientMatrix, self.interceptVector,
               self.plattCoefficients)
        return spark.createDataFrame([row], schema)

    @classmethod
    def _from_data(cls, row):
        if row.method == "rff":
            spec = {"method": "rff", "kernel": row.kernel, "frequencies": row.basis.toArray().T,
                    "offsets": row.offsets.toArray()}
        else:
            spec = {"method": "nystroem", "kernel": row.kernel, "landmarks": row.basis.toArray(),
                    "projection": row.projection.toArray(), "gamma": row.gamma, "degree": row.degree,
                    "coef0": row.coef0}
        return cls(spec, row.coefficientMatrix.toArray(), row.interceptVector.toArray(), int(row.numClasses),
                   float(row.gamma), None if row.platt is None else row.platt.toArray())
