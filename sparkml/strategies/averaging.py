"""The ``averaging`` strategy: model averaging with DANE's gradient correction, per-round Spark jobs.

Round r broadcasts theta_r and the gradient g_r of the smooth global objective f at theta_r (one
``sync`` pass, which also gives the objective history). Every partition p, from theta_r, runs
``localIter`` iterations of the same L-BFGS / OWL-QN on its own objective, corrected so that its
gradient at theta_r is the global one (Shamir, Srebro & Zhang 2014, "DANE"):

    f_p(theta) = sum_{i in p} w_i l_i(theta) / (W_p * label_scale^2) + the same penalty
                 + (g_r - grad f_p(theta_r)) . theta

and the driver averages the local solutions weighted by the partitions' weight sums W_p:

    theta_{r+1} = sum_p W_p theta_p / sum_p W_p.

Without the correction (``corrected=False``) this is plain iterative parameter mixing, whose fixed
point is biased towards the partitions' own optima (on the tests' data: objective 1e-4 above the
optimum, coefficients 2.5% away, however many rounds); with it the global optimum is a fixed point
and the rounds converge to it. ``maxIter`` caps the rounds; it stops when the relative change of
theta falls below ``tol``.

Under bound constraints (a box l <= theta <= u) every local solve is L-BFGS-B over the same box
(``optim.bounded``), so each local solution is feasible and so is their weighted average (a box is
convex). The optimum stays a fixed point: at it the corrected local problem has the global gradient,
hence the global KKT conditions, and it is convex.
"""

import time

import numpy as np

from sparkml.optim import minimize_lbfgs
from sparkml.optim.bounded import minimize_bounded
from sparkml.optim.progress import Iteration, Progress, TrainingSummary
from sparkml.strategies.partition_sums import PartitionSums
from sparkml.strategies.sync import SyncStrategy


class _Corrected:
    """f_p(theta) + c . theta: a partition's objective with DANE's gradient correction."""

    def __init__(self, local, c):
        self.local, self.c = local, c

    def fun_grad(self, theta):
        f, g = self.local.fun_grad(theta)
        return f + float(self.c @ theta), g + self.c


def local_solve(sums, objective, theta, global_grad, local_iter, method, bounds=None):
    """This worker's corrected local solution from ``theta``: (W_p * theta_p, W_p), or None without rows.
    ``bounds``: the box (lower, upper) each local solution stays in, or None."""
    if not sums:
        return None
    w_p = float(sum(float(p.w.double().sum()) for p in sums.parts))
    local = objective.with_data_sum(sums.loss_gradient, weight_sum=w_p)
    fun = local.fun_grad
    if global_grad is not None and global_grad.size:
        fun = _Corrected(local, global_grad - local.fun_grad(theta)[1]).fun_grad
    if bounds is not None:
        res = minimize_bounded(fun, theta, bounds, max_iter=local_iter, tol=0.0)
    else:
        res = minimize_lbfgs(fun, theta, max_iter=local_iter, tol=0.0, l1=local.l1_weights(), method=method)
    return w_p * res.x, w_p


def _round_task(rows, dataset_id, loss, device, dtype, objective, bc, local_iter, method, bounds):
    theta, global_grad = (np.asarray(a) for a in bc.value)
    out = local_solve(
        PartitionSums(rows, dataset_id, loss, device, dtype), objective, theta, global_grad, local_iter, method, bounds
    )
    if out is not None:
        yield out


