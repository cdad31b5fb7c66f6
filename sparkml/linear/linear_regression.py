"""LinearRegression (squared error or huber), a drop-in for pyspark.ml's.

Objective (MLlib's; W = sum of weights, lambda = regParam, a = elasticNetParam, sigma_y = label std,
s_j = std_j if standardization else 1, r_i = y_i - x_i.beta - b):

    (1/(2W)) sum_i w_i r_i^2 + lambda (1 - a) / (2 sigma_y) sum_j (s_j beta_j)^2 + lambda a sum_j s_j |beta_j|

Two solvers, chosen as MLlib chooses them (``solver='auto'``: normal when d <= 4096, else l-bfgs):

* ``normal``: one pass returns the weighted Gram matrix X^T W X and X^T W y (``sparkml.gpu`` Hessian
  block of the squared loss); the driver solves MLlib's WeightedLeastSquares problem
  (``optim.weighted_least_squares``: Cholesky, or OWL-QN for an elastic net). Population stds.
* ``l-bfgs``: the distributed L-BFGS / OWL-QN of the other models on the label scaled by 1/sigma_y,
  with unbiased stds.

``loss="huber"`` (MLlib's, Owen's joint estimation of the scale sigma; ``sparkml.gpu.HuberLoss``):

    min over (beta, b, sigma > 0) of  (1/W) sum_i w_i (sigma + H_eps((y_i - x_i.beta - b) / sigma) sigma) / 2
                                       + lambda / 2 sum_j (s_j beta_j)^2

with H_eps(z) = z^2 for |z| <= eps, 2 eps |z| - eps^2 beyond (``epsilon`` > 1). As MLlib: L2 only
(elasticNetParam 0), never the normal solver, the label not scaled (lambda not divided by sigma_y),
the intercept fitted (not closed form) on virtually centered features, L-BFGS-B over
(C, c0, sigma) with sigma >= Double.MinPositiveValue (``linear.scale_objective``), from C = 1, b = 1,
sigma = 1; ``model.scale`` is sigma (1.0 for squaredError).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from pyspark.ml.linalg import DenseVector, Vectors, VectorUDT
from pyspark.ml.regression import LinearRegressionModel as _StockModel
from pyspark.ml.regression import PredictionModel, Predictor, _LinearRegressionParams
from pyspark.sql.types import DoubleType, StructField, StructType

from sparkml.base.model import ConvertsToStock, HasCoefficientVector, KeepsTrainingSummary, ModelIO
from sparkml.base.params import HasTorchTrainingParams, declared_estimator, declares
from sparkml.base.summary import LinearRegressionTrainingSummary, training_summary
from sparkml.base.validation import check_huber_params
from sparkml.data.gram import GramPlan
from sparkml.gpu import HuberLoss, SquaredLoss
from sparkml.linear.estimator import LinearEstimator, LinearProblem
from sparkml.linear.scale_objective import WithScale
from sparkml.optim.iterations import TrainingSummary, logger
from sparkml.optim.weighted_least_squares import solve_normal_equations
from sparkml.params.estimators import LINEAR_REGRESSION
from sparkml.scoring.dataframe import ScoresWithSpec
from sparkml.scoring.kinds import KINDS
from sparkml.scoring.spec import ScoringSpec

if TYPE_CHECKING:
    from pyspark.ml.linalg import Vector
    from typing_extensions import Self

MAX_NORMAL_FEATURES = 4096  # MLlib's WeightedLeastSquares.MAX_NUM_FEATURES


@declares(*LINEAR_REGRESSION)
class _Params(_LinearRegressionParams, HasTorchTrainingParams):
    pass


@declared_estimator(LINEAR_REGRESSION)
class LinearRegression(LinearEstimator, Predictor, _Params):
    """pyspark.ml's LinearRegression (squaredError or huber), trained with PyTorch kernels on the executors."""

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
            standardization: bool = True,
            solver: str = "auto",
            weightCol: str | None = None,
            aggregationDepth: int = 2,
            loss: str = "squaredError",
            epsilon: float = 1.35,
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
        ) -> None: ...

        def setMaxIter(self, value: int) -> Self: ...

        def setRegParam(self, value: float) -> Self: ...

        def setElasticNetParam(self, value: float) -> Self: ...

        def setTol(self, value: float) -> Self: ...

        def setFitIntercept(self, value: bool) -> Self: ...

        def setStandardization(self, value: bool) -> Self: ...

        def setSolver(self, value: str) -> Self: ...

        def setWeightCol(self, value: str) -> Self: ...

        def setAggregationDepth(self, value: int) -> Self: ...

        def setLoss(self, value: str) -> Self: ...

        def setEpsilon(self, value: float) -> Self: ...

        def setMaxBlockSizeInMB(self, value: float) -> Self: ...

    # </param-stubs>

    def _check_params(self):
        super()._check_params()
        check_huber_params(self)

    def _bounded_checkpoint_refusal(self):
        if self._huber():
            return "loss='huber' (L-BFGS-B over the scale) writes no checkpoints (its averaging rounds do)"
        return None

    def _checkpoint_refusal(self):
        if self.getSolver() == "normal":
            return "solver='normal' runs no iterations to checkpoint (use solver='l-bfgs')"
        return super()._checkpoint_refusal()

    def _huber(self):
        return self.getLoss() == "huber"

    def _conversion(self, dataset, strategy=None):
        """The normal equations need only the rows' Gram sums: the conversion computes them and stores no rows
        when the features are few (``TrainingData.prepare(gram=True)``); no pass is left for the solve."""
        normal = not self._huber() and self.getSolver() in ("auto", "normal")
        return {**super()._conversion(dataset, strategy), "gram": GramPlan() if normal else None}

    def _first_order_refusal(self):
        if self._huber():
            return (
                "loss='huber' optimizes its scale sigma jointly, under a bound, with no curvature bound for the steps"
            )
        return None

    def _problem(self, s):
        if self._huber():
            return self._huber_problem(s)
        solver = self.getSolver()
        if solver == "auto":
            solver = "normal" if s.n_features <= MAX_NORMAL_FEATURES else "l-bfgs"
        lam, a = self.getRegParam(), self.getElasticNetParam()
        sigma_y = self._label_scale(s, s.label_var_unbiased)
        start = (np.zeros((1, s.n_features)), np.array([s.label_mean if self.getFitIntercept() else 0.0]))
        return LinearProblem(
            SquaredLoss(fit_intercept=self.getFitIntercept()),
            1,
            reg_l2=lam * (1 - a) / sigma_y,
            reg_l1=lam * a / sigma_y,
            label_scale=sigma_y,
            start=start,
            context=solver,
        )

    def _huber_problem(self, s):
        """MLlib's huber problem: the label unscaled, lambda undivided, the start C = 1 (beta_j = 1/std_j), b = 1."""
        fit_intercept = self.getFitIntercept()
        std = np.sqrt(s.var_unbiased)
        beta = np.where(std > 0, 1.0 / np.where(std > 0, std, 1.0), 0.0)[None, :]
        return LinearProblem(
            HuberLoss(fit_intercept=fit_intercept, epsilon=self.getEpsilon()),
            1,
            reg_l2=self.getRegParam(),
            start=(beta, np.array([1.0 if fit_intercept else 0.0])),
            context="l-bfgs",
        )

    def _model(self, beta, b, problem, scale=1.0):
        return LinearRegressionModel(Vectors.dense(np.ravel(beta)), float(np.ravel(b)[0]), scale)

    def _solve(self, strategy, s, problem, last_pass):
        """The constant label's closed form, the normal equations, or L-BFGS (``LinearEstimator``)."""
        solver = problem.context
        constant = self._constant_label(s, solver)
        if constant is not None:
            beta, b = constant
            return self._model(beta, b, problem), TrainingSummary([0.0], 0)
        if solver == "normal":
            if self._checkpoint_dir() is not None:
                raise ValueError(
                    f"checkpointDir is set but solver='auto' chose the normal equations ({s.n_features} "
                    f"features <= {MAX_NORMAL_FEATURES}), which run no iterations to checkpoint: set "
                    f"solver='l-bfgs' or unset checkpointDir"
                )
            return self._normal(strategy, s, problem)
        return super()._solve(strategy, s, problem, last_pass)

    def _finish(self, objective, theta, problem):
        if self._huber():  # theta ends with the scale sigma (``linear.scale_objective``)
            beta, b = objective.to_original(theta)
            return self._model(beta, b, problem, objective.scale(theta))
        return super()._finish(objective, theta, problem)

    def _solve_path(self, strategy, s, estimators, problems, last_pass):
        """The normal equations' maps share one Gram pass, each then solved on the driver as its own fit
        solves it (Cholesky, or OWL-QN from MLlib's start for an elastic net: no data pass left for a warm
        start to save); a constant label's maps are fitted one by one (closed form, or their own error);
        else the quasi-Newton path (``LinearEstimator._solve_path``)."""
        solver = problems[0].context
        var = s.label_var_population if solver == "normal" else s.label_var_unbiased
        if var > 0 and solver != "normal":
            return super()._solve_path(strategy, s, estimators, problems, last_pass)
        if var > 0:
            gram = self._gram(strategy, s)
            return [e._normal(strategy, s, p, gram) for e, p in zip(estimators, problems)]
        return [e._solve(strategy, s, p, last_pass=False) for e, p in zip(estimators, problems)]

    def _restrict(self, objective, theta0, s):
        if self._huber():  # sigma joins theta, starting at the initial model's scale or MLlib's 1
            scale = getattr(self._initial_model, "scale", None) if self._initial_model is not None else None
            return WithScale(objective), np.append(theta0, scale if scale and scale > 0 else 1.0)
        if not self.getFitIntercept():
            return objective, theta0
        # As MLlib: on centered data the intercept is closed form (b = mean(y) - mean(x).beta),
        # so only the coefficients are optimized; the scaled intercept stays at mean(y)/sigma_y.
        return _ClosedFormIntercept(objective, s.label_mean / objective.label_scale), theta0[:-1]

    def _constant_label(self, s, solver):
        """MLlib's special case of a label with zero variance: zero coefficients, intercept = mean."""
        var = s.label_var_population if solver == "normal" else s.label_var_unbiased
        if var > 0:
            return None
        if self.getFitIntercept() or s.label_mean == 0:
            logger.warning("label %r is constant: coefficients are 0 and the intercept its mean", self.getLabelCol())
            return np.zeros(s.n_features), s.label_mean if self.getFitIntercept() else 0.0
        if self.getRegParam() > 0:
            raise ValueError(
                f"label column {self.getLabelCol()!r} has zero standard deviation: the model cannot be regularized"
            )
        return None

    def _label_scale(self, s, var):
        return float(np.sqrt(var)) if var > 0 else abs(s.label_mean)

    def _gram(self, strategy, s):
        """(X^T W y, X^T W X) with the intercept's column last when fitted: the conversion's (``data.gram``)
        where it computed them, else one distributed pass (the squared loss's gradient and Hessian block at zero
        coefficients, whose gradient is -X^T W y)."""
        p = s.n_features + self.getFitIntercept()
        if strategy.data.gram is not None:
            gram, xty, _ = strategy.data.gram
            return xty[:p], gram[:p, :p]
        _, grad0, gram = strategy.loss_gradient_hessian(np.zeros(p))
        return -grad0, gram

    def _normal(self, strategy, s, problem, gram=None):
        """MLlib's WeightedLeastSquares on the Gram matrix from one distributed pass (``gram``: ``_gram``'s,
        when a regularization path's maps share it)."""
        fit_intercept = self.getFitIntercept()
        xty, gram = gram or self._gram(strategy, s)
        sol = solve_normal_equations(
            gram,
            xty,
            weight_sum=s.weight_sum,
            mean=s.mean,
            var=s.var_population,
            label_mean=s.label_mean,
            label_var=s.label_var_population,
            fit_intercept=fit_intercept,
            reg_param=self.getRegParam(),
            elastic_net=self.getElasticNetParam(),
            standardization=self.getStandardization(),
            max_iter=self.getMaxIter(),
            tol=self.getTol(),
        )
        model = self._model(sol.coefficients, sol.intercept, problem)
        model._diag_inv_atwa = sol.diag_inv_atwa
        return model, TrainingSummary(sol.objective_history, sol.iterations)


