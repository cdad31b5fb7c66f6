"""GeneralizedLinearRegression, a drop-in for pyspark.ml's: MLlib's families, links and IRLS solver.

The model: g(E[y_i]) = x_i . beta + b + o_i, with the family's variance function and the link g
(``sparkml.gpu.glm`` states each), o_i the ``offsetCol`` value (0 without one) and w_i the ``weightCol`` value
(the prior weight: Var(y_i) = phi V(mu_i) / w_i; binomial: the number of trials). The fit is MLlib's:
iteratively reweighted least squares from one distributed pass per iteration (``sparkml.glm.irls``), which
stops when no coefficient moves by ``tol``, after at most ``maxIter`` iterations; ``regParam`` adds MLlib's
L2 term to every least-squares step (``sparkml.glm.irls`` says what the result then is). The gaussian family
with the identity link is one weighted least-squares solve, as in MLlib. The supported family and link pairs
and the label domains are MLlib's, refused before any Spark job (pairs) or after the conversion pass (labels).

The data is converted once into executor-resident blocks (the offset as one more column); each IRLS
iteration is one Spark job over them, whatever ``strategy``: a pass is a Gram matrix, its solve is on the
driver. Unlike MLlib's, the fit has no limit on the number of features beyond the driver's memory for the
(d + 1)^2 Gram matrix.
"""

from __future__ import annotations

import time
import warnings
from typing import TYPE_CHECKING

import numpy as np
from pyspark.ml.linalg import DenseVector
from pyspark.ml.regression import Predictor

from sparkml.base.estimator import TorchEstimator
from sparkml.base.params import declared_estimator
from sparkml.data.gram import GramPlan
from sparkml.glm import penalized
from sparkml.glm.irls import ConvergenceWarning, irls
from sparkml.glm.model import GeneralizedLinearRegressionModel, _Params, family_and_link, family_link_params
from sparkml.gpu.glm import DevianceLoss, IRLSPass
from sparkml.optim.iterations import Iteration, TrainingSummary
from sparkml.params.estimators import GENERALIZED_LINEAR_REGRESSION

if TYPE_CHECKING:
    from typing_extensions import Self

# MLlib's GeneralizedLinearRegression.supportedFamilyAndLinkPairs (tweedie's link is its linkPower)
IRLS_MAX_FEATURES = 4096  # MLlib's WeightedLeastSquares limit; beyond it, L-BFGS (``_quasi_newton``)
SUPPORTED_PAIRS = {
    "gaussian": ("identity", "log", "inverse"),
    "binomial": ("logit", "probit", "cloglog"),
    "poisson": ("log", "identity", "sqrt"),
    "gamma": ("inverse", "identity", "log"),
}


