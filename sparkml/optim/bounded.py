"""L-BFGS-B for MLlib's bound-constrained fits (LogisticRegression's bounds, the huber scale sigma > 0).

The solver is scipy's L-BFGS-B (Byrd, Lu, Nocedal & Zhu 1995; Morales & Nocedal 2011), the reference
implementation of the method MLlib runs through Breeze's ``LBFGSB(lower, upper, maxIter, m = 10, tol)``:

    minimize f(x)  subject to  l <= x <= u        (l_i may be -inf, u_i +inf; l_i == u_i fixes x_i)

with 10 correction pairs, as MLlib. Each iteration finds the generalized Cauchy point along the projected
steepest descent path, minimizes the quasi-Newton model over the free variables and line-searches back
into the box, so every iterate, and the result, is feasible.

Stopping: MLlib's ``tol`` with Breeze's rules, checked here (not by scipy) on the initial point and after
every iteration; the first that holds ends the run:

1. projected gradient: ``||pg||_2 <= max(tol * |f_k|, 1e-8)`` with ``pg = P(x - g) - x`` (P clips into
   the box; pg = -g where no bound is active, so this is then exactly Breeze's gradient rule);
2. iterations: ``iter >= maxIter``;
3. function values: ``|f_k - max(last 20 values)| <= tol * |f_0|`` (``convergence.BreezeConvergence``).

Breeze's ``LBFGSB.defaultConvergenceCheck`` has rules 2 and 3, its gradient rule on the full gradient
(which a KKT point with an active bound never meets) and instead ``||pg||_inf < 1e-5``: absolute,
whatever ``tol`` is. On a poorly conditioned box problem that leaves the coefficients up to about 1e-4
from the optimum (5e-5 on ``tests/test_bounds.py``'s intercept-bound case, where MLlib itself happened
to stop 4e-6 from it): rule 1 is that absolute test replaced by Breeze's own relative one, so a fit
stops no looser than MLlib's whenever tol |f| <= 1e-5 (default tol 1e-6, |f| of order 1).

scipy's own tests are switched off (``gtol = 0``, ``ftol = 0``: it stops by itself only when an
iteration no longer decreases f, or its line search fails, which ends the run as Breeze's second failed
search does: not converged). The iterates differ from Breeze's (scipy's line search is its own; the
first iterations often agree), the optimum does not.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from .convergence import MAX_ITERATIONS, BreezeConvergence
from .result import OptimResult

PROJECTED_GRADIENT = "projected gradient converged"
GRAD_FLOOR = 1e-8  # Breeze's floor under tol * |f|
MEMORY = 10  # correction pairs, as MLlib's LBFGSB(..., 10, tol)


class _Stop(Exception):
    """Raised from scipy's callback to end the run on one of Breeze's rules."""


def check_bounds(lower, upper, size):
    """(lower, upper) as float64 arrays of ``size``; ValueError unless lower <= upper and neither is NaN."""
    lower = np.array(lower, dtype=np.float64).reshape(-1)
    upper = np.array(upper, dtype=np.float64).reshape(-1)
    if lower.shape != (size,) or upper.shape != (size,):
        raise ValueError(f"bounds need {size} lower and upper values; got {lower.size} and {upper.size}")
    if np.isnan(lower).any() or np.isnan(upper).any() or np.any(lower > upper):
        raise ValueError("bounds need lower <= upper everywhere, without NaN")
    return lower, upper


def projected_gradient(x, g, lower, upper):
    """P(x - g) - x: the step to the box's point nearest x - g (zero exactly at a KKT point)."""
    return np.clip(x - g, lower, upper) - x


