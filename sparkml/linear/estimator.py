"""The training step of the three linear models, written once.

    problem   = the model's ``_problem(summary)``: its ``sparkml.gpu`` loss, the number of outputs K,
                the L2 / L1 strengths and the label scale of MLlib's objective, and its start
    objective = ``LinearObjective`` (MLlib's scaled parametrization) over the strategy's sums
    theta     = L-BFGS, or OWL-QN with an L1 term or when the model asks for it (hinge loss),
                from the initial model's coefficients (``setInitialModel``) or the problem's start;
                L-BFGS-B (``optim.bounded``) over a box: the problem's bounds (LogisticRegression's
                bound Params, ``linear.bounds``) mapped into theta, the start clipped into it first,
                or the huber scale's sigma > 0 (``linear.scale_objective``)
    model     = the model's ``_model(beta, b, problem)`` with the optimizer's summary

``LinearRegression`` reuses it for its ``l-bfgs`` solver and adds the normal equations.

A grid of maps that differ only in the penalty and the stopping rule (``fitMultiple``) runs as one
regularization path (``base.regularization_path``): every map's objective, in the path's order, minimized in one
strategy run (``ComposedStrategy.minimize_path``), each from the previous map's theta. The maps share the data, the
loss and the parametrization (the scaling, centering and label scale of ``optim.linear_objective`` depend on the
data and on Params the path does not vary), so a solution in theta is a start for the next map as it is.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sparkml.base.estimator import TorchEstimator
from sparkml.base.model import HasInitialModel
from sparkml.base.regularization_path import PATH_PARAMS, path_label, path_steps
from sparkml.base.search_support import SearchSupport
from sparkml.gpu.problems import GridProblems
from sparkml.optim.linear_objective import LinearObjective
from sparkml.strategies import table

if TYPE_CHECKING:
    from typing_extensions import Self


@dataclass
class LinearProblem:
    """What one linear model's fit minimizes (``optim.linear_objective`` has the formula)."""

    loss: object  # a sparkml.gpu loss: the per-row loss and its layout
    n_outputs: int  # K: 1, or the classes of a multinomial model
    reg_l2: float  # the L2 strength lambda (1 - a), already divided by the label scale
    reg_l1: float = 0.0  # the L1 strength lambda a, likewise
    label_scale: float = 1.0  # sigma_y (LinearRegression), else 1
    owlqn: bool = False  # OWL-QN's steps even without an L1 term (MLlib's LinearSVC)
    start: tuple[np.ndarray, np.ndarray] | None = None  # (beta (K, d), b (K,)); None: zeros
    context: object = None  # what ``_model`` needs besides (beta, b)
    bounds: object = None  # a ``linear.bounds.CoefficientBounds`` box in the user's space, or None
    center: bool = True  # virtual centering of the features (MLlib drops it under finite intercept bounds)


