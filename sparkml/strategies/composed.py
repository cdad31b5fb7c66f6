"""A strategy at fit time: the transport of its ``strategies.table`` row running the row's solver.

``ComposedStrategy`` is what an estimator drives: ``minimize`` (the linear models), ``minimize_path`` (a
linear model's regularization path: several objectives in one run), ``newton`` (KernelSVC),
and the one-off passes that are Spark jobs whatever the strategy (``loss_gradient_hessian``: the normal
equations' Gram matrix). What may be asked of which strategy is checked here once, on the driver, before a
job or stage starts.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from sparkml.optim import lockstep
from sparkml.optim.bounded import require_smooth
from sparkml.strategies.barrier_transport import BarrierStage
from sparkml.strategies.exact import distributed, loss_shape
from sparkml.strategies.job_transport import SparkJobs


def _minimize(solver, objective, theta0, settings, comm, progress, checkpoint):
    return solver(comm, objective, theta0, progress=progress, checkpoint=checkpoint, **settings)


def _minimize_path(solver, steps, theta0, comm, progress, checkpoint):
    """The objectives of ``steps`` ((objective, starts, settings) each) minimized in turn, each from the
    candidate start of lowest objective (one evaluation each where there are several; a tie goes to the
    later): ``theta0`` for None, else the solution of that earlier step. (the thetas stacked, [TrainingSummary])."""
    thetas: list[np.ndarray] = []
    summaries: list = []
    for objective, starts, settings in steps:
        start = starts[0]
        if len(starts) > 1:
            values = [distributed(objective, comm).value(theta0 if s is None else thetas[s]) for s in starts]
            start = starts[min(range(len(starts)), key=lambda j: (values[j], -j))]
        x0 = theta0 if start is None else thetas[start]
        theta, summary = solver(
            comm, objective, x0, progress=progress, checkpoint=None, warm_start=start is not None, **settings
        )
        thetas.append(np.asarray(theta, dtype=np.float64))
        summaries.append(summary)
    return np.stack(thetas), summaries


class _OwnEvaluations:
    """The communicator one run of a lock step sees: its (loss, gradient) sums come from the round's batched pass."""

    def __init__(self, comm, evaluate):
        self.rank, self.world, self.evaluate = comm.rank, comm.world, evaluate

    def sum(self, kind, coef, shapes, loss=None):
        if kind != "loss_gradient" or loss is not None:
            raise ValueError(f"a lock-step run evaluates the fit's loss and gradient only, not {kind!r}")
        return self.evaluate(coef)


def _minimize_together(solver, steps, starts, loss, comm, progress, checkpoint):
    """The objectives of ``steps`` minimized side by side, each from its ``starts`` (the run a ``fit`` of that map
    makes), in lock step (``optim.lockstep``): each round one pass over the rows evaluates every run still going
    (``GridProblems`` of the fit's ``loss``). (the thetas stacked, [TrainingSummary])."""
    from sparkml.gpu.problems import GridProblems

    shape = loss_shape(steps[0][0])

    def batch(coefs):
        k = len(coefs)
        f, g = comm.sum("loss_gradient", np.stack(coefs), [(k,), (k, *shape)], GridProblems(loss, k))
        return [(float(f[j]), g[j]) for j in range(k)]

    def run(objective, theta0, settings):
        def fn(evaluate):
            own = _OwnEvaluations(comm, evaluate)
            return solver(own, objective, theta0, progress=progress, checkpoint=None, **settings)

        return fn

    solved = lockstep.run([run(o, x0, settings) for (o, _, settings), x0 in zip(steps, starts)], batch)
    return np.stack([np.asarray(theta, dtype=np.float64) for theta, _ in solved]), [summary for _, summary in solved]


def _newton(solver, make_problems, theta0, settings, comm, progress, checkpoint):
    return solver(comm, make_problems, theta0, progress=progress, checkpoint=checkpoint, **settings)


