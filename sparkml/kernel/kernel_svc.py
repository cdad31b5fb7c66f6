"""KernelSVC: kernel support vector machines on Spark, which MLlib does not have.

Features (``method="nystroem"``): m landmarks L per class in proportion to the class counts,
the centres of k-means over a sample of the training rows (``landmarkSelection="kmeans"``, the
default; ``sparkml.kernel.landmarks``) or the sampled rows themselves (``"random"``), and the Nystroem map
phi(x) = k(x, L) V_r diag(lambda_r^{-1/2}) (``sparkml.gpu.nystroem`` with
``rcond``: K_LL^{-1/2} in K_LL's eigenbasis, the r <= m directions with lambda >= 1e-6 lambda_max;
the kernels and their formulas are in ``sparkml.gpu.kernels``). Each partition computes its kernel block
K(X_p, L) once per fit, on the executor that holds it (``TrainingData.derive``), and keeps it apart
from the projection (``sparkml.gpu.factored``): the n m r flops of forming phi are never spent, and every
pass costs what a pass over phi would. ``method="rff"``: m random Fourier features
z(x) = sqrt(2/m) cos(x W + b) of the rbf or laplacian kernel instead (``sparkml.gpu.fourier``), no
landmarks and no m x m projection, but more features for the same accuracy. Then, per problem (a
single one when binary; with K classes, ``multiClass="ovo"``: one per pair of classes over the rows of
those two, voting as libsvm, which is scikit-learn's ``SVC``; ``"ovr"``: one per class against the rest,
the argmax of the K decision values; ``"auto"``, the default: "ovo" up to 10 classes, "ovr" beyond, since
every pass evaluates all K(K-1)/2 pairs on every row), the
primal SVM

    min_theta  lambda/2 ||beta||^2 + (1/W) sum_i w_i l(s_i (phi_i . beta + b)),
    s_i = +1 for the (first) class and -1 for the other(s), W = sum_i w_i over ALL rows, lambda = regParam,

with ``loss="hinge"`` (the default, as ``SVC``) l(t) = max(0, 1 - t) smoothed by a quadratic over
|1 - t| <= 0.1 (``sparkml.gpu.SmoothedHingeLoss``, at most 0.025 above the hinge), started from two Newton
rounds of the squared hinge; or ``loss="squared_hinge"``, l(t) = max(0, 1 - t)^2. The hinge
tracks SVC's accuracy more closely (``benchmarks/bench_kernel_svc.py --loss``); its Hessians are
over the rows in the band only, but it takes more Newton rounds. It is solved by a distributed Newton method
(``sparkml.optim.newton``; H formed for up
to 256 features with
``allreduce``, 1024 with ``sync``, Newton-CG beyond, preconditioned by the shape of the features'
second moment for Nystroem and by the diagonal for rff, with a direct step, H formed over the active rows,
for a problem whose hinge band holds few rows): every round is ONE pass over the features for
all the classes still running (``sparkml.gpu.OneVsRestProblems``), a Spark job per pass
(``strategy="sync"``) or an all-reduce inside one barrier stage for the whole solve
(``strategy="allreduce"``; the default ``auto`` picks it where Spark can run one). Multiplying
by W C shows regParam = 1 / (W C) is scikit-learn's C (``SVC`` up to the smoothing and the Nystroem
approximation, which is exact when every training row is a landmark; with ``loss="squared_hinge"``,
``LinearSVC(loss="squared_hinge")`` on the features).

``gamma="scale"`` is scikit-learn's default, 1 / (d Var(X)) with Var over all entries of X,
computed from the conversion pass's statistics (weighted when ``weightCol`` is set).
``probability=True``: Platt scaling, P(class k | x) = sigmoid(a_k m_k(x) + b_k), fitted per problem
by Newton on the log loss of the training decision values against Platt's smoothed targets
(``sparkml.gpu.PlattProblems``; the same fit as scikit-learn's ``CalibratedClassifierCV(method="sigmoid")``
on those values). Unlike ``SVC(probability=True)`` the sigmoids are fitted on the training rows,
not by an internal 5-fold cross-validation (which would cost 5 more fits): on rows the SVM fits
very well the probabilities are somewhat overconfident. One-vs-one: pair (a, b)'s sigmoid is fitted on
the rows of a and b, P(a | a or b, x), and the pairs are coupled into class probabilities by the second
method of Wu, Lin and Weng (2004), as libsvm (``sparkml.gpu.prediction.pairwise_coupling``). One-vs-rest:
the K sigmoids normalized to sum to one. ``prediction`` stays the vote or the argmax of the decision values.
"""

