"""The ``dane`` solver (strategies ``averaging`` and ``allreduce-averaging``): model averaging with DANE's
gradient correction, one sum of the local solutions per round.

Round r sends theta_r and the gradient g_r of the smooth global objective f at theta_r (one exact
pass, which also gives the objective history) to the workers: the partitions (``averaging``, a Spark job
per round) or the barrier tasks (``allreduce-averaging``, each over all the blocks it holds). Every worker p,
from theta_r, runs ``localIter`` iterations of the same L-BFGS / OWL-QN on its own objective, corrected so
that its gradient at theta_r is the global one (Shamir, Srebro & Zhang 2014, "DANE"):

    f_p(theta) = sum_{i in p} w_i l_i(theta) / (W_p * label_scale^2) + the same penalty
                 + (g_r - grad f_p(theta_r)) . theta

and the local solutions are averaged, weighted by the workers' weight sums W_p:

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

import functools
import time

import numpy as np

from sparkml.optim import minimize_lbfgs
from sparkml.optim.bounded import minimize_bounded
from sparkml.optim.iterations import Iteration, Progress, TrainingSummary
from sparkml.strategies.exact import distributed


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


def _local_round(objective, local_iter, method, bounds, sums, theta, global_grad):
    """A worker's share of a round: ``local_solve`` over its rows from ``theta`` (``strategies.job_transport``'s and
    ``BarrierTask``'s ``sum_of`` call it with the round's values)."""
    return local_solve(sums, objective, theta, global_grad, local_iter, method, bounds)


def dane(comm, objective, theta0, *, options, max_iter, tol, name, owlqn, bounds, progress, checkpoint):
    """The rounds of the module docstring over the communicator ``comm`` -> (theta, TrainingSummary): each
    round's weighted local solutions summed over the workers (the partitions on ``jobs``, the barrier tasks on
    ``barrier``), the global objective and gradient an exact sum."""
    method = "owlqn" if owlqn else "auto"
    share = functools.partial(_local_round, objective, int(options.local_iter), method, bounds)

    def average_round(theta, global_grad):
        weighted, w_sum = comm.sum_of(share, [theta.shape, ()], theta, global_grad)
        return clip(weighted / w_sum, bounds)

    return run_rounds(
        distributed(objective, comm),
        average_round,
        theta0,
        max_iter=max_iter,
        tol=tol,
        name=name,
        progress=progress,
        checkpoint=checkpoint,
    )


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


def clip(theta, bounds):
    """``theta`` clipped into the box ``bounds`` (the average of feasible points, up to its rounding)."""
    return theta if bounds is None else np.clip(theta, bounds[0], bounds[1])


def l1_penalty(objective, theta):
    w = objective.l1_weights()
    return 0.0 if w is None else float(np.sum(w * np.abs(theta)))
