"""One-dimensional line searches used by L-BFGS and OWL-QN.

Both searches work on ``phi(alpha) -> (value, derivative)``, the objective restricted to the
search ray, and are told ``phi(0)`` and ``phi'(0)`` by the caller (the current iterate is already
evaluated, so this costs no objective call, as with Breeze's ``CachedDiffFunction``).  Every call
to ``phi`` is one expensive objective evaluation, so the searches follow Breeze's rules exactly:
which trial steps are tried and in which order decide how many Spark jobs an iteration costs.

``strong_wolfe``
    Breeze's ``StrongWolfeLineSearch(maxZoomIter=10, maxLineSearchIter=10)`` (Nocedal & Wright
    algorithms 3.5/3.6): grow the step by 1.5 until the interval brackets a strong-Wolfe point,
    then "zoom" with safeguarded cubic interpolation.  Used by L-BFGS.

``backtracking``
    Breeze's ``BacktrackingLineSearch`` (after liblbfgs): multiply the step by ``shrink`` when the
    Armijo condition fails or the slope is too positive, by ``grow`` when the slope is still too
    negative, and stop when both strong-Wolfe conditions hold.  Used by OWL-QN.

Deviations from Breeze, each only where Breeze would step to a NaN or infinite value:
non-finite trial values shrink the step, a NaN cubic interpolant falls back to bisection, and a
step Breeze would return unchecked at the trial cap is refused if its value is not finite.
Otherwise ``backtracking`` returns exactly Breeze's step, including a step Breeze accepts
without checking its value (see ``stale_value`` and the trial cap below), even when that step
raises the objective: MLlib's LinearSVC takes such steps, and refusing them sends the iterates
down another path.  A search that cannot find a step raises :class:`LineSearchError`, which the
optimizer handles as Breeze does (reset memory once, then stop).
"""

from __future__ import annotations

import math
from collections.abc import Callable

Phi = Callable[[float], tuple[float, float]]


class LineSearchError(Exception):
    """No acceptable step (Breeze's ``FirstOrderException`` family)."""


def _finite(*values: float) -> bool:
    return all(math.isfinite(v) for v in values)


# --------------------------------------------------------------------------------------------
# Strong Wolfe (L-BFGS)
# --------------------------------------------------------------------------------------------


def _cubic_step(lo: tuple, hi: tuple) -> float:
    """Minimiser of the cubic through two bracket ends ``(t, f, d)``, kept inside the middle 80%.

    ``lo`` must have the smaller ``t``.  Falls back to the midpoint if the cubic is undefined.
    """
    (t1, f1, d1), (t2, f2, d2) = lo, hi
    width = t2 - t1
    mid = t1 + 0.5 * width
    try:
        theta = d1 + d2 - 3.0 * (f1 - f2) / (t1 - t2)
        disc = theta * theta - d1 * d2
        gamma = math.sqrt(disc) if disc >= 0.0 else float("nan")
        t = t2 - width * (d2 + gamma - theta) / (d2 - d1 + 2.0 * gamma)
    except (ZeroDivisionError, OverflowError, ValueError):
        return mid
    if not math.isfinite(t):
        return mid
    return min(max(t, t1 + 0.1 * width), t1 + 0.9 * width)