@declared_estimator(GENERALIZED_LINEAR_REGRESSION)
class GeneralizedLinearRegression(TorchEstimator, Predictor, _Params):
    """pyspark.ml's GeneralizedLinearRegression, fitted by IRLS over executor-resident blocks (module docstring)."""

    # <param-stubs>
    if TYPE_CHECKING:  # made from the Params' declarations (tools/write_param_stubs.py)

        def __init__(
            self,
            *,
            labelCol: str = "label",
            featuresCol: str = "features",
            predictionCol: str = "prediction",
            family: str = "gaussian",
            link: str | None = None,
            fitIntercept: bool = True,
            maxIter: int = 25,
            tol: float = 1e-06,
            regParam: float = 0.0,
            elasticNetParam: float = 0.0,
            weightCol: str | None = None,
            solver: str = "irls",
            linkPredictionCol: str | None = None,
            variancePower: float = 0.0,
            linkPower: float | None = None,
            offsetCol: str | None = None,
            aggregationDepth: int = 2,
            strategy: str = "auto",
            device: str = "auto",
            dtype: str = "float32",
            numWorkers: int = 0,
            checkpointDir: str | None = None,
            checkpointInterval: int = 10,
        ) -> None: ...

        def setFamily(self, value: str) -> Self: ...

        def setLink(self, value: str) -> Self: ...

        def setFitIntercept(self, value: bool) -> Self: ...

        def setMaxIter(self, value: int) -> Self: ...

        def setTol(self, value: float) -> Self: ...

        def setRegParam(self, value: float) -> Self: ...

        def setElasticNetParam(self, value: float) -> Self: ...

        def setWeightCol(self, value: str) -> Self: ...

        def setSolver(self, value: str) -> Self: ...

        def setLinkPredictionCol(self, value: str) -> Self: ...

        def setVariancePower(self, value: float) -> Self: ...

        def setLinkPower(self, value: float) -> Self: ...

        def setOffsetCol(self, value: str) -> Self: ...

        def setAggregationDepth(self, value: int) -> Self: ...

    # </param-stubs>

    def _check_params(self):
        super()._check_params()
        family = self.getFamily().lower()
        if family == "tweedie":
            if self.isSet("link"):
                raise ValueError(
                    f"family 'tweedie' takes its link from linkPower, not link: unset link (got {self.getLink()!r})"
                )
            return
        if self.isSet("link") and self.getLink().lower() not in SUPPORTED_PAIRS[family]:
            raise ValueError(
                f"GeneralizedLinearRegression does not support family {family!r} with link {self.getLink()!r}: "
                f"{family} takes {', '.join(SUPPORTED_PAIRS[family])}"
            )

    def _offset_col(self):
        return (self.getOrDefault("offsetCol") if self.isDefined("offsetCol") else None) or None

    def _conversion(self, dataset, strategy=None):
        """The conversion also computes IRLS's first pass (the Gram sums of MLlib's start) where IRLS solves:
        no L1 term, and few features (``TrainingData.prepare(gram=...)``)."""
        gram = None
        if self.getSolver() == "irls" and not self._quasi_newton(0):
            gram = GramPlan(irls_start=family_link_params(self), rows=True)
        return {**super()._conversion(dataset, strategy), "offset_col": self._offset_col(), "gram": gram}

    def _train(self, data, last_pass):
        s = data.summary
        has_offset = self._offset_col() is not None
        d = s.n_features - has_offset
        if d == 0 and not self.getFitIntercept():
            raise ValueError(
                "GeneralizedLinearRegression was given data with 0 features, and with Param fitIntercept set to "
                "false. To fit a model with 0 features, fitIntercept must be set to true."
            )
        family, link = family_and_link(self)
        _check_labels(family, s, self.getLabelCol())
        if self._quasi_newton(d):
            return self._train_quasi_newton(data, family, link, d, has_offset, last_pass)
        strategy = self._make_strategy(data, None)
        passes = {initial: IRLSPass(family, link, initial) for initial in (True, False)}

        def one_pass(coef, initial):
            if initial and data.gram is not None:  # the conversion's: (sum w z^2, 0, 0), sum w z a, sum w a a^T
                gram, xtz, zz = data.gram
                return np.array([zz, 0.0, 0.0]), xtz, gram
            return strategy.loss_gradient_hessian(coef, loss=passes[initial])

        checkpoint = self._checkpoint(s)
        result = irls(
            one_pass,
            d,
            has_offset,
            fit_intercept=self.getFitIntercept(),
            reg_param=self.getRegParam(),
            max_iter=self.getMaxIter(),
            tol=self.getTol(),
            identity_gaussian=family.name == "gaussian" and link.name == "identity",
            progress=self._irls_progress(),
            checkpoint=checkpoint,
        )
        if checkpoint is not None:
            checkpoint.remove()  # the fit succeeded, as MLlib removes its checkpoint files
        if result.stalled:
            warnings.warn(
                f"GeneralizedLinearRegression: IRLS stopped after {result.iterations} iterations: every step from "
                "there, halved down to tol, leaves the link's domain or the family's range of means on some rows (the "
                "optimum is on the domain's edge); the model is the last valid coefficients. Check the family and "
                "link against the labels",
                ConvergenceWarning,
                stacklevel=2,
            )
        elif not result.converged:
            warnings.warn(
                f"GeneralizedLinearRegression: IRLS did not converge in maxIter={self.getMaxIter()} iterations "
                f"(a coefficient still moved by tol={self.getTol()} or more): raise maxIter, or check the family "
                "and link against the labels (IRLS on a non-canonical link can cycle)",
                ConvergenceWarning,
                stacklevel=2,
            )
        model = GeneralizedLinearRegressionModel(DenseVector(result.coefficients), result.intercept)
        model._diag_inv_atwa = result.diag_inv_atwa
        record = TrainingSummary(result.deviance_history or [0.0], result.iterations)
        return self._fitted(model, [record], data.source)

    def _irls_progress(self):
        """IRLS's per-iteration report (``irls``' ``progress``) as the fit's ``Iteration`` events: the deviance
        at the coefficients the iteration started from, and the largest coefficient change it made."""
        progress, name, last = self._progress(), type(self).__name__, [time.perf_counter()]

        def report(iteration, deviance, step):
            now = time.perf_counter()
            detail = f"largest coefficient change {step:.3e}"
            progress(Iteration(name, "IRLS iteration", iteration, deviance, None, now - last[0], detail))
            last[0] = now

        return report

    def _checkpoint_refusal(self):
        """None: both of its strategies checkpoint, IRLS on the driver and the quasi-Newton fits as the linear
        estimators' do."""
        return None

    def _quasi_newton(self, d):
        """Whether the fit minimizes the penalized deviance by L-BFGS / OWL-QN rather than MLlib's IRLS: with an L1
        term (IRLS has none), or more than ``IRLS_MAX_FEATURES`` features (a (d + 1)^2 Gram matrix per pass)."""
        return (self.getRegParam() > 0 and self.getElasticNetParam() > 0) or d > IRLS_MAX_FEATURES

    def _penalized_start(self, s, d, family, link, has_offset):
        """(beta (1, d), [b]): where the penalized fit starts: no coefficients, the intercept at the link of the
        mean label (``penalized.start_intercept``)."""
        b = penalized.start_intercept(s, d, family, link, has_offset) if self.getFitIntercept() else 0.0
        return np.zeros((1, d)), [b]

    def _train_quasi_newton(self, data, family, link, d, has_offset, last_pass):
        """The minimum of the penalized mean deviance (``sparkml.glm.penalized``) by L-BFGS, or OWL-QN with an L1
        term, over the strategy's distributed loss and gradient sums."""
        s = data.summary
        lam, alpha, fit_intercept = self.getRegParam(), self.getElasticNetParam(), self.getFitIntercept()
        objective = penalized.objective(s, d, fit_intercept, lam, alpha)
        loss = DevianceLoss(family, link, fit_intercept, has_offset)
        strategy = self._make_strategy(data, loss)
        theta0 = objective.from_original(*self._penalized_start(s, d, family, link, has_offset))
        max_iter = self.getMaxIter() if self.isSet("maxIter") else penalized.DEFAULT_MAX_ITER
        theta, record = self._minimize(
            strategy, s, objective, theta0, max_iter=max_iter, owlqn=lam * alpha > 0, last_pass=last_pass
        )
        beta, b = objective.to_original(theta)
        model = GeneralizedLinearRegressionModel(DenseVector(beta[0]), float(b[0]))
        model._diag_inv_atwa = None  # no standard errors: MLlib's summary says so, as for its other solvers
        return self._fitted(model, [record], data.source)


def _check_labels(family, summary, label_col):
    """MLlib's label domains (its families' ``initialize``), from the conversion pass's label range."""
    low, high = summary.label_min, summary.label_max
    name = family.name
    if name == "binomial" and (low < 0 or high > 1):
        raise ValueError(
            f"labelCol {label_col!r}: the binomial family needs labels in [0, 1] (a proportion of successes, "
            f"or 0/1); found values in [{low:g}, {high:g}]"
        )
    strict = name == "gamma" or (name == "tweedie" and family.p >= 2.0)
    nonnegative = name == "poisson" or (name == "tweedie" and 1.0 <= family.p < 2.0)
    if strict and low <= 0:
        raise ValueError(
            f"labelCol {label_col!r}: the {name} family (variancePower {family.p:g}) needs positive labels; "
            f"found {low:g}"
        )
    if nonnegative and low < 0:
        raise ValueError(f"labelCol {label_col!r}: the {name} family needs non-negative labels; found {low:g}")
    if not np.isfinite(low) or not np.isfinite(high):
        raise ValueError(f"labelCol {label_col!r} has non-finite values")
