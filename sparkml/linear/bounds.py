"""LogisticRegression's bound constraints, read from its four Params as MLlib reads them.

    lowerBoundsOnCoefficients <= beta <= upperBoundsOnCoefficients     Matrix (K, d)
    lowerBoundsOnIntercepts   <= b    <= upperBoundsOnIntercepts       Vector (K,)

K = 1 for a binomial model, the number of classes for a multinomial one; an unset side is -inf / +inf.
Setting any of the four makes the fit bound-constrained (MLlib's ``usingBoundConstrainedOptimization``):
L-BFGS-B (``optim.bounded``) in the scaled space (``optim.linear_objective``), the start clipped into the box,
no virtual centering when an intercept bound is finite, and the multinomial model's coefficients and
intercepts reported as fitted (not centered). The checks that need no data (elastic net, intercept
bounds without an intercept) are ``base.validation.check_bounds_params``; the shapes are checked here,
once K and d are known, with MLlib's rules.
"""

from dataclasses import dataclass

import numpy as np

from sparkml.base.validation import BOUND_PARAMS


@dataclass(frozen=True)
class CoefficientBounds:
    """The box in the user's space: coefficient bounds (K, d) and intercept bounds (K,), +-inf when unset."""

    lower_coefficients: np.ndarray
    upper_coefficients: np.ndarray
    lower_intercepts: np.ndarray
    upper_intercepts: np.ndarray

    def bounds_intercepts(self):
        """Whether some intercept bound is finite (MLlib then fits without centering the features)."""
        return bool(np.isfinite(self.lower_intercepts).any() or np.isfinite(self.upper_intercepts).any())

    def clip(self, beta, b):
        """(beta, b) clipped into the box: MLlib's start ``createInitialSolution`` makes feasible."""
        beta = np.clip(np.atleast_2d(beta), self.lower_coefficients, self.upper_coefficients)
        return beta, np.clip(np.atleast_1d(b), self.lower_intercepts, self.upper_intercepts)


def uses_bounds(est):
    """Whether any of the four bound Params is set."""
    return any(est.isSet(name) for name in BOUND_PARAMS)


def coefficient_bounds(est, n_outputs, n_features):
    """The ``CoefficientBounds`` of ``est``'s Params for K = ``n_outputs`` and d = ``n_features``, or None
    when none is set; ValueError naming the Param for a wrong shape, a NaN, or a lower bound above its upper."""
    if not uses_bounds(est):
        return None
    k, d = n_outputs, n_features
    family = "binomial" if k == 1 else "multinomial"
    values = {}
    for name in BOUND_PARAMS:
        coefficients = name.endswith("Coefficients")
        fill = -np.inf if name.startswith("lower") else np.inf
        if not est.isSet(name):
            values[name] = np.full((k, d) if coefficients else (k,), fill)
            continue
        value = est.getOrDefault(name)
        array = np.asarray(value.toArray(), dtype=np.float64)
        if coefficients and (value.numRows, value.numCols) != (k, d):
            raise ValueError(
                f"{name} must have shape ({k}, {d}) for this {family} fit: (1, number of features) for binomial "
                f"regression, or (number of classes, number of features) for multinomial regression; "
                f"got ({value.numRows}, {value.numCols})"
            )
        if not coefficients and array.shape != (k,):
            raise ValueError(
                f"{name} must have size {k} for this {family} fit: 1 for binomial regression, or the number of "
                f"classes for multinomial regression; got {array.size}"
            )
        if np.isnan(array).any():
            raise ValueError(f"{name} holds NaN")
        values[name] = array
    box = CoefficientBounds(*(values[name] for name in BOUND_PARAMS))
    for what, lower, upper in (
        ("Coefficients", box.lower_coefficients, box.upper_coefficients),
        ("Intercepts", box.lower_intercepts, box.upper_intercepts),
    ):
        if np.any(lower > upper):
            raise ValueError(
                f"lowerBoundsOn{what} must be <= upperBoundsOn{what} everywhere; got "
                f"{lower.tolist()} and {upper.tolist()}"
            )
    return box
