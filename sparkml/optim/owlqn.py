"""OWL-QN helpers (Andrew & Gao 2007, as in Breeze's ``OWLQN``) for f(x) + sum_i l1_i |x_i|.

All functions are pure numpy and allocate new arrays (arrays handed to the objective are
never mutated afterwards).
"""

from __future__ import annotations

import numpy as np


def l1_value(x: np.ndarray, l1: np.ndarray) -> float:
    """``sum_i l1_i |x_i|``."""
    return float(np.dot(l1, np.abs(x)))


def pseudo_gradient(x: np.ndarray, g: np.ndarray, l1: np.ndarray) -> np.ndarray:
    """Minimum-norm subgradient of ``f + l1 * |x|`` (Breeze's "adjusted gradient").

    Away from zero the L1 term is differentiable: ``g_i + l1_i sign(x_i)``.  At ``x_i == 0``
    take the one-sided derivative that points downhill, or 0 when ``|g_i| <= l1_i`` (zero is
    optimal along that coordinate).  Coordinates with ``l1_i == 0`` keep ``g_i``.
    """
    pg = g + l1 * np.sign(x)
    at_zero = (x == 0) & (l1 != 0)
    if np.any(at_zero):
        gz, lz = g[at_zero], l1[at_zero]
        right, left = gz + lz, gz - lz  # derivative moving up / down from zero
        pg[at_zero] = np.where(left > 0, left, np.where(right < 0, right, 0.0))
    return pg


def constrain_direction(d: np.ndarray, pg: np.ndarray) -> np.ndarray:
    """Zero the components of the quasi-Newton direction that do not descend along ``-pg``."""
    return np.where(d * pg < 0, d, 0.0)


def orthant(x: np.ndarray, pg: np.ndarray) -> np.ndarray:
    """Orthant the step must stay in: ``sign(x_i)``, or ``sign(-pg_i)`` where ``x_i == 0``."""
    return np.where(x != 0, np.sign(x), np.sign(-pg))


def project(y: np.ndarray, orth: np.ndarray) -> np.ndarray:
    """Clip to zero every coordinate of ``y`` that left the orthant ``orth``."""
    return np.where(np.sign(y) == orth, y, 0.0)
