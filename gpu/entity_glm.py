"""Many small ridge-penalized GLMs solved together: one per entity (a member, an item, a region) of a random effect.

Entity e owns the rows i with e(i) = e and the coefficients theta_e = (a_e, g_e) (an intercept and one
coefficient per feature of the effect's own vector z_i). With the row's offset o_i (the other blocks' scores plus
any user offset) it minimizes

    F_e(theta_e) = sum_{i: e(i) = e} w_i l(y_i, o_i + a_e + z_i . g_e) + lambda / 2 (a_e^2 + |g_e|^2)

with l the family's negative log-likelihood per unit weight, up to a constant, under its canonical link:

    gaussian  l(y, eta) = (y - eta)^2 / 2          l' = eta - y          l'' = 1
    binomial  l(y, eta) = log(1 + e^eta) - y eta   l' = sigmoid(eta) - y l'' = sigmoid(eta) (1 - sigmoid(eta))
    poisson   l(y, eta) = e^eta - y eta            l' = e^eta - y        l'' = e^eta

Each F_e is strictly convex (lambda > 0), so its minimum is unique. ``solve_entities`` runs Newton's method on all
of a partition's entities at once: per iteration one pass over the rows sums every entity's gradient and
(k x k) Hessian (k = 1 + the effect's features) with ``index_add_``, one batched ``torch.linalg.solve`` gives all
the steps, and a backtracking line search halves the step of each entity whose objective would not fall
enough (Armijo, 1e-4, to F_e's rounding). It stops when every entity's step is below ``tol`` (infinity norm, relative to
max(1, |theta_e|)), or after ``max_iter`` iterations. No pyspark: a Spark task calls it on its rows, on its
GPU where it has one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["ENTITY_FAMILIES", "EntitySolution", "entity_loss", "solve_entities"]

ENTITY_FAMILIES = ("gaussian", "binomial", "poisson")
_ARMIJO = 1e-4
_HALVINGS = 30
_ROUNDING = 8 * torch.finfo(torch.float64).eps
_ROW_CHUNK = 1 << 18  # rows whose k x k outer products are formed at once (memory: chunk x k^2 doubles)
_MAX_ETA = 700.0  # exp() stays finite in float64


def entity_loss(family: str, y: torch.Tensor, eta: torch.Tensor) -> torch.Tensor:
    """l(y_i, eta_i) of each row (module docstring)."""
    if family == "gaussian":
        return 0.5 * (y - eta) ** 2
    if family == "binomial":
        return torch.nn.functional.softplus(eta) - y * eta
    if family == "poisson":
        return torch.exp(torch.clamp(eta, max=_MAX_ETA)) - y * eta
    raise ValueError(f"family {family!r}: the entity solve takes {', '.join(ENTITY_FAMILIES)}")


def _derivatives(family: str, y: torch.Tensor, eta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(l', l'') of each row."""
    if family == "gaussian":
        return eta - y, torch.ones_like(eta)
    if family == "binomial":
        p = torch.sigmoid(eta)
        return p - y, p * (1.0 - p)
    mu = torch.exp(torch.clamp(eta, max=_MAX_ETA))
    return mu - y, mu


@dataclass
class EntitySolution:
    """``theta`` (m, k): each entity's (a_e, g_e); ``objective`` (m,): F_e there; ``iterations``: Newton
    iterations run; ``converged``: every step fell below ``tol``."""

    theta: torch.Tensor
    objective: torch.Tensor
    iterations: int
    converged: bool


def _objectives(family, codes, design, y, w, offset, theta, lam, m):
    eta = offset + (design * theta[codes]).sum(dim=1)
    per_row = w * entity_loss(family, y, eta)
    data = torch.zeros(m, dtype=theta.dtype, device=theta.device).index_add_(0, codes, per_row)
    return data + 0.5 * lam * (theta * theta).sum(dim=1)


def _gradient_hessian(family, codes, design, y, w, offset, theta, lam, m):
    k = design.shape[1]
    grad = lam * theta
    hess = torch.eye(k, dtype=theta.dtype, device=theta.device).expand(m, k, k) * lam
    hess = hess.clone()
    for start in range(0, design.shape[0], _ROW_CHUNK):
        rows = slice(start, start + _ROW_CHUNK)
        z, c = design[rows], codes[rows]
        eta = offset[rows] + (z * theta[c]).sum(dim=1)
        d1, d2 = _derivatives(family, y[rows], eta)
        grad = grad.index_add(0, c, (w[rows] * d1)[:, None] * z)
        hess.index_add_(0, c, (w[rows] * d2)[:, None, None] * z[:, :, None] * z[:, None, :])
    return grad, hess


def solve_entities(
    family: str,
    codes: torch.Tensor,
    features: torch.Tensor | None,
    y: torch.Tensor,
    w: torch.Tensor,
    offset: torch.Tensor,
    reg_param: float,
    n_entities: int,
    start: torch.Tensor | None = None,
    max_iter: int = 100,
    tol: float = 1e-10,
) -> EntitySolution:
    """Every entity's minimum of F_e (module docstring). ``codes`` (n,): each row's entity in [0,
    ``n_entities``); ``features`` (n, p) or None (an intercept-only effect); ``y``, ``w``, ``offset`` (n,);
    ``reg_param``: lambda > 0; ``start`` (m, 1 + p): the warm start (zeros when None). Every tensor on one
    device, float64."""
    if family not in ENTITY_FAMILIES:
        raise ValueError(f"family {family!r}: the entity solve takes {', '.join(ENTITY_FAMILIES)}")
    if not reg_param > 0:
        raise ValueError(f"reg_param must be > 0 (got {reg_param})")
    n = y.shape[0]
    ones = torch.ones((n, 1), dtype=y.dtype, device=y.device)
    design = ones if features is None or features.shape[1] == 0 else torch.cat([ones, features], dim=1)
    k, m = design.shape[1], n_entities
    theta = torch.zeros((m, k), dtype=y.dtype, device=y.device) if start is None else start.clone()
    args = (family, codes, design, y, w, offset)
    current = _objectives(*args, theta, reg_param, m)
    iterations, converged = 0, False
    while iterations < max_iter:
        grad, hess = _gradient_hessian(*args, theta, reg_param, m)
        step = torch.linalg.solve(hess, grad.unsqueeze(-1)).squeeze(-1)
        scale = torch.clamp(theta.abs().amax(dim=1), min=1.0)
        moving = step.abs().amax(dim=1) / scale >= tol
        iterations += 1
        if not bool(moving.any()):
            converged = True
            break
        slope = (grad * step).sum(dim=1)  # the decrease's first-order term, >= 0 (H is positive definite)
        t = torch.ones(m, dtype=y.dtype, device=y.device)
        pending = moving.clone()
        trial_theta = theta.clone()
        for _ in range(_HALVINGS):
            trial_theta[pending] = theta[pending] - t[pending, None] * step[pending]
            trial = _objectives(*args, trial_theta, reg_param, m)
            rounding = _ROUNDING * current.abs()  # near the minimum the decrease is below F_e's own rounding
            accepted = pending & (trial <= current - _ARMIJO * t * slope + rounding)
            current = torch.where(accepted, trial, current)
            pending &= ~accepted
            if not bool(pending.any()):
                break
            t = torch.where(pending, t * 0.5, t)
        trial_theta[pending] = theta[pending]  # no decrease found: at the optimum to rounding
        theta = trial_theta
    return EntitySolution(theta, current, iterations, converged)