def run_rounds(
    distributed, average_round, theta0, *, max_iter, tol, name, corrected=True, progress=None, checkpoint=None
):
    """The rounds of model averaging, whatever carries them.

    ``distributed``: the global objective (its ``fun_grad`` is one pass over all the data);
    ``average_round(theta, global_grad or None)``: the weighted average of the local solutions.
    Returns (theta, TrainingSummary) with the exact objective after every round, each round
    reported to ``progress``. ``checkpoint`` (``optim.checkpoint``): the rounds' state (theta, the round,
    the history) is saved every interval, and a loaded one resumed (its first pass recomputes the
    correction's gradient at theta: the same values).
    """
    progress = progress or Progress()
    resume = checkpoint.resume if checkpoint is not None else None
    if resume is not None and resume.get("method") != "averaging":
        raise ValueError(f"{name}: the checkpoint holds a {resume.get('method')} run, not averaging rounds")
    ends = list(resume["iteration_seconds"]) if resume is not None else []
    start = time.perf_counter() - (ends[-1] if ends else 0.0)
    theta = np.asarray(theta0 if resume is None else resume["x"], dtype=np.float64)
    rounds, converged = (0 if resume is None else int(resume["iteration"])), False
    f, grad = distributed.fun_grad(theta)  # one pass: the objective and the correction's gradient
    history = [f + l1_penalty(distributed, theta)] if resume is None else [float(v) for v in resume["history"]]
    while rounds < max_iter:
        tic = time.perf_counter()
        new = average_round(theta, grad if corrected else None)
        change = np.linalg.norm(new - theta) / max(np.linalg.norm(new), 1.0)
        theta, rounds = new, rounds + 1
        f, grad = distributed.fun_grad(theta)
        history.append(f + l1_penalty(distributed, theta))
        ends.append(time.perf_counter() - start)
        progress(
            Iteration(
                name, "round", rounds, history[-1], theta, time.perf_counter() - tic, f"relative change {change:.3e}"
            )
        )
        if change <= tol:
            converged = True
            break
        if checkpoint is not None and rounds < max_iter:
            checkpoint.snapshot(
                rounds,
                lambda rounds=rounds, theta=theta: {
                    "method": "averaging",
                    "iteration": rounds,
                    "history": list(history),
                    "iteration_seconds": list(ends),
                    "x": theta,
                },
            )
    message = "relative change of the averaged model below tol" if converged else "maxIter rounds reached"
    if resume is not None:
        message += f" (resumed from the checkpoint of round {resume['iteration']})"
    return theta, TrainingSummary(history, rounds, converged, message, time.perf_counter() - start, ends)


class AveragingStrategy(SyncStrategy):
    """Iterative parameter mixing over the ``sync`` transport (one Spark job per round)."""

    name = "averaging"

    corrected = True  # DANE's correction (module docstring); False: plain iterative parameter mixing

    def __init__(self, data, loss, options):
        super().__init__(data, loss, options)
        self.local_iter = int(options.local_iter)

    def _round(self, objective, theta, global_grad, method, bounds=None):
        theta_bc = self.transport.share((np.ascontiguousarray(theta, dtype=np.float64), global_grad))
        dataset_id, loss, device, dtype = self.data.dataset_id, self.loss, self.device, self.data.compute_dtype
        task_objective, local_iter = objective.with_data_sum(None), self.local_iter
        try:
            total = self.transport.sum(
                lambda rows: _round_task(
                    rows, dataset_id, loss, device, dtype, task_objective, theta_bc, local_iter, method, bounds
                )
            )
        finally:
            theta_bc.unpersist(blocking=False)
        weighted, w_sum = total
        return clip(weighted / w_sum, bounds)

    def minimize(
        self,
        objective,
        theta0,
        *,
        max_iter,
        tol,
        name,
        owlqn=False,
        last_pass=False,
        progress=None,
        bounds=None,
        checkpoint=None,
    ):
        method = "owlqn" if owlqn else "auto"
        if bounds is not None and (owlqn or objective.l1_weights() is not None):
            raise ValueError(f"strategy {self.name!r}: bound constraints need a smooth objective (no L1 term)")
        return run_rounds(
            objective.with_data_sum(self.loss_gradient),
            lambda theta, grad: self._round(objective, theta, grad, method, bounds),
            theta0,
            max_iter=max_iter,
            tol=tol,
            name=name,
            corrected=self.corrected,
            progress=progress,
            checkpoint=checkpoint,
        )


def clip(theta, bounds):
    """``theta`` clipped into the box ``bounds`` (the average of feasible points, up to its rounding)."""
    return theta if bounds is None else np.clip(theta, bounds[0], bounds[1])


def l1_penalty(objective, theta):
    w = objective.l1_weights()
    return 0.0 if w is None else float(np.sum(w * np.abs(theta)))
