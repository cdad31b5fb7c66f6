"""The objective MLlib minimizes for its linear models, in MLlib's own internal parametrization.

MLlib never optimizes over the user's coefficients directly. It trains on features scaled by
1/sigma_j and, when fitting an intercept, virtually centered by their means; LinearRegression also
scales the label by 1/sigma_y. With theta = (C, c0) the internal coefficients and intercepts:

    beta_kj = C_kj * label_scale / sigma_j          (0 when sigma_j == 0: constant feature)
    b_k     = label_scale * c0_k - sum_j mu_j beta_kj   (the centering term only with an intercept)

    f(theta) = sum_i w_i l(y_i, x_i beta + b) / (W * label_scale^2)
               + lambda_2 / 2 * sum_kj r_j C_kj^2 + lambda_1 * sum_kj q_j |C_kj|

with r_j = q_j = 1 when ``standardization`` is on, else r_j = 1/sigma_j^2 and q_j = 1/sigma_j,
so that in the user's coefficients the penalty is lambda (1-a)/2 sum (s_j b_j)^2 + lambda a sum s_j |b_j|
(s_j = sigma_j or 1). The intercept is never penalized. This module only maps between the two
parametrizations and adds the penalty; the data sums come from a strategy.

Bound constraints l_kj <= beta_kj <= u_kj, L_k <= b_k <= U_k (LogisticRegression's, MLlib's
``createBounds``) are a box in theta too: l_kj sigma_j / label_scale <= C_kj <= u_kj sigma_j / label_scale
(C_kj fixed at 0 for a constant feature) and L_k / label_scale <= c0_k <= U_k / label_scale. The last
holds only without the virtual centering (``center=False``): with it c0_k = (b_k + mu . beta_k) / label_scale
and a bound on b_k is no box. MLlib likewise drops the centering when an intercept bound is finite.
"""

import copy

import numpy as np


