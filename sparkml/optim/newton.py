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
rounds; typically 5 to 10 rounds. A 1e-10 ridge keeps H positive definite when no row is active.

``solver="cg"`` (truncated Newton, for many features): H is never formed. A round's pass returns
the Hessians' diagonals instead, and H_j delta_j = -g_j is solved by Jacobi-preconditioned
conjugate gradients, each CG iteration one pass returning H_j v_j for every problem still
iterating (2 n p flops against n_active p^2 for H), stopped when ||r_j|| <= eta_j ||g_j|| with
eta_j = min(0.1, sqrt(||g_j|| / ||g_j at the start||)) (Eisenstat and Walker's forcing term: loose
far from the optimum, tight near it) or after ``_CG_MAX_ITER`` iterations. Every CG pass asks for
all the problems CG started with (those already done get a product they ignore), so the executors
can keep what they derived from theta (the active rows) for the whole round. The round's pass also
counts each problem's active rows n_j (l'' != 0); a problem with at most ``_DIRECT_ROWS_PER_COEF`` p of
them (and p at most ``_DIRECT_MAX_COEF``) takes a direct step instead: one more pass forms its H_j over
those rows (about 2 n_j p^2 flops), solved as with Cholesky. Near the optimum of a hinge the active rows
are the band's few, H_j's data part has rank n_j, and CG took 50 to 150 passes per round where this
takes one (ten-class digits, one-vs-one: 1,445 passes against about 200).

A better preconditioner when the features' second moment has a known shape
(``preconditioner=(V, s)``): ``optim.preconditioner``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from sparkml.optim.iterations import Iteration, Progress, TrainingSummary, logger
from sparkml.optim.preconditioner import check_shape, precondition

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
_RIDGE = 1e-10
_MIN_STEP = 1e-10
_CG_MAX_ITER = 250
# Newton-CG takes a direct step (H_j formed over its active rows, then solved) for a problem with at most this many
# active rows per coefficient and at most _DIRECT_MAX_COEF coefficients, the Hessians of one round's direct steps
# within _DIRECT_BYTES (float64)
_DIRECT_ROWS_PER_COEF = 8
_DIRECT_MAX_COEF = 1025
_DIRECT_BYTES = 256 << 20
SOLVERS = ("cholesky", "cg")


