"""Newton's method for several independent problems at once over distributed sums (Chapelle 2007).

Problem j minimizes

    J_j(theta_j) = (1/W) sum_i w_i l_ij(theta_j) + lambda/2 ||theta_j * penalty||^2,   W = sum_i w_i

(the intercept, last, unpenalized when ``fit_intercept``). For the primal squared-hinge SVM,
l_ij = max(0, 1 - s_ij m_ij)^2 with m_ij = phi_i . theta_j: J is convex and piecewise quadratic,
its gradient and generalized Hessian are sums over the rows (the Hessian over the active rows,
s m < 1, only):

    g = lambda penalty * theta + (1/W) sum_i w_i (-2 s_i max(0, 1 - s_i m_i)) phi~_i
    H = lambda diag(penalty) + (2/W) sum_{active} w_i phi~_i phi~_i^T,         phi~_i = [phi_i, 1]

Platt scaling is the same loop with the log loss and lambda = 0. A round is ONE distributed pass
returning the three sums for every problem still running (``evaluate``), after which the driver
solves H_j delta_j = -g_j (Cholesky) for each. The full steps are tried first and that pass
already yields the next round's sums; the problems whose step fails Armijo's test halve it, one
pass (over those problems only, with all the round's sums, so the step that passes needs no
further pass) per halving. Problem j stops when its predicted
decrease -g.delta / 2 or its actual decrease falls below ``tol * J_j``, or after ``max_iter``
rounds; typically 5 to 10 rounds.

``solver="cg"`` (truncated Newton, for many features): H is never formed; its diagonal or curvature is
returned instead and the directions come from preconditioned conjugate gradients, one pass per product, or
from a direct step where a problem has few active rows (``optim.newton_state``; a better preconditioner
when the features' second moment has a known shape: ``optim.preconditioner``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from sparkml.optim.iterations import Iteration, Progress, TrainingSummary, logger
from sparkml.optim.newton_state import NewtonProblems

if TYPE_CHECKING:
    from sparkml.gpu.loss_protocol import BlockLoss
    from sparkml.optim.checkpoint import Checkpoint

# evaluate(theta, idx, kind): the sums of a pass (``newton``'s docstring)
Evaluate = Callable[[np.ndarray, list[int], str], Sequence[np.ndarray]]
# make_problems(idx): the ``sparkml.gpu`` problem set (``OneVsRestProblems``, ``PlattProblems``) of the problems idx
MakeProblems = Callable[[list[int]], "BlockLoss"]
# on_round(rounds, export, done): ``newton``'s docstring; export() returns the state a checkpoint keeps
OnRound = Callable[[int, Callable[[], dict[str, Any]], bool], None]

_ARMIJO = 1e-4
_MIN_STEP = 1e-10
SOLVERS = ("cholesky", "cg")


def newton(
    evaluate: Evaluate,
    theta0: ArrayLike,
    *,
    reg: float,
    weight_sum: float,
    fit_intercept: bool,
    max_iter: int,
    tol: float,
    names: Sequence[str],
    solver: str = "cholesky",
    preconditioner: tuple[np.ndarray | None, np.ndarray] | None = None,
    progress: Progress | None = None,
    resume: dict[str, Any] | None = None,
    on_round: OnRound | None = None,
) -> tuple[np.ndarray, list[TrainingSummary]]:
    """Minimize every J_j from ``theta0`` ((k, p) float64); returns (theta (k, p), [TrainingSummary] * k).

    ``evaluate(theta, idx, kind)``: sums over all rows for the problems ``idx`` at ``theta``
    (len(idx), p), as the ``PartitionSums`` method ``kind`` returns them: 'loss_gradient'
    (sum w l (len,), sum w dl (len, p)), 'loss_gradient_hessian' (and the Hessians (len, p, p)),
    'loss_gradient_diagonal' (and their diagonals (len, p)), 'hessp' (theta stacked with v,
    (2, len, p): the Hessians at theta times v, a 1-tuple). ``preconditioner``: (V, s) for
    ``solver="cg"``, the shape of the features' Gram matrix (module docstring); None: Jacobi.
    ``progress``: told of every problem's every round (``optim.iterations``). ``resume``: a state
    ``on_round`` was given (a checkpoint's), from which the rounds go on as they would have;
    ``on_round(rounds, export, done)``: called after every round (``done`` False) and once at the end
    (``done`` True) with the rounds taken so far and a function returning the state to resume from.
    """
    progress = progress or Progress()
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {', '.join(SOLVERS)}; got {solver!r}")
    start = time.perf_counter()
    state = NewtonProblems(theta0, reg, weight_sum, fit_intercept, solver, preconditioner)
    if resume is None:
        running = list(range(state.theta.shape[0]))
    else:
        state.restore(resume)
        start -= max((e[-1] for e in state.ends if e), default=0.0)  # the clock goes on from the checkpoint's
        running = [j for j in range(state.theta.shape[0]) if not state.converged[j] and state.rounds[j] < max_iter]
    if running:
        state.accept(running, state.theta[running], evaluate(state.theta[running], running, state.kind))
    if resume is None:
        for j in running:
            state.history[j].append(float(state.f[j]))
    while running:
        # before the directions: a direction no round will take costs a whole CG solve
        running = [j for j in running if state.rounds[j] < max_iter]
        if not running:
            break
        state.cg_passes = state.direct_steps = 0
        deltas = state.directions(running, evaluate)
        slopes = {j: float(state.g[j] @ deltas[j]) for j in running}
        for j in list(running):
            if -slopes[j] / 2 <= tol * max(abs(state.f[j]), 1e-300):
                state.converged[j], state.message[j] = True, "predicted decrease below tol"
                running.remove(j)
        if not running:
            break
        tic = time.perf_counter()
        steps = dict.fromkeys(running, 1.0)
        candidates = np.array([state.theta[j] + deltas[j] for j in running])
        full = evaluate(candidates, running, state.kind)
        f_new = dict(zip(running, state.value(full[0], candidates)))

        # problem -> (theta, its sums) at its latest halved step
        halved: dict[int, tuple[np.ndarray, tuple[np.ndarray, ...]]] = {}
        while bad := [
            j for j in running if steps[j] > _MIN_STEP and f_new[j] > state.f[j] + _ARMIJO * steps[j] * slopes[j]
        ]:
            for j in bad:
                steps[j] /= 2
            theta_bad = np.array([state.theta[j] + steps[j] * deltas[j] for j in bad])
            # all the sums, not the loss alone: the step that passes is accepted without one more pass
            sums = evaluate(theta_bad, bad, state.kind)
            f_new.update(zip(bad, state.value(sums[0], theta_bad)))
            halved.update((j, (theta_bad[i], tuple(s[i] for s in sums))) for i, j in enumerate(bad))
        kept = [i for i, j in enumerate(running) if j not in halved]
        f_old = {j: state.f[j] for j in running}
        state.accept([running[i] for i in kept], candidates[kept], tuple(s[kept] for s in full))
        if halved:
            idx = sorted(halved)
            state.accept(
                idx,
                np.array([halved[j][0] for j in idx]),
                tuple(np.array([halved[j][1][t] for j in idx]) for t in range(len(full))),
            )
        seconds = time.perf_counter() - start
        for j in list(running):
            state.rounds[j] += 1
            state.history[j].append(float(state.f[j]))
            state.ends[j].append(seconds)
            progress(
                Iteration(
                    names[j],
                    "Newton round",
                    state.rounds[j],
                    float(state.f[j]),
                    state.theta[j].copy(),
                    time.perf_counter() - tic,
                    f"step {steps[j]:g}",
                )
            )
            if f_old[j] - state.f[j] <= tol * max(abs(state.f[j]), 1e-300):
                state.converged[j], state.message[j] = True, "relative decrease below tol"
                running.remove(j)
        logger.info(
            "Newton round over %d problem(s): %.3f s%s",
            len(steps),
            time.perf_counter() - tic,
            f", {state.cg_passes} CG passes, {state.direct_steps} direct step(s)" if solver == "cg" else "",
        )
        if on_round is not None:
            on_round(max(state.rounds), state.export, False)
    if on_round is not None:
        on_round(max(state.rounds), state.export, True)
    total = time.perf_counter() - start
    summaries = [
        TrainingSummary(state.history[j], state.rounds[j], state.converged[j], state.message[j], total, state.ends[j])
        for j in range(len(names))
    ]
    for j, s in enumerate(summaries):
        progress.note(
            f"{names[j]} finished: {s.totalIterations} Newton rounds, objective {state.f[j]:.10g} ({s.message})"
        )
    return state.theta, summaries


def newton_warm_started(
    evaluate_for: Callable[[MakeProblems], Evaluate],
    make_problems: MakeProblems,
    theta0: np.ndarray,
    warm_start: tuple[MakeProblems, int] | None = None,
    progress: Progress | None = None,
    checkpoint: Checkpoint | None = None,
    **options: Any,
) -> tuple[np.ndarray, list[TrainingSummary]]:
    """``newton`` over ``evaluate_for(make_problems)``; with ``warm_start=(make_first, rounds)``
    first at most ``rounds`` rounds over ``evaluate_for(make_first)`` from ``theta0`` (another loss
    of the same rows), whose end is the start (its summaries are dropped). ``evaluate_for`` turns a
    problem factory into an ``evaluate``: a strategy runs both solves in one Spark job or stage.

    ``checkpoint`` (``optim.checkpoint``): every ``interval`` rounds, counted over both solves, and at the end
    of each solve the state is saved (by its writer); a loaded one (``checkpoint.resume``) resumes in the
    solve it was saved in, the warm start skipped when it was done."""
    solves = [("main", make_problems, options)]
    if warm_start is not None:
        make_first, rounds = warm_start
        solves.insert(0, ("warm start", make_first, {**options, "max_iter": int(rounds)}))
    resume, offset, first = _resume(checkpoint, [name for name, _, _ in solves])
    for i, (solve, make, opts) in enumerate(solves[first:], first):
        theta0, summaries = newton(
            evaluate_for(make),
            theta0,
            progress=progress,
            resume=resume if i == first else None,
            on_round=None if checkpoint is None else _saver(checkpoint, solve, offset),
            **opts,
        )
        offset += max(s.totalIterations for s in summaries)  # the rounds this solve took, as on_round counts them
    if resume is not None:
        for s in summaries:
            s.message += f" (resumed from the checkpoint of round {resume['iteration']})"
    return theta0, summaries


def _resume(checkpoint, solves):
    """(the state to resume from or None, the rounds taken before its solve, the index of its solve)."""
    resume = None if checkpoint is None else checkpoint.resume
    if resume is None:
        return None, 0, 0
    if resume.get("method") != "newton" or resume.get("solve") not in solves:
        raise ValueError(
            f"{checkpoint.name}: the checkpoint holds a {resume.get('method')} run "
            f"({resume.get('solve')!r}), not this fit's Newton rounds"
        )
    return resume, int(resume["offset"]), solves.index(resume["solve"])


def _saver(checkpoint, solve, offset):
    def on_round(rounds, export, done):
        def record():
            return {"method": "newton", "solve": solve, "offset": offset, "iteration": offset + rounds, **export()}

        if not checkpoint.writer or rounds == 0:
            return
        if done:
            checkpoint.save(offset + rounds, record())
        else:
            checkpoint.snapshot(offset + rounds, record)

    return on_round
