"""Breeze's ``FirstOrderMinimizer.defaultConvergenceCheck`` (what MLlib's ``tol`` means).

Spark builds ``LBFGS(maxIter, 10, tol)`` / ``OWLQN(maxIter, 10, l1, tol)``, which use
``defaultConvergenceCheck(maxIter, tol, relative = true, fvalMemory = 20)``: the first of these
that holds, checked on the initial state and after every iteration, stops the run:

1. max iterations:   ``iter >= maxIter`` (``maxIter < 0`` means unlimited);
2. function values:  ``|F_k - max(window)| <= tol * |F_0|`` where ``window`` holds the last 20
   objective values and starts as ``[+inf]`` (so this cannot fire before iteration 20);
3. gradient:         ``||pg_k||_2 <= max(tol * |F_k|, 1e-8)`` (``pg`` is the pseudo-gradient
   under L1);
4. search failed:    the line search failed twice in a row (handled by the optimizer).

``F`` is the full objective (Breeze's ``adjustedValue``, including the L1 term) and ``F_0`` its
value at the initial point.
"""

from __future__ import annotations

import math
from collections import deque

MAX_ITERATIONS = "max iterations reached"
FUNCTION_VALUES = "function values converged"
GRADIENT = "gradient converged"

FVAL_MEMORY = 20
GRAD_FLOOR = 1e-8


class BreezeConvergence:
    """Stateful version of Breeze's default check for one optimisation run."""

    def __init__(self, max_iter: int, tol: float, initial_value: float, fval_memory: int = FVAL_MEMORY, values=None):
        self.max_iter = max_iter
        self.tol = tol
        self.initial_value = initial_value
        # ``values``: the window ``values`` returned (a resumed run)
        self._fvals: deque = deque([math.inf] if values is None else values, maxlen=fval_memory)

    @property
    def values(self) -> list:
        """The objective values in the window, oldest first."""
        return list(self._fvals)

    def record(self, value: float) -> None:
        """Push the objective of a newly accepted iterate (not called on a history reset)."""
        self._fvals.append(value)

    def function_values_converged(self, value: float) -> bool:
        return len(self._fvals) >= 2 and abs(value - max(self._fvals)) <= self.tol * abs(self.initial_value)

    def gradient_converged(self, value: float, grad_norm: float) -> bool:
        return grad_norm <= max(self.tol * abs(value), GRAD_FLOOR)

    def reason(self, n_iter: int, value: float, grad_norm: float) -> str | None:
        """First stopping reason in Breeze's order, or None to continue."""
        if 0 <= self.max_iter <= n_iter:
            return MAX_ITERATIONS
        if self.function_values_converged(value):
            return FUNCTION_VALUES
        if self.gradient_converged(value, grad_norm):
            return GRADIENT
        return None

    def converged(self, value: float, grad_norm: float) -> bool:
        """Whether a convergence criterion (not the iteration cap) holds."""
        return self.function_values_converged(value) or self.gradient_converged(value, grad_norm)