class _Problems:
    """The driver's state: theta, J, g, and H (cholesky) or its diagonal (cg), for every problem."""

    g0_norm: np.ndarray | None  # ||g_j|| at the first accepted point (the CG forcing terms' reference)
    history: list[list[float]]
    ends: list[list[float]]

    def __init__(self, theta0, reg, weight_sum, fit_intercept, solver, preconditioner=None):
        self.theta = np.array(theta0, dtype=np.float64, ndmin=2)
        k, p = self.theta.shape
        self.spectrum = check_shape(preconditioner, p - fit_intercept)
        self.penalty = np.ones(p)
        if fit_intercept:
            self.penalty[-1] = 0.0
        self.reg, self.weight_sum, self.solver = reg, weight_sum, solver
        self.f, self.g = np.zeros(k), np.zeros((k, p))
        self.h = np.zeros((k, p, p)) if solver == "cholesky" else np.zeros((k, p))  # H, or its diagonal
        self.curvature = np.zeros(k)  # (1/W) sum_i w_i l''_ij, with the spectral preconditioner
        self.active = np.zeros(k)  # rows with l''_ij != 0 (cg: what a direct step costs)
        self.g0_norm, self.cg_passes, self.direct_steps = None, 0, 0
        self.history, self.ends = [[] for _ in range(k)], [[] for _ in range(k)]
        self.rounds, self.converged, self.message = [0] * k, [False] * k, ["maxIter rounds reached"] * k

    @property
    def kind(self):
        """What a pass at an accepted point returns (``PartitionSums`` method name)."""
        if self.solver == "cholesky":
            return "loss_gradient_hessian"
        return "loss_gradient_diagonal" if self.spectrum is None else "loss_gradient_curvature"

    def value(self, f_sums, theta):
        return f_sums / self.weight_sum + 0.5 * self.reg * np.sum(self.penalty * theta * theta, axis=-1)

    def accept(self, idx, theta, sums):
        f_sums, g_sums, h_sums = sums[:3]
        if len(sums) > 3:  # Newton-CG's passes count each problem's active rows
            self.active[idx] = sums[3]
        self.theta[idx] = theta
        self.f[idx] = self.value(f_sums, theta)
        self.g[idx] = g_sums / self.weight_sum + self.reg * self.penalty * theta
        shift = self.reg * self.penalty + _RIDGE
        if self.kind == "loss_gradient_curvature":
            # of the diagonal only the intercept's entry is used (``_precondition``), and it is the curvature
            self.curvature[idx] = h_sums / self.weight_sum
            h_sums = np.outer(h_sums, self.penalty == 0)
        self.h[idx] = h_sums / self.weight_sum + (np.diag(shift) if self.solver == "cholesky" else shift)
        if self.g0_norm is None:
            self.g0_norm = np.linalg.norm(self.g, axis=1)

    def export(self):
        """The state a checkpoint keeps between rounds (``newton_warm_started``): theta and the per-problem
        bookkeeping; f, g and H are recomputed from theta by the resumed fit's first pass."""
        state = {
            "theta": self.theta.copy(),
            "f": self.f.copy(),
            "rounds": list(self.rounds),
            "history": [list(h) for h in self.history],
            "ends": [list(e) for e in self.ends],
            "converged": list(self.converged),
            "message": list(self.message),
        }
        if self.g0_norm is not None:
            state["g0_norm"] = np.array(self.g0_norm)
        return state

    def restore(self, state):
        """Take up ``export()``'s state; ValueError when it holds other problems than this solve's."""
        theta = np.asarray(state["theta"], dtype=np.float64)
        if theta.shape != self.theta.shape:
            raise ValueError(
                f"the checkpoint holds {theta.shape[0]} problem(s) of {theta.shape[1]} coefficients, "
                f"this fit solves {self.theta.shape[0]} of {self.theta.shape[1]}"
            )
        self.theta, self.f = theta.copy(), np.asarray(state["f"], dtype=np.float64).copy()
        self.rounds, self.converged, self.message = (
            list(state["rounds"]),
            list(state["converged"]),
            list(state["message"]),
        )
        self.history, self.ends = [list(h) for h in state["history"]], [list(e) for e in state["ends"]]
        self.g0_norm = np.asarray(state["g0_norm"]) if "g0_norm" in state else None

    def directions(self, running, evaluate):
        """{j: delta_j} solving H_j delta_j = -g_j for every running problem: by Cholesky, or by CG except for
        the problems with few active rows (``_direct``), whose H_j one more pass forms."""
        if self.solver == "cholesky":
            return {j: _solve(self.h[j], self.g[j]) for j in running}
        direct = self._direct(running)
        steps = {}
        if direct:
            shift = np.diag(self.reg * self.penalty + _RIDGE)
            h = evaluate(self.theta[direct], direct, "hessian_block")[0] / self.weight_sum
            steps = {j: _solve(h[i] + shift, self.g[j]) for i, j in enumerate(direct)}
            self.direct_steps += len(direct)
        rest = [j for j in running if j not in steps]
        return {**steps, **self._cg(rest, evaluate)} if rest else steps

    def _direct(self, running):
        """The running problems whose Newton step is solved directly: at most ``_DIRECT_ROWS_PER_COEF`` active rows
        per coefficient, the fewest first, their Hessians within ``_DIRECT_BYTES``. With n_j active rows H_j costs
        about 2 n_j p^2 flops, a CG product 2 n_j p (twice, over the rows it reads); but with n_j near p or
        below, H_j's data part has rank n_j and CG takes up to n_j products, each a pass (a Spark job or an
        all-reduce): a pair's few rows in a smoothed hinge's band took 50 to 150 per round. Beyond
        ``_DIRECT_MAX_COEF`` coefficients H_j's p^2 per row costs more than those passes (4000 landmarks: 16
        million per row), and every step is CG's."""
        p = self.theta.shape[1]
        if p > _DIRECT_MAX_COEF:
            return []
        few = sorted((j for j in running if self.active[j] <= _DIRECT_ROWS_PER_COEF * p), key=lambda j: self.active[j])
        return sorted(few[: max(0, _DIRECT_BYTES // (8 * p * p))])

    def _precondition(self, r, ids):
        """M_j^-1 r_j for the rows r of the problems ``ids`` (``optim.preconditioner``)."""
        return precondition(r, self.h[ids], self.spectrum, self.curvature[ids], self.reg + _RIDGE)

    def _cg(self, running, evaluate):
        """Preconditioned CG for all running problems at once, one Hessian-vector pass per iteration."""
        g = self.g[running]
        x, r = np.zeros_like(g), -g
        z = self._precondition(r, running)
        d, rz = z.copy(), np.sum(r * z, axis=1)
        g_norm = np.linalg.norm(g, axis=1)
        g0_norm = self.g0_norm
        assert g0_norm is not None  # set by the first accept(), before any direction
        eta = np.minimum(0.1, np.sqrt(g_norm / np.maximum(g0_norm[running], 1e-300)))
        live = list(range(len(running)))
        while self.cg_passes < _CG_MAX_ITER:
            live = [i for i in live if np.linalg.norm(r[i]) > eta[i] * g_norm[i]]
            if not live:
                break
            self.cg_passes += 1
            ids = [running[i] for i in live]
            # all of ``running``, so the pass's theta stays the round's (module docstring)
            hd = (
                evaluate(np.stack([self.theta[running], d]), running, "hessp")[0][live] / self.weight_sum
                + (self.reg * self.penalty + _RIDGE) * d[live]
            )
            alpha = rz[live] / np.maximum(np.sum(d[live] * hd, axis=1), 1e-300)
            x[live] += alpha[:, None] * d[live]
            r[live] -= alpha[:, None] * hd
            z_new = self._precondition(r[live], ids)
            rz_new = np.sum(r[live] * z_new, axis=1)
            d[live] = z_new + (rz_new / np.maximum(rz[live], 1e-300))[:, None] * d[live]
            rz[live] = rz_new
        return dict(zip(running, x))


def _solve(h, g):
    try:
        return -np.linalg.solve(h, g)  # symmetric positive definite: one factorization
    except np.linalg.LinAlgError:
        return -np.linalg.lstsq(h, g, rcond=None)[0]


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
    state = _Problems(theta0, reg, weight_sum, fit_intercept, solver, preconditioner)
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