class LinearEstimator(HasInitialModel, TorchEstimator):
    """A linear model fitted by L-BFGS / OWL-QN over a strategy's distributed sums.

    Subclasses implement ``_problem(summary) -> LinearProblem`` (checking the labels) and
    ``_model(beta, b, problem)`` -> the unfitted-Params model; they may override ``_solve``.
    """

    if TYPE_CHECKING:  # pyspark.ml's shared Params, which every linear model has

        def getFitIntercept(self) -> bool: ...

        def getStandardization(self) -> bool: ...

        def getMaxIter(self) -> int: ...

        def getTol(self) -> float: ...

        def setMaxIter(self, value: int) -> Self: ...  # made from each estimator's declared Params

        def setRegParam(self, value: float) -> Self: ...

        def setTol(self, value: float) -> Self: ...

        def setFitIntercept(self, value: bool) -> Self: ...

        def setStandardization(self, value: bool) -> Self: ...

        def setWeightCol(self, value: str) -> Self: ...

        def setAggregationDepth(self, value: int) -> Self: ...

        def setMaxBlockSizeInMB(self, value: float) -> Self: ...

    def _problem(self, summary):
        raise NotImplementedError

    def searchSupport(self, dataset, paramMaps) -> SearchSupport:
        """A search may score the grid's models in one pass (each is a linear score of the features) and convert
        ``dataset`` once for every split and the refit when every map converts it alike and no fit's conversion
        depends on its own rows (``classWeight``'s counts): ``sparkml.base.search_support``."""
        arguments = [self.copy(m)._conversion(dataset) for m in paramMaps]
        shared = bool(arguments) and all(a == arguments[0] for a in arguments[1:])
        conversion = arguments[0] if shared and arguments[0]["class_weight"] is None else None
        return SearchSupport(scored_together=True, conversion=conversion)

    def _model(self, beta, b, problem):
        raise NotImplementedError

    def _train(self, data, last_pass):
        problem = self._problem(data.summary)
        strategy = self._make_strategy(data, problem.loss)
        model, summary = self._solve(strategy, data.summary, problem, last_pass)
        return self._fitted(model, [summary], data.source)

    def _objective(self, s, problem):
        """MLlib's objective for ``problem`` over the data summarized by ``s``; its data term is the strategy's
        (``LinearObjective``: the solver plugs in its transport's sums)."""
        return LinearObjective(
            n_features=s.n_features,
            n_outputs=problem.n_outputs,
            fit_intercept=self.getFitIntercept(),
            mean=s.mean,
            std=np.sqrt(s.var_unbiased),
            weight_sum=s.weight_sum,
            label_scale=problem.label_scale,
            reg_l2=problem.reg_l2,
            reg_l1=problem.reg_l1,
            standardization=self.getStandardization(),
            center=problem.center,
        )

    def _start(self, s, problem):
        start = self._initial_coefficients(s.n_features, problem.n_outputs)
        if start is None:
            start = problem.start or (np.zeros((problem.n_outputs, s.n_features)), np.zeros(problem.n_outputs))
        return start

    def _solve(self, strategy, s, problem, last_pass):
        """(model, TrainingSummary) by L-BFGS / OWL-QN (L-BFGS-B under bounds) over MLlib's objective."""
        objective, theta, summary = self._minimize_problem(strategy, s, problem, last_pass)
        return self._finish(objective, theta, problem), summary

    def _finish(self, objective, theta, problem):
        """The (unfitted-Params) model at the optimizer's ``theta`` of ``objective``."""
        beta, b = objective.to_original(theta)
        return self._model(beta, b, problem)

    def _setup(self, s, problem):
        """(objective, theta0, bounds): the objective the optimizer sees, its start, clipped into the problem's
        box first (in the user's space, as MLlib clips its start) when it has one, and that box over theta
        (None without one)."""
        objective = self._objective(s, problem)
        start = self._start(s, problem)
        if problem.bounds is not None:
            start = problem.bounds.clip(*start)
        theta0 = objective.from_original(*start)
        objective, theta0 = self._restrict(objective, theta0, s)
        bounds = objective.theta_bounds(problem.bounds)  # (lower, upper) over theta, or None
        if bounds is not None:
            theta0 = np.clip(theta0, *bounds)  # the scaling's rounding
        return objective, theta0, bounds

    def _minimize_problem(self, strategy, s, problem, last_pass):
        """(objective, theta, TrainingSummary): the optimizer's run from the start (``_setup``)."""
        objective, theta0, bounds = self._setup(s, problem)
        max_iter, owlqn = self.getMaxIter(), problem.owlqn
        theta, summary = self._minimize(
            strategy, s, objective, theta0, max_iter=max_iter, owlqn=owlqn, last_pass=last_pass, bounds=bounds
        )
        return objective, theta, summary

    def _path_params(self, strategy):
        """The exact strategies run a path (one quasi-Newton run after another over the same sums); the
        first-order and model-averaging ones fit each map alone: their solvers keep state per fit (rounds,
        a parameter server, gossip) that a warm start would not carry over as the path needs."""
        return PATH_PARAMS if table.get(strategy).solver == "quasi-newton" else None

    def _train_path(self, estimators, data, last_pass):
        s = data.summary
        problems = [e._problem(s) for e in estimators]
        strategy = self._make_strategy(data, problems[0].loss)
        solved = self._solve_path(strategy, s, estimators, problems, last_pass)
        return [e._fitted(model, [summary], data.source) for e, (model, summary) in zip(estimators, solved)]

    def _solve_path(self, strategy, s, estimators, problems, last_pass):
        """[(model, TrainingSummary)] of ``estimators`` (with their ``problems``), in their order, in one run of
        the strategy. A single-output loss without bounds (binomial LogisticRegression, LinearSVC,
        LinearRegression's squared error), up to ``_SIDE_BY_SIDE_COEFFICIENTS`` in all: the objectives are
        minimized side by side, each from its own ``fit``'s start, one pass over the rows per round for all of
        them (``ComposedStrategy.minimize_path``): each model is exactly its ``fit``'s, and the grid costs about
        as many passes as its longest fit (a (n, d) x (d, k) product costs a few single passes on a CPU, about
        one on a GPU). Otherwise (a multinomial model, bounds, a wide grid) along
        ``base.regularization_path.path_steps``: the first from ``fit``'s start, each later one from the solution
        it follows (or ``fit``'s start, where lower)."""
        steps = path_steps(estimators)
        setups = [estimators[ii[0]]._setup(s, problems[ii[0]]) for ii, _ in steps]  # (objective, theta0, bounds)
        path = [
            (
                objective,
                starts,
                dict(
                    max_iter=estimators[ii[0]].getMaxIter(),
                    tol=estimators[ii[0]].getTol(),
                    name=path_label(estimators[ii[0]]),
                    owlqn=problems[ii[0]].owlqn,
                    bounds=bounds,
                ),
            )
            for (ii, starts), (objective, _, bounds) in zip(steps, setups)
        ]
        together = None
        side_by_side = len(setups) * setups[0][0].size <= _SIDE_BY_SIDE_COEFFICIENTS
        if side_by_side and GridProblems.accepts(problems[0].loss) and all(b is None for _, _, b in setups):
            together = [theta0 for _, theta0, _ in setups]  # side by side, each from its own fit's start
        runs = strategy.minimize_path(
            path, setups[0][1], last_pass=last_pass, progress=self._progress(), together=together
        )
        solved: list = [None] * len(estimators)
        for (ii, _), (objective, _, _), (theta, summary) in zip(steps, setups, runs):
            for i in ii:  # maps that differ only in Params no fit reads: one solve, a model (and summary) each
                solved[i] = (estimators[i]._finish(objective, theta, problems[i]), copy.deepcopy(summary))
        return solved

    def _check_params(self):
        super()._check_params()
        why = self._first_order_refusal() if _row(self.getStrategy()).first_order else None
        if why:
            raise ValueError(
                f"strategy={self.getStrategy()!r} cannot fit this {type(self).__name__}: {why}; use "
                f"strategy='allreduce' or 'sync'"
            )

    def _first_order_refusal(self):
        """Why the first-order strategies (``ssp``, ``gossip``) cannot minimize this fit's objective, or None."""
        return None

    def _checkpoint_refusal(self):
        row = _row(self.getStrategy())
        if not row.checkpoints:
            return f"strategy={self.getStrategy()!r} writes no checkpoints (its state lives in the barrier tasks)"
        return None if row.bounded_checkpoints else self._bounded_checkpoint_refusal()

    def _bounded_checkpoint_refusal(self):
        """Why this fit, solved by L-BFGS-B (bounds, huber's scale), writes no checkpoints with a strategy whose
        solver is L-BFGS-B itself; None when it is not bound-constrained."""
        return None

    def _restrict(self, objective, theta0, s):
        """The objective the optimizer sees and its start (LinearRegression holds its intercept)."""
        return objective, theta0


# The most coefficients (maps x coefficients per map) solved side by side: each run keeps its own L-BFGS memory
# (2 x 10 vectors) in every task, about 350 MB at this bound; wider grids (hashed features) walk the path, one
# map's memory at a time.
_SIDE_BY_SIDE_COEFFICIENTS = 1 << 21


def _row(name):
    """The strategy table's row of ``name``; for ``auto``, the row of what it can run (both exact: ``sync``)."""
    return table.get("sync" if name == table.AUTO else name)
