"""Result record returned by the driver-side optimizers."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class OptimResult:
    """Outcome of :func:`sparkml.optim.minimize_lbfgs`.

    Attributes
    ----------
    x : solution, float64, same (1-D) shape as ``x0``.
    fun : objective at ``x``: smooth part plus the L1 part (Breeze's "adjusted value").
    n_iter : iterations taken; always ``len(objective_history) - 1``, like MLlib's
        ``summary.totalIterations``.
    objective_history : objective at the initial point and after each iteration (MLlib's
        ``objectiveHistory``); a memory reset after a failed search repeats the last value.
        L-BFGS never increases it; OWL-QN, like Breeze's, can take a step that does (its
        backtracking returns some steps without checking their value).
    converged : True when Breeze's function-value or gradient criterion holds at ``x``.
    message : why the optimizer stopped ("gradient converged", "function values converged",
        "max iterations reached", "line search failed: ...", ...).
    n_evals : number of ``fun_grad`` calls made (each one is a Spark job).
    """

    x: np.ndarray
    fun: float
    n_iter: int
    objective_history: list[float]
    converged: bool
    message: str
    n_evals: int = field(default=0)