from __future__ import annotations

import copy
import logging
from typing import TYPE_CHECKING

import numpy as np
from pyspark.ml.classification import Classifier

from sparkml.base.estimator import TorchEstimator
from sparkml.base.params import declared_estimator
from sparkml.base.validation import classification_labels
from sparkml.data import background_release
from sparkml.gpu import OneVsOneProblems, OneVsRestProblems, SmoothedHingeLoss, SquaredHingeLoss
from sparkml.gpu.feature_maps import NystroemSpec
from sparkml.gpu.fourier import FOURIER_KERNELS
from sparkml.kernel.block_budget import kernel_plan
from sparkml.kernel.feature_map import (
    block_features,
    checkpointed_feature_map,
    fit_feature_map,
    start_coefficients,
)
from sparkml.kernel.model import KernelSVCModel
from sparkml.kernel.params import _KernelSVCParams, resolve_gamma
from sparkml.kernel.platt import fit_platt
from sparkml.params.kernel_svc import KERNEL_SVC
from sparkml.runtime.session_kind import conf_value

if TYPE_CHECKING:
    from typing_extensions import Self

logger = logging.getLogger("sparkml")

# loss="hinge": the hinge smoothed over |1 - t| <= this (sparkml.gpu.SmoothedHingeLoss: at most this / 4 above the
# hinge per row), solved from this many Newton rounds of the squared hinge (its minimizer's
# neighbourhood, where the smoothed hinge's band is populated)
_HINGE_WIDTH, _HINGE_WARM_START_ROUNDS = 0.1, 2
# Up to this many features a Newton round forms H (n_active p^2 flops, one pass); beyond, truncated
# Newton-CG (2 n p flops per CG pass, about 40 passes per round) is cheaper. Inside a barrier stage a
# pass is an all-reduce (milliseconds); on the jobs transport a Spark job (a tenth of a second): two limits.
_CHOLESKY_MAX_FEATURES = {"barrier": 257, "jobs": 1025}  # by transport
# multiClass="auto" trains one-vs-one up to this many classes (45 pairs). Every pass evaluates each problem on
# every row, so K(K-1)/2 pairs cost (K-1)/2 times K one-vs-rest problems (digits, 10 classes: 8.1 s against 4.6 s).
_OVO_MAX_CLASSES = 10