class LinearObjective:
    """Smooth part f(theta) and the L1 weights of MLlib's objective, over a distributed data sum.

    ``data_sum(coef) -> (loss_sum, grad_sum)`` evaluates the ``sparkml.gpu`` loss sums at coefficients in
    the original space, shaped (n_outputs, d + fit_intercept) (squeezed for one output). An estimator builds
    the objective without one (None): the strategy's solver plugs in the sums its transport computes
    (``with_data_sum``; ``strategies.exact.distributed``), so the objective a barrier stage ships holds no
    driver-side state.
    """

    def __init__(
        self,
        data_sum=None,
        *,
        n_features,
        n_outputs,
        fit_intercept,
        mean,
        std,
        weight_sum,
        reg_l2,
        reg_l1,
        standardization,
        label_scale=1.0,
        center=True,
    ):
        self.data_sum = data_sum
        self.d, self.k, self.fit_intercept = n_features, n_outputs, fit_intercept
        std = np.asarray(std, dtype=np.float64)
        live = std > 0
        self.live = live
        self.scale = np.where(live, label_scale / np.where(live, std, 1.0), 0.0)
        centered = fit_intercept and center  # ``center=False``: theta's intercept is b / label_scale itself
        self.mean = np.asarray(mean, dtype=np.float64) if centered else np.zeros(n_features)
        self.weight_sum, self.label_scale = weight_sum, label_scale
        safe = np.where(live, std, 1.0)
        self.r = np.where(live, 1.0 if standardization else 1.0 / safe**2, 0.0)
        self.q = np.where(live, 1.0 if standardization else 1.0 / safe, 0.0)
        self.reg_l2, self.reg_l1 = reg_l2, reg_l1

    def with_data_sum(self, data_sum, weight_sum=None):
        """A copy evaluating its data term with ``data_sum`` (e.g. inside a barrier task), optionally
        normalized by another ``weight_sum`` (one partition's objective, for model averaging)."""
        other = copy.copy(self)
        other.data_sum = data_sum
        if weight_sum is not None:
            other.weight_sum = weight_sum
        return other

    @property
    def size(self):
        return self.k * (self.d + self.fit_intercept)

    def _split(self, theta):
        m = theta.reshape(self.k, self.d + self.fit_intercept)
        return m[:, : self.d], (m[:, self.d] if self.fit_intercept else np.zeros(self.k))

    def to_original(self, theta):
        """theta -> (beta (k, d), b (k,)) in the user's feature space."""
        c, c0 = self._split(np.asarray(theta, dtype=np.float64))
        beta = c * self.scale
        b = self.label_scale * c0 - beta @ self.mean
        return beta, b

    def from_original(self, beta, b):
        """(beta, b) -> theta; features with sigma_j == 0 get 0 (MLlib drops them)."""
        beta = np.atleast_2d(np.asarray(beta, dtype=np.float64))
        with np.errstate(divide="ignore", invalid="ignore"):
            c = np.where(self.live, beta / np.where(self.live, self.scale, 1.0), 0.0)
        beta_live = c * self.scale
        c0 = (np.atleast_1d(b) + beta_live @ self.mean) / self.label_scale
        return self._join(c, c0)

    def _join(self, c, c0):
        if self.fit_intercept:
            return np.hstack([c, np.asarray(c0).reshape(self.k, 1)]).ravel()
        return np.asarray(c).ravel()

    def loss_coef(self, theta):
        """Coefficients in the ``sparkml.gpu`` loss layout for the data sum."""
        beta, b = self.to_original(theta)
        coef = np.hstack([beta, b[:, None]]) if self.fit_intercept else beta
        return coef[0] if self.k == 1 else coef

    def fun_grad(self, theta):
        theta = np.asarray(theta, dtype=np.float64)
        loss_sum, grad_sum = self.data_sum(self.loss_coef(theta))
        grad_sum = np.asarray(grad_sum, dtype=np.float64).reshape(self.k, self.d + self.fit_intercept)
        norm = self.weight_sum * self.label_scale**2
        g_beta = grad_sum[:, : self.d]
        g_b = grad_sum[:, self.d] if self.fit_intercept else np.zeros(self.k)
        c, _ = self._split(theta)
        g_c = (g_beta - np.outer(g_b, self.mean)) * self.scale / norm + self.reg_l2 * self.r * c
        g_c0 = self.label_scale * g_b / norm
        f = float(loss_sum) / norm + 0.5 * self.reg_l2 * float(np.sum(self.r * c * c))
        return f, self._join(g_c, g_c0)

    def theta_bounds(self, box):
        """(lower, upper) over theta for ``box`` (``linear.bounds.CoefficientBounds`` in the user's space),
        or None without one (module docstring)."""
        if box is None:
            return None
        if self.fit_intercept and np.any(self.mean != 0) and box.bounds_intercepts():
            raise ValueError("intercept bounds are a box only without the virtual centering (center=False)")
        safe = np.where(self.live, self.scale, 1.0)
        lower = np.where(self.live, np.asarray(box.lower_coefficients, dtype=np.float64) / safe, 0.0)
        upper = np.where(self.live, np.asarray(box.upper_coefficients, dtype=np.float64) / safe, 0.0)
        return (
            self._join(lower, np.asarray(box.lower_intercepts, dtype=np.float64) / self.label_scale),
            self._join(upper, np.asarray(box.upper_intercepts, dtype=np.float64) / self.label_scale),
        )

    def l1_weights(self):
        """Per-coordinate L1 strengths for OWL-QN (0 for intercepts and constant features), or None."""
        if self.reg_l1 <= 0:
            return None
        w = np.tile(self.reg_l1 * self.q, (self.k, 1))
        return self._join(w, np.zeros(self.k))

    def value(self, theta):
        """Full objective (smooth part + L1), as MLlib's objectiveHistory reports it."""
        f, _ = self.fun_grad(theta)
        c, _ = self._split(np.asarray(theta, dtype=np.float64))
        return f + self.reg_l1 * float(np.sum(self.q * np.abs(c)))