class ComposedStrategy:
    """The strategy of table row ``row`` over ``data`` for the ``sparkml.gpu`` loss ``loss`` (None:
    KernelSVC's Newton problems), built with ``options`` (a ``StrategyOptions``)."""

    def __init__(self, row, data, loss, options):
        self.name, self.row, self.options, self.loss = row.name, row, options, loss
        self.data = data
        self.jobs = SparkJobs(data, loss, options)
        self.transport = BarrierStage(data, loss, options, row.name) if row.barrier else self.jobs

    def loss_gradient(self, coef: np.ndarray) -> tuple:
        """(sum_i w_i l_i, sum_i w_i dl_i/dcoef) at ``coef``: one Spark job."""
        return self.jobs.sum("loss_gradient", coef)

    def loss_gradient_hessian(self, coef: np.ndarray, loss=None) -> tuple:
        """The sums above plus the Hessian block sum_i w_i h_i x~_i x~_i^T: one Spark job; ``loss``: instead of
        the strategy's (GeneralizedLinearRegression's IRLS passes, ``sparkml.gpu.glm.IRLSPass``)."""
        return self.jobs.sum("loss_gradient_hessian", coef, loss=loss)

    def minimize(
        self,
        objective,
        theta0,
        *,
        max_iter: int,
        tol: float,
        name: str,
        owlqn: bool = False,
        last_pass: bool = False,
        progress=None,
        bounds=None,
        checkpoint=None,
    ) -> tuple[np.ndarray, Any]:
        """(theta, TrainingSummary): the row's solver over ``objective`` (a ``optim.linear_objective`` without a data
        sum: the solver plugs in its transport's) from ``theta0``, L-BFGS-B-style box
        ``bounds = (lower, upper)`` over theta or None, each iteration reported to ``progress``, its state
        saved to and resumed from ``checkpoint``. ``last_pass``: no later pass reads the blocks (a barrier
        stage's tasks then delete their own)."""
        require_smooth(f"strategy {self.name!r}", objective, owlqn, bounds)
        settings = dict(options=self.options, max_iter=max_iter, tol=tol, name=name, owlqn=owlqn, bounds=bounds)
        solve = functools.partial(_minimize, self.row.minimizer(), objective, np.asarray(theta0, np.float64), settings)
        return self.transport.run(solve, last_pass=last_pass, progress=progress, checkpoint=checkpoint)

    def minimize_path(
        self, steps, theta0, *, last_pass: bool = False, progress=None, together=None
    ) -> list[tuple[np.ndarray, Any]]:
        """[(theta, TrainingSummary)] per step of a regularization path (``base.regularization_path``), in one run of
        the transport: one barrier stage, or one chain of Spark jobs on the driver. ``steps``: (objective, starts,
        settings) each, ``starts`` the candidate starts (``base.regularization_path.path_steps``: an earlier step,
        whose solution is a warm start, or None for ``theta0``), ``settings`` ``minimize``'s max_iter, tol, name,
        owlqn and bounds. A warm-started step takes at least one step of its own (``optim.minimize.run_optimizer``).
        A summary's seconds are its own solve's; in a barrier stage the first's include the stage's launch,
        rendezvous and block loading. Only the quasi-Newton rows run a path; the first-order and model-averaging
        solvers fit each map alone (``LinearEstimator._path_params``).

        ``together``: one start per step (its own ``fit``'s); instead of one after another, the steps are then
        minimized side by side, each from its start (``starts`` unused), one batched pass over the rows per
        round for all the runs still going (``optim.lockstep``): as many passes as the longest run's evaluations.
        A single-output loss without bounds only (``GridProblems.accepts``); each summary's seconds are then the
        whole run's."""
        if self.row.solver != "quasi-newton":
            raise ValueError(f"strategy {self.name!r} runs no regularization path (its maps are fitted one by one)")
        sizes = {objective.size for objective, _, _ in steps}
        if len(sizes) != 1:
            raise ValueError(f"a regularization path's objectives share one parametrization; got sizes {sorted(sizes)}")
        path = []
        for objective, start, settings in steps:
            require_smooth(f"strategy {self.name!r}", objective, settings["owlqn"], settings["bounds"])
            path.append((objective, start, dict(settings, options=self.options)))
        if together is not None:
            from sparkml.gpu.problems import GridProblems

            if not GridProblems.accepts(self.loss) or any(s["bounds"] is not None for _, _, s in path):
                raise ValueError("a path solved side by side needs a single-output loss without bounds")
            if len(together) != len(path):
                raise ValueError(f"{len(together)} starts for {len(path)} steps solved side by side")
            starts = [np.asarray(x0, np.float64) for x0 in together]
            solve = functools.partial(_minimize_together, self.row.minimizer(), path, starts, self.loss)
        else:
            solve = functools.partial(_minimize_path, self.row.minimizer(), path, np.asarray(theta0, np.float64))
        thetas, summaries = self.transport.run(solve, last_pass=last_pass, progress=progress, checkpoint=None)
        if self.row.barrier and together is None:
            # each has the stage's wall time: each its own solve's, the first the rest
            own = [s.iterationSeconds[-1] if s.iterationSeconds else 0.0 for s in summaries]
            for summary, seconds in zip(summaries[1:], own[1:]):
                summary.seconds = seconds
            summaries[0].seconds = max(summaries[0].seconds - sum(own[1:]), own[0])
        return list(zip(list(thetas), summaries))

    def newton(self, make_problems, theta0, *, last_pass=False, progress=None, checkpoint=None, **options):
        """(theta, [TrainingSummary]): the row's Newton solver over the problems ``make_problems(idx)``
        (``strategies.exact.newton``; ``options`` as ``optim.newton.newton_warm_started``'s)."""
        solver = self.row.newton_solver()
        if solver is None:
            raise ValueError(f"strategy {self.name!r} has no Newton solver (KernelSVC)")
        solve = functools.partial(_newton, solver, make_problems, np.asarray(theta0, np.float64), options)
        return self.transport.run(solve, last_pass=last_pass, progress=progress, checkpoint=checkpoint)