def minimize_bounded(
    fun_grad: Callable,
    x0,
    bounds: tuple[ArrayLike, ArrayLike],
    *,
    max_iter: int = 100,
    tol: float = 1e-6,
    callback: Callable | None = None,
    min_iter: int = 0,
) -> OptimResult:
    """Minimize ``fun_grad``'s function over the box ``bounds = (lower, upper)`` from ``x0`` (clipped
    into the box first) by scipy's L-BFGS-B with Breeze's stopping rules (module docstring).

    ``callback(iteration, x, f, projected_gradient_norm)`` after every iteration. ``max_iter`` < 0:
    no cap. ``min_iter``: the convergence rules (1 and 3) stop the run only after this many iterations, unless
    the projected gradient norm is at most 1e-8 (a warm start: ``optim.minimize.run_optimizer``). Returns an
    ``OptimResult`` (history: f at x0, then after every iteration).
    """
    from scipy.optimize import minimize

    x0 = np.array(x0, dtype=np.float64).reshape(-1)
    lower, upper = check_bounds(*bounds, x0.size)
    x0 = np.clip(x0, lower, upper)
    if not tol >= 0:
        raise ValueError("tol must be >= 0")
    # x bytes -> (f, g): scipy's callback gets x only, each point is one distributed pass
    evaluated: dict[bytes, tuple[float, np.ndarray]] = {}
    calls = [0]

    def evaluate(x):
        key = x.tobytes()
        if key not in evaluated:
            f, g = fun_grad(np.array(x, dtype=np.float64))
            calls[0] += 1
            if len(evaluated) > 8:
                evaluated.clear()
            evaluated[key] = (float(f), np.asarray(g, dtype=np.float64).reshape(-1))
        return evaluated[key]

    f0, g0 = evaluate(x0)
    history = [f0]
    if not (math.isfinite(f0) and np.all(np.isfinite(g0))):
        return OptimResult(
            x0, f0, 0, history, False, "objective or gradient is not finite at the initial point", calls[0]
        )
    check = BreezeConvergence(max_iter, tol, f0)
    state = {"x": x0, "f": f0, "n": 0}

    def reason(x, f, g):
        pg = float(np.linalg.norm(projected_gradient(x, g, lower, upper)))
        held = state["n"] < min_iter and pg > GRAD_FLOOR  # a warm start: no convergence before its own steps
        if pg <= max(tol * abs(f), GRAD_FLOOR) and not held:
            return PROJECTED_GRADIENT, pg
        why = check.reason(state["n"], f, math.inf)  # max iterations, function values
        return (None if held and why != MAX_ITERATIONS else why), pg

    why, _ = reason(x0, f0, g0)
    if why is not None:
        return OptimResult(x0.copy(), f0, 0, history, why != "max iterations reached", why, calls[0])

    def on_iteration(xk):
        x = np.array(xk, dtype=np.float64)
        f, g = evaluate(x)
        state.update(x=x, f=f, n=state["n"] + 1)
        history.append(f)
        check.record(f)
        why, pg = reason(x, f, g)
        if callback is not None:
            callback(state["n"], x, f, pg)
        if why is not None:
            state["why"] = why
            raise _Stop

    options = dict(
        maxcor=MEMORY, gtol=0.0, ftol=0.0, maxiter=max_iter + 1 if max_iter >= 0 else 2**31 - 1, maxfun=2**31 - 1
    )
    try:
        res = minimize(
            lambda x: (evaluate(x)[0], evaluate(x)[1].copy()),
            x0,
            jac=True,
            method="L-BFGS-B",
            bounds=list(zip(lower, upper)),
            callback=on_iteration,
            options=options,
        )
        message = f"L-BFGS-B stopped: {res.message}"
        x, f, converged = state["x"], state["f"], False
    except _Stop:
        message = state["why"]
        x, f, converged = state["x"], state["f"], message != "max iterations reached"
    return OptimResult(x.copy(), f, state["n"], history, converged, message, calls[0])


def require_smooth(name, objective, owlqn, bounds):
    """ValueError unless a box ``bounds`` (None: no box) comes with a smooth objective: L-BFGS-B takes no L1
    term (and OWL-QN no box). ``name`` leads the message."""
    if bounds is not None and (owlqn or objective.l1_weights() is not None):
        raise ValueError(f"{name}: bound constraints need a smooth objective (no L1 term, no OWL-QN)")