def strong_wolfe(
    phi: Phi,
    f0: float,
    d0: float,
    init: float,
    *,
    c1: float = 1e-4,
    c2: float = 0.9,
    max_iter: int = 10,
    max_zoom: int = 10,
) -> float:
    """Step satisfying the strong Wolfe conditions, or :class:`LineSearchError`.

    Returns a step whose ``phi`` was the last one evaluated, so the caller can reuse that point.
    """
    if d0 > 0:
        raise LineSearchError(f"line search invoked with a non-descent direction ({d0:.3g})")
    armijo_slope = c1 * d0
    curvature = c2 * abs(d0)

    def zoom(lo: tuple, hi: tuple) -> float:
        # Invariants: the bracket holds a strong-Wolfe point; lo is the best sufficient-decrease
        # point seen; lo.d * (hi.t - lo.t) < 0.
        for _ in range(max_zoom):
            t = _cubic_step(hi, lo) if lo[0] > hi[0] else _cubic_step(lo, hi)
            ft, dt = phi(t)
            if not _finite(ft, dt):
                hi = (t, math.inf, math.nan)  # too far: shrink from the right
            elif ft > f0 + armijo_slope * t or ft >= lo[1]:
                hi = (t, ft, dt)
            else:
                if abs(dt) <= curvature:
                    return t
                if dt * (hi[0] - lo[0]) >= 0:
                    hi = lo
                lo = (t, ft, dt)
        raise LineSearchError("line search zoom failed")

    low = (0.0, f0, d0)
    t = init
    for i in range(max_iter):
        ft, dt = phi(t)
        if not _finite(ft, dt):
            t *= 0.5  # left the function's domain: back off
            continue
        if ft > f0 + armijo_slope * t or (i > 0 and ft >= low[1]):
            return zoom(low, (t, ft, dt))
        if abs(dt) <= curvature:
            return t
        if dt >= 0:
            return zoom((t, ft, dt), low)
        low = (t, ft, dt)
        t *= 1.5
    raise LineSearchError("line search failed")


# --------------------------------------------------------------------------------------------
# Backtracking (OWL-QN)
# --------------------------------------------------------------------------------------------


def backtracking(
    phi: Phi,
    f0: float,
    d0: float,
    init: float,
    *,
    stale_value: float | None = None,
    shrink: float = 0.5,
    grow: float = 2.1,
    c1: float = 1e-4,
    c2: float = 0.9,
    max_iter: int = 20,
    min_alpha: float = 1e-10,
    max_alpha: float = 1e10,
) -> float:
    """Breeze's ``BacktrackingLineSearch`` with strong-Wolfe checks.

    ``stale_value`` reproduces a Breeze detail (scalanlp/breeze#697) that changes the path: its
    first Armijo test compares the *initial* step against a value passed in by OWL-QN (the
    smooth objective at the current point) instead of ``phi(init)``.  When that stale test
    fails (always, without an L1 term, unless ``init * d0 * c1`` is lost in rounding), Breeze
    shrinks without looking at ``phi(init)``, so we skip that evaluation (same steps, one job
    fewer); when it passes, the step is judged on its slope only and may raise the objective,
    as in Breeze.

    After ``max_iter - 1`` trials without an acceptable step Breeze evaluates one more trial,
    drops it and returns the last step unchecked; we return the same step without that wasted
    evaluation (or raise if its value is not finite).

    Returns the step; its ``phi`` was the last one evaluated.
    """

    def multiplier(alpha: float, value: float, fa: float, da: float) -> float:
        if not _finite(fa, da):
            return shrink
        if value > f0 + alpha * d0 * c1:
            return shrink
        if da < c2 * d0:
            return grow
        if da > -c2 * d0:
            return shrink
        return 1.0

    alpha = init
    fa: float | None = None
    if stale_value is not None and stale_value > f0 + alpha * d0 * c1:
        mult = shrink
    else:
        fa, da = phi(alpha)
        value = fa if stale_value is None else stale_value
        mult = multiplier(alpha, value, fa, da)

    trial = 0
    while mult != 1.0:
        new_alpha = alpha * mult
        if new_alpha < min_alpha:
            raise LineSearchError(f"step size underflow ({new_alpha:.3g})")
        if new_alpha > max_alpha:
            raise LineSearchError(f"step size overflow ({new_alpha:.3g})")
        if trial + 1 >= max_iter:
            # Breeze evaluates one more trial, drops it and returns the current step unchecked
            # (even if it raised the objective); we skip that wasted evaluation.
            if fa is None:  # only with max_iter == 1 after the stale test
                fa, _ = phi(alpha)
            if math.isfinite(fa):
                return alpha
            raise LineSearchError(f"no acceptable step in {max_iter} trials")
        alpha = new_alpha
        trial += 1
        fa, da = phi(alpha)
        mult = multiplier(alpha, fa, fa, da)
    return alpha
