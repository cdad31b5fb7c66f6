"""MLlib's huber loss with its scale sigma estimated jointly (Owen 2007, "A robust hybrid of lasso and
ridge regression"; Spark's ``HuberBlockAggregator``).

For a row with margin m = x . beta + b, label y, residual r = y - m, scale sigma > 0 and shape eps > 1:

    |r| <= eps sigma:  l = (sigma + r^2 / sigma) / 2             dl/dm = -r / sigma
                                                                  dl/dsigma = (1 - (r / sigma)^2) / 2
    |r| >  eps sigma:  l = (sigma + 2 eps |r| - eps^2 sigma) / 2  dl/dm = -eps sign(r)
                                                                  dl/dsigma = (1 - eps^2) / 2

i.e. l = (sigma + H_eps(r / sigma) sigma) / 2 with Huber's H_eps(z) = z^2 (|z| <= eps), 2 eps |z| - eps^2
(beyond): convex in (beta, b, sigma) for sigma > 0 and continuously differentiable (both pieces meet
with value (1 + eps^2) sigma / 2 and equal derivatives at |r| = eps sigma). MLlib's objective is
sum_i w_i l_i / W plus an L2 term on beta; it is half of scikit-learn's ``HuberRegressor`` objective.

``coef`` is (d + fit_intercept + 1,): the coefficients, the intercept (if any), then sigma LAST.
``loss_gradient`` returns the weighted SUMS (sum_i w_i l_i, sum_i w_i dl_i/dcoef), float64, in one pass.
There is no Hessian (the second derivative jumps at |r| = eps sigma).
"""

from __future__ import annotations

import torch

from .losses import _F64, LinearLoss, _product_operand

__all__ = ["HuberLoss"]


class HuberLoss(LinearLoss):
    """Huber's loss with a jointly estimated scale, MLlib's ``loss="huber"`` (module docstring)."""

    _no_hessian_reason = (
        "HuberLoss has no Hessian: its second derivative jumps where |r| = epsilon * sigma; "
        "use a quasi-Newton solver (L-BFGS-B, sigma > 0)"
    )

    def __init__(self, fit_intercept: bool = True, epsilon: float = 1.35):
        super().__init__(fit_intercept)
        if not epsilon > 1:
            raise ValueError(f"HuberLoss needs epsilon > 1, got {epsilon}")
        self.epsilon = float(epsilon)

    def __repr__(self) -> str:
        return f"HuberLoss(fit_intercept={self.fit_intercept}, epsilon={self.epsilon})"

    def coef_shape(self, n_features: int) -> tuple[int, ...]:
        """(d + fit_intercept + 1,): sigma is the last coordinate."""
        return (int(n_features) + int(self.fit_intercept) + 1,)

    def _pointwise_scaled(self, m, y, sigma):
        """(l, dl/dm, dl/dsigma) per row, float64."""
        eps = self.epsilon
        r = y - m
        inside = r.abs() <= eps * sigma
        z = r / sigma
        loss = torch.where(inside, 0.5 * (sigma + r * r / sigma), 0.5 * (sigma + 2 * eps * r.abs() - eps * eps * sigma))
        d_m = torch.where(inside, -z, torch.where(r >= 0, torch.full_like(r, -eps), torch.full_like(r, eps)))
        d_sigma = torch.where(inside, 0.5 * (1 - z * z), torch.full_like(z, 0.5 * (1 - eps * eps)))
        return loss, d_m, d_sigma

    def _sigma(self, coef):
        sigma = coef[-1]
        if not bool(sigma > 0):
            raise ValueError(f"HuberLoss needs a scale sigma > 0 (the last coordinate), got {float(sigma)}")
        return sigma

    def loss_gradient(self, coef, X, y, w=None):
        """(sum_i w_i l_i, sum_i w_i dl_i/d(beta, b, sigma)), float64, in one ``margin_pass`` over X."""
        coef, y, w = self._check(coef, X, y, w)
        sigma = self._sigma(coef)
        beta, b = self._split(coef[:-1])
        loss_sum = torch.zeros((), dtype=_F64, device=X.device)
        r_sum = torch.zeros((), dtype=_F64, device=X.device)
        sigma_sum = torch.zeros((), dtype=_F64, device=X.device)

        def residuals(start, stop, m):
            m = m.to(_F64) if b is None else m.to(_F64) + b
            ww = w[start:stop]
            loss, d_m, d_sigma = self._pointwise_scaled(m, y[start:stop], sigma)
            r = ww * d_m
            loss_sum.add_((ww * loss).sum())
            r_sum.add_(r.sum())
            sigma_sum.add_((ww * d_sigma).sum())
            return r.to(X.dtype)

        g_beta = X.margin_pass(_product_operand(beta, X), residuals).to(_F64)
        inner = self._join(g_beta, r_sum if self.fit_intercept else None)
        return loss_sum, torch.cat([inner, sigma_sum.reshape(1)])

    def loss(self, coef, X, y, w=None):
        """sum_i w_i l_i as a float64 0-dim tensor."""
        coef, y, w = self._check(coef, X, y, w)
        sigma = self._sigma(coef)
        return (w * self._pointwise_scaled(self._margins(coef[:-1], X), y, sigma)[0]).sum()