@declared_estimator(KERNEL_SVC)
class KernelSVC(TorchEstimator, Classifier, _KernelSVCParams):
    """Kernel SVM classifier (binary, and multi-class one-vs-one or one-vs-rest) on Spark with PyTorch kernels.

    See the module docstring for the model and objective. ``strategy`` is 'sync' (one Spark job per
    Newton pass), 'allreduce' (one barrier stage for the SVM solve, one for Platt scaling) or 'auto' (the
    default: 'allreduce' where Spark can run it, else 'sync'). ``checkpointDir``: the feature map is saved
    once and the Newton rounds every ``checkpointInterval`` rounds (``optim.checkpoint``); a fit of the same
    data and Params resumes from them.
    """

    _compute_dtype = None  # computes in ``dtype``: its features are derived in it

    # <param-stubs>
    if TYPE_CHECKING:  # made from the Params' declarations (tools/write_param_stubs.py)

        def __init__(
            self,
            *,
            featuresCol: str = "features",
            labelCol: str = "label",
            predictionCol: str = "prediction",
            rawPredictionCol: str = "rawPrediction",
            probabilityCol: str = "probability",
            kernel: str = "rbf",
            gamma: str | float = "scale",
            degree: int = 3,
            coef0: float = 0.0,
            regParam: float = 0.0001,
            method: str = "nystroem",
            numLandmarks: int | None = None,
            maxLandmarks: int = 4000,
            kernelBlocks: str = "auto",
            kernelBlockMemory: str = "auto",
            landmarkTol: float = 0.05,
            landmarkGainTol: float = 0.002,
            landmarkSelection: str = "kmeans",
            loss: str = "hinge",
            multiClass: str = "auto",
            probability: bool = False,
            maxIter: int = 100,
            tol: float = 0.0001,
            seed: int = 0,
            fitIntercept: bool = True,
            threshold: float = 0.0,
            weightCol: str | None = None,
            aggregationDepth: int = 2,
            strategy: str = "auto",
            device: str = "auto",
            dtype: str = "float32",
            numWorkers: int = 0,
            checkpointDir: str | None = None,
            checkpointInterval: int = 10,
            classWeight: str | dict[float, float] | None = None,
        ) -> None: ...

        def setProbabilityCol(self, value: str) -> Self: ...

        def setKernel(self, value: str) -> Self: ...

        def setGamma(self, value: str | float) -> Self: ...

        def setDegree(self, value: int) -> Self: ...

        def setCoef0(self, value: float) -> Self: ...

        def setRegParam(self, value: float) -> Self: ...

        def setMethod(self, value: str) -> Self: ...

        def setNumLandmarks(self, value: int) -> Self: ...

        def setMaxLandmarks(self, value: int) -> Self: ...

        def setKernelBlocks(self, value: str) -> Self: ...

        def setKernelBlockMemory(self, value: str) -> Self: ...

        def setLandmarkTol(self, value: float) -> Self: ...

        def setLandmarkGainTol(self, value: float) -> Self: ...

        def setLandmarkSelection(self, value: str) -> Self: ...

        def setLoss(self, value: str) -> Self: ...

        def setMultiClass(self, value: str) -> Self: ...

        def setProbability(self, value: bool) -> Self: ...

        def setMaxIter(self, value: int) -> Self: ...

        def setTol(self, value: float) -> Self: ...

        def setSeed(self, value: int) -> Self: ...

        def setFitIntercept(self, value: bool) -> Self: ...

        def setThreshold(self, value: float) -> Self: ...

        def setWeightCol(self, value: str) -> Self: ...

        def setAggregationDepth(self, value: int) -> Self: ...

    # </param-stubs>

    def _check_params(self):
        super()._check_params()
        if self.getMethod() == "rff" and self.getKernel() not in FOURIER_KERNELS:
            raise ValueError(
                f"method='rff' needs a shift-invariant kernel ({', '.join(FOURIER_KERNELS)}); "
                f"kernel is {self.getKernel()!r}: use method='nystroem'"
            )

    def _checkpoint_refusal(self):
        return None  # the feature map and the Newton rounds (Platt scaling, a few cheap passes, is not kept)

    def _path_params(self, strategy):
        """A grid over C (``regParam``) and the stopping rule (``maxIter``, ``tol``) shares one feature map: the
        landmarks, their projection and every partition's kernel blocks depend on the data and the kernel Params
        only (``_train_path``)."""
        return ("regParam", "maxIter", "tol")

    def _train(self, raw, last_pass):
        """``raw``: the input's blocks, from which this fit derives its feature blocks; ``last_pass``:
        no later fit reads ``raw``, so it is released as soon as the features are derived."""
        return self._train_path([self], raw, last_pass)[0]

    def _train_path(self, estimators, raw, last_pass):
        """The models of ``estimators`` (copies of this one that differ only in ``_path_params``; this one alone
        for ``fit``), in their order, on ONE feature map: the landmarks are selected, and each partition's kernel
        blocks derived, once for all of them. Each map's Newton solve is its own and starts where ``fit``'s
        starts, so every model is the one its own ``fit`` returns; only the feature map's cost (the k-means over
        a sample, one pass forming K(X, L)) is shared."""
        s = raw.summary
        num_classes = classification_labels(s, self.getLabelCol())
        gamma = resolve_gamma(self.getGamma(), s)
        checkpoint = self._checkpoint(s)  # None in a grid: fitMultiple refuses checkpointDir with several maps
        spec, gram, start = checkpointed_feature_map(checkpoint, lambda: fit_feature_map(self, raw, s, gamma))
        m = spec.make().n_components
        # where the rounds start: the landmark search's stand-in classifiers (one-vs-rest; a pair from its two classes')
        theta0 = start_coefficients(
            spec, start, _problem_classes(num_classes), self.getFitIntercept(), self._pairs(num_classes)
        )
        # Nystroem: the blocks hold K(X, L), or the rows whose K(X, L) every pass computes where it does not fit
        # (sparkml.kernel.block_budget); the projection is applied per product (sparkml.gpu.factored)
        features = raw.derive(
            block_features(spec),
            self.getDevice(),
            right_factor=getattr(spec, "projection", None),
            plan=self._kernel_plan(spec, raw.spark),
            by_label=self._pairs(num_classes) is not None,  # one-vs-one passes read each class's rows as a run
        )
        if isinstance(spec, NystroemSpec):
            logger.info(
                "KernelSVC: the kernel blocks of %d of %d rows stored, the others' computed by every pass",
                features.stored_rows,
                s.rows,
            )
        models = []
        try:
            if last_pass:
                raw.release()  # the derived features are all the solver reads
            strategy = self._make_strategy(features, None)
            solved: dict[tuple, tuple] = {}  # maps that differ only in Params no fit reads share a solve
            for k, estimator in enumerate(estimators):
                final = k == len(estimators) - 1  # the blocks' last reader: the strategy may drop them as it ends
                key = tuple(estimator.getOrDefault(name) for name in self._path_params(None))
                if key not in solved:
                    solved[key] = estimator._solve_and_calibrate(
                        strategy, num_classes, m, s, gram, checkpoint, final, theta0
                    )
                theta, summaries, platt = copy.deepcopy(solved[key])
                intercepts = theta[:, m] if estimator.getFitIntercept() else np.zeros(len(theta))
                model = KernelSVCModel(
                    spec, theta[:, :m], intercepts, num_classes, gamma, platt, estimator._pairs(num_classes)
                )
                models.append(estimator._fitted(model, summaries, raw.source))
        except BaseException:
            features.release()
            raise
        background_release.release_after_fit(features)  # the models need none of it: not on the fit's time
        if checkpoint is not None:
            checkpoint.remove()  # the fit succeeded
        return models

    def _solve_and_calibrate(self, strategy, num_classes, m, summary, gram, checkpoint, last_pass, theta0=None):
        """(theta, the Newton summaries, Platt's (a, b) per problem or None): ``_solve``, then
        ``kernel.platt.fit_platt`` when ``probability`` is set; ``last_pass``: no later solve reads the blocks;
        ``theta0``: where the rounds start (``_solve``)."""
        probability = self.getProbability()
        theta, summaries = self._solve(
            strategy, num_classes, m, summary, gram, checkpoint, last_pass=last_pass and not probability, theta0=theta0
        )
        platt = None
        if probability:
            platt = fit_platt(
                strategy,
                theta,
                summary,
                _problem_classes(num_classes),
                self._pairs(num_classes),
                fit_intercept=self.getFitIntercept(),
                last_pass=last_pass,
                progress=self._progress(),
            )
        return theta, summaries, platt

    def _kernel_plan(self, spec, spark):
        """How the partitions keep their kernel blocks (Nystroem; ``sparkml.kernel.block_budget``), else None."""
        if not isinstance(spec, NystroemSpec):
            return None
        setting, mode = self.getKernelBlockMemory(), self.getKernelBlocks()
        return kernel_plan(spec, mode, setting, lambda key: conf_value(spark, key))

    def _solve(self, strategy, num_classes, m, summary, gram=None, checkpoint=None, last_pass=True, theta0=None):
        """All problems (one when binary: class 1 against 0; the pairs or the classes when multi-class) by
        Newton, one pass per round; Newton-CG preconditioned by the features' second-moment shape ``gram`` when given
        (``sparkml.optim.newton``). ``loss="hinge"``: the smoothed hinge from ``_HINGE_WARM_START_ROUNDS``
        rounds of the squared hinge (from 0 every row is on the hinge's linear part: no curvature), or from
        ``theta0`` when given (the landmark search's stand-in classifiers, ``feature_map.start_coefficients``):
        their margins spread the rows across the smoothed hinge's band, and the rounds over every row that the
        squared hinge's first steps cost are skipped (100k rows, 250 landmarks: 12 passes in 0.49 s -> 8 in 0.14 s
        on one core, the same objective to 1e-4). ``checkpoint``: the rounds' state saved every checkpointInterval
        rounds and resumed from; ``last_pass``: no later solve reads the feature blocks."""
        classes = _problem_classes(num_classes)
        fit_intercept = self.getFitIntercept()
        names = ["KernelSVC"] if num_classes == 2 else [f"KernelSVC class {int(c)}" for c in classes]
        pairs = self._pairs(num_classes)
        if pairs is not None:
            classes, names = pairs, [f"KernelSVC classes {int(a)} vs {int(b)}" for a, b in pairs]
        p = m + fit_intercept
        solver = _newton_solver(p, strategy.row.transport)

        def problems(binary):
            if pairs is not None:
                return lambda idx: OneVsOneProblems(binary, [pairs[j] for j in idx])
            return lambda idx: OneVsRestProblems(binary, [classes[j] for j in idx])

        squared = problems(SquaredHingeLoss(fit_intercept))
        if self.getLoss() == "squared_hinge":
            main, warm_start = squared, None
        else:  # both solves in one Spark job sequence or barrier stage; from theta0 the smoothed hinge's alone
            main = problems(SmoothedHingeLoss(fit_intercept, width=_HINGE_WIDTH))
            warm_start = (squared, _HINGE_WARM_START_ROUNDS) if theta0 is None else None
        return strategy.newton(
            main,
            np.zeros((len(classes), p)) if theta0 is None else theta0,
            warm_start=warm_start,
            solver=solver,
            preconditioner=gram if solver == "cg" else None,
            reg=self.getRegParam(),
            weight_sum=summary.weight_sum,
            fit_intercept=fit_intercept,
            max_iter=self.getMaxIter(),
            tol=self.getTol(),
            names=names,
            last_pass=last_pass,
            progress=self._progress(),
            checkpoint=checkpoint,
        )

    def _pairs(self, num_classes):
        """The one-vs-one pairs (a, b), a < b, in libsvm's order; None for one-vs-rest or two classes."""
        choice = self.getMultiClass()
        if num_classes == 2 or choice == "ovr" or (choice == "auto" and num_classes > _OVO_MAX_CLASSES):
            return None
        return [(float(a), float(b)) for a in range(num_classes) for b in range(a + 1, num_classes)]


def _newton_solver(p, transport):
    return "cholesky" if p <= _CHOLESKY_MAX_FEATURES[transport] else "cg"


def _problem_classes(num_classes):
    """The positive class of each one-vs-rest problem: [1] when binary, else 0..K-1."""
    return [1.0] if num_classes == 2 else [float(k) for k in range(num_classes)]
