"""MLlib's huber objective: a ``LinearObjective`` over (C, c0) with the scale sigma as one more coordinate.

theta = (C, c0, sigma): C and c0 as in ``optim.linear_objective`` (features scaled by 1/std_j and virtually
centered, the label NOT scaled: label_scale = 1), sigma last and neither scaled nor penalized:

    f(theta) = sum_i w_i l(y_i, x_i beta + b, sigma) / W + lambda / 2 sum_j r_j C_j^2

with l the ``sparkml.gpu.HuberLoss`` row loss and r_j = 1 (standardization) or 1/std_j^2. MLlib keeps
sigma > 0 with L-BFGS-B: every coordinate unbounded but sigma >= Double.MinPositiveValue (``SIGMA_FLOOR``).
"""

import numpy as np

SIGMA_FLOOR = float(np.nextafter(0.0, 1.0))  # Java's Double.MinPositiveValue, MLlib's lower bound on sigma


class WithScale:
    """``objective`` (a ``LinearObjective``) over theta[:-1] and the scale sigma = theta[-1]; the data sum
    takes the ``sparkml.gpu.HuberLoss`` layout (the linear part's coefficients, then sigma)."""

    def __init__(self, objective):
        self.objective = objective
        self.size = objective.size + 1

    @property
    def data_sum(self):
        return self.objective.data_sum

    def with_data_sum(self, data_sum, weight_sum=None):
        return WithScale(self.objective.with_data_sum(data_sum, weight_sum))

    def loss_coef(self, theta):
        theta = np.asarray(theta, dtype=np.float64)
        return np.append(self.objective.loss_coef(theta[:-1]), theta[-1])

    def fun_grad(self, theta):
        """f and its gradient: the linear part's chain rule from ``LinearObjective``, d f / d sigma =
        (sum_i w_i dl_i/dsigma) / W."""
        theta = np.asarray(theta, dtype=np.float64)
        sigma, sigma_grad = theta[-1], []

        def linear_part(coef):
            loss_sum, grad_sum = self.objective.data_sum(np.append(coef, sigma))
            grad_sum = np.asarray(grad_sum, dtype=np.float64).reshape(-1)
            sigma_grad.append(grad_sum[-1])
            return loss_sum, grad_sum[:-1]

        f, g = self.objective.with_data_sum(linear_part).fun_grad(theta[:-1])
        norm = self.objective.weight_sum * self.objective.label_scale**2
        return f, np.append(g, sigma_grad[-1] / norm)

    def value(self, theta):
        return self.fun_grad(theta)[0]

    def l1_weights(self):
        if self.objective.l1_weights() is not None:
            raise ValueError("the huber objective has no L1 term (elasticNetParam must be 0)")
        return None

    def theta_bounds(self, box):
        """The linear part's box (``LinearObjective.theta_bounds``; unbounded without one), then
        sigma >= ``SIGMA_FLOOR``."""
        inner = self.objective.theta_bounds(box)
        if inner is None:
            inner = (np.full(self.objective.size, -np.inf), np.full(self.objective.size, np.inf))
        return np.append(inner[0], SIGMA_FLOOR), np.append(inner[1], np.inf)

    def to_original(self, theta):
        """(beta (1, d), b (1,)) of theta's linear part; sigma is ``scale(theta)``."""
        return self.objective.to_original(np.asarray(theta, dtype=np.float64)[:-1])

    @staticmethod
    def scale(theta):
        return float(theta[-1])
