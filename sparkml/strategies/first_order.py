"""What the first-order solvers (``ssp``'s ``piag``, ``gossip``) share: the split objective, its proximal step and
a step size from the data's curvature.

Both minimize MLlib's objective (``optim.linear_objective``) F = f + R over the m ranks of one barrier stage,
each rank holding its share of the rows:

    f(theta)   = (1/m) sum_i f_i(theta),   f_i(theta) = m D_i(theta) / (W label_scale^2) + L2 penalty
    R(theta)   = lambda_1 sum_kj q_j |C_kj|   (+ the indicator of the box under bound constraints)

with D_i the weighted loss sum of rank i's rows and W the total weight, so that F is exactly the
objective ``sync`` minimizes. The smooth f takes gradient steps; R takes its proximal step, exact:
soft-thresholding by step * lambda_1 q_j, then the projection onto the box.

Step sizes come from a Lipschitz constant of grad f_i (``local_lipschitz``): the loss's curvature bound
(``sparkml.gpu`` losses' ``curvature``: 1/4 logistic, 1/2 softmax, 1 squared) times the largest
eigenvalue of the rank's scaled Gram matrix, from one pass over its rows, plus the L2 strength. The
hinge has no curvature bound: its (sub)gradient steps use the Gram's eigenvalue alone, and a fixed-step
method then ends in a neighbourhood of the optimum, not at it.
"""

import numpy as np

from sparkml.gpu import SquaredLoss
from sparkml.strategies.averaging import clip, l1_penalty

GRAM_LIMIT = 2048  # above this many coefficients per output, the Gram's eigenvalue comes from passes


def proximal_operator(objective, bounds):
    """prox(z, step): the proximal step of step * R (module docstring) at z."""
    l1 = objective.l1_weights()

    def prox(z, step):
        if l1 is not None:
            z = np.sign(z) * np.maximum(np.abs(z) - step * l1, 0.0)
        return clip(z, bounds)

    return prox


def composite_value(objective, f, theta):
    """F = f + R at theta, given f there (R's box indicator is 0 on the iterates: they are projected)."""
    return f + l1_penalty(objective, theta)


def local_objective(objective, sums, world):
    """f_i over this rank's rows (``sums``: its ``PartitionSums``; a rank without rows has D_i = 0)."""
    size = np.shape(objective.loss_coef(np.zeros(objective.size)))

    def data_sum(coef):
        part = sums.loss_gradient(coef) if sums else None
        return (0.0, np.zeros(size)) if part is None else part

    return objective.with_data_sum(data_sum, weight_sum=objective.weight_sum / world)


def power_iteration(operator, n, iterations=300, rtol=1e-9):
    """The largest eigenvalue of the symmetric positive semi-definite ``operator`` on R^n."""
    v = np.random.RandomState(0).standard_normal(n)
    v /= np.linalg.norm(v)
    value = 0.0
    for _ in range(iterations):
        w = operator(v)
        new = float(v @ w)
        norm = np.linalg.norm(w)
        if norm == 0:
            return 0.0
        v = w / norm
        if abs(new - value) <= rtol * abs(new):
            return new
        value = new
    return value


def local_lipschitz(objective, sums, world, loss):
    """A Lipschitz constant of grad f_i on this rank (module docstring).

    The data term's Hessian in theta is J^T (sum_i w_i x~_i x~_i^T) J / (W label_scale^2) times the loss's
    second derivative, J the linear map theta -> loss coefficients; the Gram matrix comes from one pass of
    the squared loss (its Hessian block), and J^T G J v is the objective's own gradient with G as the data
    term, less the L2 term's gradient (the same objective over a zero data term)."""
    p = objective.loss_coef(np.zeros(objective.size)).shape[-1]
    square = SquaredLoss(loss.fit_intercept)
    if not sums:
        data = lambda coef: np.zeros_like(coef)  # noqa: E731
    elif p <= GRAM_LIMIT:
        _, _, gram = sums.loss_gradient_hessian(np.zeros(p), loss=square)
        data = lambda coef: coef @ gram  # noqa: E731  (rows of a (K, p) coef, or one (p,))
    else:
        _, g0 = sums.loss_gradient(np.zeros(p), loss=square)
        data = lambda coef: np.apply_along_axis(  # noqa: E731
            lambda c: sums.loss_gradient(c, loss=square)[1] - g0, -1, coef
        )
    scaled = objective.with_data_sum(lambda coef: (0.0, data(coef)), weight_sum=objective.weight_sum / world)
    penalty = objective.with_data_sum(lambda coef: (0.0, np.zeros_like(coef)))
    zero = np.zeros(objective.size)
    penalty0 = penalty.fun_grad(zero)[1]
    base = scaled.fun_grad(zero)[1] - penalty0
    eigenvalue = power_iteration(lambda v: scaled.fun_grad(v)[1] - penalty.fun_grad(v)[1] - base, objective.size)
    l2 = power_iteration(lambda v: penalty.fun_grad(v)[1] - penalty0, objective.size)
    return (loss.curvature or 1.0) * eigenvalue + l2
