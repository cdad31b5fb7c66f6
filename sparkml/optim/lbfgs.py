"""L-BFGS / OWL-QN driver loop reproducing Breeze's ``LBFGS`` and ``OWLQN`` as used by MLlib."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .convergence import GRAD_FLOOR, MAX_ITERATIONS, BreezeConvergence
from .history import CurvatureError, InverseHessian
from .line_search import LineSearchError, backtracking, strong_wolfe
from .owlqn import constrain_direction, l1_value, orthant, project, pseudo_gradient
from .result import OptimResult

FunGrad = Callable[[np.ndarray], tuple[float, np.ndarray]]
Callback = Callable[[int, np.ndarray, float, float], None]
Snapshot = Callable[[int, Callable[[], dict]], None]

_METHODS = ("auto", "lbfgs", "owlqn")
_MIN_STEP_TIMES_GRAD = 1e-10  # Breeze LBFGS: alpha * ||g|| below this is an underflow


class _Point:
    """An evaluated iterate: smooth value/gradient and full objective/pseudo-gradient."""

    __slots__ = ("x", "f", "g", "F", "pg", "pg_norm")

    def __init__(self, x, f, g, F, pg):
        self.x, self.f, self.g, self.F, self.pg = x, f, g, F, pg
        self.pg_norm = float(np.linalg.norm(pg))

    @property
    def finite(self) -> bool:
        return math.isfinite(self.F) and bool(np.all(np.isfinite(self.pg)))


def _make_evaluator(fun_grad: FunGrad, l1: np.ndarray | None):
    calls = [0]

    def evaluate(x: np.ndarray) -> _Point:
        f, g = fun_grad(x)
        calls[0] += 1
        f = float(f)
        g = np.asarray(g, dtype=np.float64)
        if g.shape != x.shape:
            if g.size != x.size:
                raise ValueError(f"fun_grad returned a gradient of shape {g.shape}, expected {x.shape}")
            g = g.reshape(x.shape)
        if l1 is None:
            return _Point(x, f, g, f, g)
        return _Point(x, f, g, f + l1_value(x, l1), pseudo_gradient(x, g, l1))

    return evaluate, calls


def _search(evaluate, point_at, direction, search, **kw) -> tuple[_Point, float]:
    """Run a line search along ``point_at(alpha)`` and return the accepted evaluated point."""
    last: list = [None, None]

    def phi(alpha: float):
        p = evaluate(point_at(alpha))
        last[0], last[1] = alpha, p
        return p.F, float(np.dot(p.pg, direction))

    alpha = search(phi, **kw)
    if last[0] != alpha:  # searches end on their last trial; be safe
        phi(alpha)
    return last[1], alpha


def _lbfgs_step(cur: _Point, memory: InverseHessian, it: int, evaluate) -> _Point:
    d = memory.direction(cur.g)
    dnorm = float(np.linalg.norm(d))
    if not 0 < dnorm < math.inf:
        # Breeze would run its line search on NaN/inf points and fail after 10 trials; fail
        # now (same reset-then-stop handling, without the wasted evaluations).
        raise LineSearchError("degenerate search direction")
    init = 1.0 / dnorm if it == 0 else 1.0
    new, alpha = _search(
        evaluate, lambda a: cur.x + a * d, d, strong_wolfe, f0=cur.F, d0=float(np.dot(cur.g, d)), init=init
    )
    if alpha * cur.pg_norm < _MIN_STEP_TIMES_GRAD:
        raise LineSearchError(f"step size underflow ({alpha:.3g})")
    return new


def _owlqn_step(cur: _Point, memory: InverseHessian, it: int, evaluate) -> _Point:
    d = constrain_direction(memory.direction(cur.pg), cur.pg)  # NaN components become 0
    if not np.any(d):
        # Nothing left after the orthant correction: Breeze's backtracking accepts its first
        # step at once (zero slope), the trial point is the current one (a cache hit), so the
        # "step" is a null step; the next direction then finds s'y = 0 and resets the memory.
        return cur
    d0 = float(np.dot(cur.pg, d))
    orth = orthant(cur.x, cur.pg)
    if it < 1:  # Breeze: 0.5 / ||grad of smooth part||
        gnorm = float(np.linalg.norm(cur.g))
        init = 0.5 / gnorm if 0 < gnorm < math.inf else 0.5 / cur.pg_norm
        shrink = 0.1
    else:
        init, shrink = 1.0, 0.5
    new, _ = _search(
        evaluate,
        lambda a: project(cur.x + a * d, orth),
        d,
        backtracking,
        f0=cur.F,
        d0=d0,
        init=init,
        stale_value=cur.f,
        shrink=shrink,
    )
    return new


def minimize_lbfgs(
    fun_grad: FunGrad,
    x0,
    *,
    max_iter: int = 100,
    tol: float = 1e-6,
    m: int = 10,
    l1=None,
    callback: Callback | None = None,
    method: str = "auto",
    snapshot: Snapshot | None = None,
    resume: dict | None = None,
    min_iter: int = 0,
) -> OptimResult:
    """Minimise ``fun_grad``'s function (+ ``sum(l1 * |x|)``) like Breeze's LBFGS / OWLQN.

    Parameters
    ----------
    fun_grad : ``x -> (f, g)`` for the smooth part (data loss + L2), float64.  Called once per
        line-search trial; never with the same point twice in a row.
    x0 : 1-D initial point.
    max_iter : cap on accepted steps (MLlib ``maxIter``, Breeze's ``state.iter``); a memory reset
        after a failed search adds a history entry but no step. 0 returns ``x0`` evaluated;
        negative means no cap.
    tol : convergence tolerance of Breeze's default check (MLlib ``tol``).
    m : number of correction pairs kept (MLlib uses 10).
    l1 : None or per-coordinate L1 strengths (>= 0, 0 for intercepts).
    callback : ``callback(iteration, x, f, grad_norm)`` after every iteration, with the iterate,
        the full objective and the norm of the (pseudo-)gradient.
    method : "auto" (OWL-QN iff some ``l1 > 0``), "lbfgs", or "owlqn" to run OWL-QN even with
        no L1 term, as MLlib's LinearSVC does (its steps are then still orthant-projected).
    snapshot : ``snapshot(iteration, export)`` after every iteration that does not end the run, where
        ``export()`` returns the loop's whole state (a dict of numbers, lists and arrays:
        ``optim.checkpoint``).
    resume : a state ``export`` returned: the run continues from it (``x0`` only gives the shape) and
        takes exactly the steps the run that exported it would have taken.
    min_iter : the convergence rules stop the run only after this many accepted steps, unless the
        (pseudo-)gradient norm is at most Breeze's floor 1e-8 (a warm start at another objective's
        solution: ``optim.minimize.run_optimizer``); the iteration cap and failed searches still stop it.
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    x0 = np.array(x0, dtype=np.float64, copy=True)
    if x0.ndim != 1:
        raise ValueError(f"x0 must be 1-D, got shape {x0.shape}")
    if l1 is not None:
        l1 = np.array(l1, dtype=np.float64, copy=True).reshape(-1)
        if l1.shape != x0.shape:
            raise ValueError(f"l1 has shape {l1.shape}, expected {x0.shape}")
        if not np.all(np.isfinite(l1)) or np.any(l1 < 0):
            raise ValueError("l1 strengths must be finite and >= 0")
    has_l1 = l1 is not None and bool(np.any(l1 > 0))
    if method == "lbfgs" and has_l1:
        raise ValueError("method='lbfgs' cannot handle a nonzero l1; use 'auto' or 'owlqn'")
    use_owlqn = method == "owlqn" or (method == "auto" and has_l1)
    if use_owlqn and l1 is None:
        l1 = np.zeros_like(x0)
    if not use_owlqn:
        l1 = None
    max_iter = -1 if max_iter is None else int(max_iter)
    if not tol >= 0:
        raise ValueError("tol must be >= 0")

    evaluate, calls = _make_evaluator(fun_grad, l1)
    kind = "owlqn" if use_owlqn else "lbfgs"
    memory = InverseHessian(m)
    if resume is None:
        cur = evaluate(x0)
        history = [cur.F]
        if not cur.finite:
            return OptimResult(
                x0, cur.F, 0, history, False, "objective or gradient is not finite at the initial point", calls[0]
            )
        check = BreezeConvergence(max_iter, tol, cur.F)
        accepted = 0  # Breeze's state.iter: steps actually taken
        n_iter = 0  # states emitted after the initial one (MLlib totalIterations)
        resets = 0
        failed_once = False
    else:
        if resume["method"] != kind or np.shape(resume["x"]) != x0.shape:
            raise ValueError(
                f"cannot resume a {resume['method']} run over {np.shape(resume['x'])} as a {kind} run over {x0.shape}"
            )
        arrays = {k: np.array(resume[k], dtype=np.float64) for k in ("x", "g", "pg")}
        cur = _Point(arrays["x"], float(resume["f"]), arrays["g"], float(resume["F"]), arrays["pg"])
        history = [float(v) for v in resume["history"]]
        check = BreezeConvergence(max_iter, tol, float(resume["initial_value"]), values=resume["window"])
        memory.restore(resume["s"], resume["y"])
        accepted, n_iter, resets = int(resume["accepted"]), int(resume["iteration"]), int(resume["resets"])
        failed_once = bool(resume["failed_once"])
        calls[0] = int(resume["evaluations"])

    def export():
        s, y = memory.pairs(cur.x.size)
        return {
            "method": kind,
            "iteration": n_iter,
            "accepted": accepted,
            "resets": resets,
            "failed_once": failed_once,
            "evaluations": calls[0],
            "history": list(history),
            "initial_value": check.initial_value,
            "window": check.values,
            "f": cur.f,
            "F": cur.F,
            "x": cur.x,
            "g": cur.g,
            "pg": cur.pg,
            "s": s,
            "y": y,
        }

    def stop(point):
        why = check.reason(accepted, point.F, point.pg_norm)
        if why is not None and why != MAX_ITERATIONS and accepted < min_iter and point.pg_norm > GRAD_FLOOR:
            return None  # a warm start: no stop before its own steps
        return why

    step = _owlqn_step if use_owlqn else _lbfgs_step
    reason = stop(cur)
    while reason is None:
        failure = None
        try:
            new = step(cur, memory, accepted, evaluate)
        except (LineSearchError, CurvatureError) as exc:
            failure = exc
        give_up = failure is not None and failed_once
        if failure is None:
            memory.update(new.x - cur.x, new.g - cur.g)
            check.record(new.F)
            cur, accepted, failed_once = new, accepted + 1, False
        elif not failed_once:
            # Breeze: on the first failure drop the curvature memory and retry from the same
            # point (steepest descent); the unchanged state is emitted (objectiveHistory gets
            # its value again) but is not a step, so it does not count towards max_iter.
            memory.reset()
            resets += 1
            failed_once = True
        n_iter += 1
        history.append(cur.F)
        if callback is not None:
            callback(n_iter, cur.x, cur.F, cur.pg_norm)
        if give_up:
            reason = f"line search failed: {failure}"
        else:
            # Breeze's iteration cap counts accepted steps (state.iter), not emitted states:
            # a history reset after a failed search is emitted but does not count.
            reason = stop(cur)
        if reason is None and snapshot is not None:
            snapshot(n_iter, export)

    if resets:
        reason += f" ({resets} memory reset{'s' if resets > 1 else ''} after failed steps)"
    return OptimResult(cur.x.copy(), cur.F, n_iter, history, check.converged(cur.F, cur.pg_norm), reason, calls[0])