class _ClosedFormIntercept:
    """A ``LinearObjective`` restricted to the coefficients, its last coordinate held at ``c0``."""

    def __init__(self, objective, c0):
        self.objective, self.c0 = objective, c0
        self.size = objective.size - 1

    @property
    def weight_sum(self):
        return self.objective.weight_sum

    def with_data_sum(self, data_sum, weight_sum=None):
        return _ClosedFormIntercept(self.objective.with_data_sum(data_sum, weight_sum), self.c0)

    def value(self, theta):
        return self.objective.value(self._full(theta))

    def loss_coef(self, theta):
        return self.objective.loss_coef(self._full(theta))

    def _full(self, theta):
        return np.append(theta, self.c0)

    def fun_grad(self, theta):
        f, g = self.objective.fun_grad(self._full(theta))
        return f, g[:-1]

    def l1_weights(self):
        w = self.objective.l1_weights()
        return None if w is None else w[:-1]

    def theta_bounds(self, box):
        bounds = self.objective.theta_bounds(box)
        return None if bounds is None else (bounds[0][:-1], bounds[1][:-1])

    def to_original(self, theta):
        return self.objective.to_original(self._full(theta))


class LinearRegressionModel(
    HasCoefficientVector, PredictionModel, _Params, ModelIO, KeepsTrainingSummary, ConvertsToStock, ScoresWithSpec
):
    """A fitted LinearRegression: ``coefficients``, ``intercept``, ``scale`` and the prediction column."""

    _java_class = "org.apache.spark.ml.regression.LinearRegressionModel"
    _stock_class = _StockModel

    def __init__(self, coefficients=None, intercept=0.0, scale=1.0) -> None:
        super().__init__()
        self._coefficients, self._intercept, self._scale = coefficients, float(intercept), float(scale)

    @property
    def scale(self) -> float:
        return self._scale

    def predict(self, value: Vector) -> float:
        return self._margin(value)

    def _build_scoring_spec(self) -> ScoringSpec:
        return ScoringSpec(KINDS["regression"], self._coefficients.toArray(), np.array([self._intercept]))

    def _transform(self, dataset):
        return self._stock_transform(dataset, lambda: self._score_in_python(dataset))

    _data_schema = StructType(
        [
            StructField("intercept", DoubleType()),
            StructField("coefficients", VectorUDT()),
            StructField("scale", DoubleType()),
        ]
    )

    def _data_frame(self, spark):
        return spark.createDataFrame([(self._intercept, self._coefficients, self._scale)], self._data_schema)

    @classmethod
    def _data_shapes(cls, row):
        return {"coefficients": ("numFeatures",)}

    @classmethod
    def _from_data(cls, row):
        return cls(DenseVector(row.coefficients.toArray()), row.intercept, row.scale)

    def _java_args(self):
        return [self._coefficients, self._intercept, self._scale]

    _diag_inv_atwa = None  # the normal solver's diag((A^T W A)^-1), for the summary's standard errors

    def _training_summary(self, record, dataset):
        weight = self.getOrDefault("weightCol") if self.isDefined("weightCol") else None
        return training_summary(
            LinearRegressionTrainingSummary,
            self.toSpark(),
            dataset,
            record,
            _diag_inv_atwa=self._diag_inv_atwa,
            _estimate=self._estimates(),
            _weight_col=weight or None,
        )
