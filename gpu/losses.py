"""Per-partition sums of linear-model losses, their gradients and Hessians.

In the style of scikit-learn's ``LinearModelLoss``. For rows x_i (a ``DenseBlock`` or
``CsrBlock``), labels y_i and sample weights w_i, with coefficients ``coef``:

* single output (logistic, squared, hinge, squared hinge):
  ``coef`` has shape (d + fit_intercept,), the intercept b is LAST; margin
  m_i = x_i . beta + b.
* softmax with K classes: ``coef`` has shape (K, d + fit_intercept), the intercepts
  are the LAST column; margins M_i = W x_i + b, shape (K,).

``loss_gradient`` returns the SUMS

    L = sum_i w_i l(m_i, y_i)                  float64 0-dim tensor
    G = sum_i w_i dl/dm_i * [x_i, 1]           float64, shape of coef

(no division by the weight total, no regularization: a Spark reduce adds the partition
sums, the driver divides and regularizes). ``hessian_block`` returns
sum_i w_i d2l/dm2_i x~_i x~_i^T, (p, p) with p = d + fit_intercept and x~_i = [x_i, 1]
(intercept row/column last); ``hessp`` returns that Hessian times a coef-shaped v.

Precision: margins use one matmul in the block dtype (coef is cast to it); per-row
losses and derivatives are float64; X^T r runs in the block dtype, then goes to float64.
"""

from __future__ import annotations

import torch

__all__ = [
    "LinearLoss",
    "LogisticLoss",
    "SoftmaxLoss",
    "SquaredLoss",
    "HingeLoss",
    "SquaredHingeLoss",
    "SmoothedHingeLoss",
]

_F64 = torch.float64


class LinearLoss:
    """Base class: a pointwise loss l(m, y) of a linear margin m = x . beta + b.

    Subclasses implement ``_pointwise(m, y) -> (l, dl/dm)`` and, where a Hessian
    exists, ``_pointwise_hessian(m, y) -> d2l/dm2`` (all float64, shape of m).
    """

    n_outputs = 1
    _no_hessian_reason: str | None = None
    # sup over m and y of the loss's second derivative in the margin (for one output; softmax: the
    # largest eigenvalue of its (K, K) curvature), so that the data term's gradient is Lipschitz with
    # constant curvature * lambda_max(sum_i w_i x~_i x~_i^T); None: not smooth (a first-order method then
    # takes subgradient steps)
    curvature: float | None = None

    def __init__(self, fit_intercept: bool = True):
        self.fit_intercept = bool(fit_intercept)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(fit_intercept={self.fit_intercept})"

    # ---- layout ---------------------------------------------------------------
    def coef_shape(self, n_features: int) -> tuple[int, ...]:
        """(d + fit_intercept,) for one output; (K, d + fit_intercept) for softmax."""
        p = int(n_features) + int(self.fit_intercept)
        return (p,) if self.n_outputs == 1 else (self.n_outputs, p)

    def _check(self, coef, X, y, w):
        """Move inputs to X's device; return (coef float64, y float64, w float64)."""
        coef = torch.as_tensor(coef).to(device=X.device, dtype=_F64)
        expected = self.coef_shape(X.n_features)
        if tuple(coef.shape) != expected:
            raise ValueError(f"coef has shape {tuple(coef.shape)}, expected {expected} for {self!r}")
        y = torch.as_tensor(y).to(device=X.device, dtype=_F64).reshape(-1)
        if w is None:
            w = torch.ones(X.n_rows, dtype=_F64, device=X.device)
        w = torch.as_tensor(w).to(device=X.device, dtype=_F64).reshape(-1)
        if y.numel() != X.n_rows or w.numel() != X.n_rows:
            raise ValueError(f"y and w need {X.n_rows} entries, got {y.numel()} and {w.numel()}")
        return coef, y, w

    def _split(self, coef):
        """(beta, b): beta (d,) or (K, d); b a scalar / (K,) tensor, or None."""
        if self.fit_intercept:
            return coef[..., :-1], coef[..., -1]
        return coef, None

    def _join(self, g_beta, g_b):
        if not self.fit_intercept:
            return g_beta
        return torch.cat([g_beta, g_b.reshape(g_beta.shape[:-1] + (1,))], dim=-1)

    def _margins(self, coef, X):
        """m = X beta + b (float64; the matmul runs in X.dtype)."""
        beta, b = self._split(coef)
        m = X.matmul(_product_operand(beta, X)).to(_F64)
        return m if b is None else m + b

    def _grad_from_rows(self, X, r):
        """[X^T r, sum r] with r the per-row weighted dl/dm, (n,) or (n, K)."""
        g_beta = X.rmatmul(r.to(X.dtype)).to(_F64)
        if r.dim() == 2:
            g_beta = g_beta.T
        return self._join(g_beta, r.sum(0) if self.fit_intercept else None)

    # ---- public API -------------------------------------------------------------
    def loss_gradient(self, coef, X, y, w=None):
        """(sum_i w_i l_i, sum_i w_i dl_i/dcoef), both float64, in one ``margin_pass`` over X."""
        coef, y, w = self._check(coef, X, y, w)
        beta, b = self._split(coef)
        # running over the pass's runs of rows (a block of no rows makes no run)
        loss_sum = torch.zeros((), dtype=_F64, device=X.device)
        r_sum = torch.zeros(coef.shape[:-1], dtype=_F64, device=X.device)

        def residuals(start, stop, m):
            m = m.to(_F64) if b is None else m.to(_F64) + b
            loss, g = self._pointwise(m, y[start:stop])
            r = _rows(w[start:stop], g)
            loss_sum.add_((w[start:stop] * loss).sum())
            r_sum.add_(r.sum(0))
            return r.to(X.dtype)

        g_beta = X.margin_pass(_product_operand(beta, X), residuals).to(_F64)
        if g_beta.dim() == 2:
            g_beta = g_beta.T
        return loss_sum, self._join(g_beta, r_sum if self.fit_intercept else None)

    def loss(self, coef, X, y, w=None):
        """sum_i w_i l_i as a float64 0-dim tensor."""
        coef, y, w = self._check(coef, X, y, w)
        return (w * self._pointwise(self._margins(coef, X), y)[0]).sum()

    def gradient(self, coef, X, y, w=None):
        """sum_i w_i dl_i/dcoef, float64, shape of coef."""
        return self.loss_gradient(coef, X, y, w)[1]

    def _hess_weights(self, coef, X, y, w):
        if self._no_hessian_reason:
            raise NotImplementedError(self._no_hessian_reason)
        coef, y, w = self._check(coef, X, y, w)
        return coef, w * self._pointwise_hessian(self._margins(coef, X), y)

    def hessian_block(self, coef, X, y, w=None):
        """sum_i w_i h_i x~_i x~_i^T, (p, p) float64, intercept row/column last."""
        _, hw = self._hess_weights(coef, X, y, w)
        return self._hessian_from_weights(X, hw)

    def _hessian_from_weights(self, X, hw):
        """sum_i hw_i x~_i x~_i^T for per-row weights hw (n,) float64."""
        gram = X.weighted_gram(hw.to(X.dtype)).to(_F64)
        if not self.fit_intercept:
            return gram
        cross = X.column_sums(hw).to(_F64)
        top = torch.cat([gram, cross[:, None]], dim=1)
        bottom = torch.cat([cross, hw.sum().reshape(1)])[None, :]
        return torch.cat([top, bottom], dim=0)

    def hessp_operator(self, coef, X, y, w=None):
        """v -> ``hessp(coef, X, y, w, v)``: what ``sparkml.gpu.problems.OneVsRestProblems`` specializes to
        read only the active rows; here each product is a plain ``hessp``."""
        return lambda v: self.hessp(coef, X, y, w, v)

    def hessp(self, coef, X, y, w, v):
        """Hessian times v (shape of coef): sum_i w_i h_i x~_i (x~_i . v), float64."""
        coef, hw = self._hess_weights(coef, X, y, w)
        v = torch.as_tensor(v).to(device=X.device, dtype=_F64)
        return self._grad_from_rows(X, hw * self._margins(v, X))

    def _pointwise(self, m, y):
        raise NotImplementedError

    def _pointwise_hessian(self, m, y):
        raise NotImplementedError


def _product_operand(beta, X):
    """beta as the right operand of X @ .: (d,) or, for K outputs, (d, K), in X's dtype."""
    return beta.T.to(X.dtype) if beta.dim() == 2 else beta.to(X.dtype)


def _rows(w, g):
    return w[:, None] * g if g.dim() == 2 else w * g


class LogisticLoss(LinearLoss):
    """Binary log loss, y in {0, 1}: l = log(1 + e^m) - y m, l' = sigmoid(m) - y,
    l'' = p (1 - p) with p = sigmoid(m)."""

    curvature = 0.25

    def _pointwise(self, m, y):
        loss = torch.clamp(m, min=0) + torch.log1p(torch.exp(-m.abs())) - y * m
        return loss, torch.sigmoid(m) - y

    def _pointwise_hessian(self, m, y):
        p = torch.sigmoid(m)
        return p * (1 - p)


class SquaredLoss(LinearLoss):
    """Half squared error: l = (m - y)^2 / 2, l' = m - y, l'' = 1."""

    curvature = 1.0

    def _pointwise(self, m, y):
        r = m - y
        return 0.5 * r * r, r

    def _pointwise_hessian(self, m, y):
        return torch.ones_like(m)


class HingeLoss(LinearLoss):
    """Hinge, y in {0, 1}, s = 2y - 1: l = max(0, 1 - s m), subgradient
    -s 1[1 - s m > 0] (0 at the kink s m = 1, as MLlib's HingeAggregator)."""

    _no_hessian_reason = (
        "HingeLoss is piecewise linear: its second derivative is zero almost everywhere "
        "and undefined at the kink, so there is no Hessian; use a first-order / "
        "quasi-Newton solver (or SquaredHingeLoss for a Newton method)."
    )

    def _pointwise(self, m, y):
        s = 2 * y - 1
        slack = 1 - s * m
        active = (slack > 0).to(_F64)
        return torch.clamp(slack, min=0), -s * active


class SquaredHingeLoss(LinearLoss):
    """Squared hinge, y in {0, 1}, s = 2y - 1: l = max(0, 1 - s m)^2,
    l' = -2 s max(0, 1 - s m), generalized l'' = 2 1[s m < 1]."""

    curvature = 2.0

    def _pointwise(self, m, y):
        s = 2 * y - 1
        slack = torch.clamp(1 - s * m, min=0)
        return slack * slack, -2 * s * slack

    def _pointwise_hessian(self, m, y):
        return 2 * ((1 - (2 * y - 1) * m) > 0).to(_F64)


class SmoothedHingeLoss(LinearLoss):
    """Hinge smoothed by a quadratic over a band of half-width h about the kink (Chapelle 2007's
    Huber hinge), y in {0, 1}, s = 2y - 1, t = s m:

        l = 0                       t > 1 + h
        l = (1 + h - t)^2 / (4 h)   |1 - t| <= h
        l = 1 - t                   t < 1 - h

    Convex, continuously differentiable, l' = -s min(1, max(0, 1 + h - t) / (2 h)), generalized
    l'' = 1[|1 - t| <= h] / (2 h); 0 <= l - max(0, 1 - t) <= h / 4 (the gap is largest at the
    kink), so as h -> 0 it is the hinge of a C-SVM. Its Hessian is over the rows in the band only:
    Newton's method applies (as for the squared hinge) where the hinge itself has no Hessian.
    """

    def __init__(self, fit_intercept: bool = True, width: float = 0.1):
        super().__init__(fit_intercept)
        if not width > 0:
            raise ValueError(f"SmoothedHingeLoss needs a band half-width > 0, got {width}")
        self.width = float(width)
        self.curvature = 1.0 / (2 * self.width)

    def __repr__(self) -> str:
        return f"SmoothedHingeLoss(fit_intercept={self.fit_intercept}, width={self.width})"

    def _pointwise(self, m, y):
        s, h = 2 * y - 1, self.width
        gap = torch.clamp(1 + h - s * m, min=0)  # 1 + h - t, floored at 0
        linear = gap > 2 * h  # t < 1 - h
        loss = torch.where(linear, gap - h, gap * gap / (4 * h))
        return loss, -s * torch.where(linear, torch.ones_like(gap), gap / (2 * h))

    def _pointwise_hessian(self, m, y):
        band = (1 - (2 * y - 1) * m).abs() <= self.width
        return band.to(_F64) / (2 * self.width)


class SoftmaxLoss(LinearLoss):
    """Multinomial log loss, y in {0..K-1}: with M_i = W x_i + b (K,) and
    p_i = softmax(M_i), l = logsumexp(M_i) - M_{i,y_i}, dl/dM_i = p_i - onehot(y_i).

    ``coef`` is (K, d + fit_intercept), intercepts in the last column. The Hessian
    is (K p, K p) with dense cross-class blocks, so only ``hessp`` is provided:
    for V (K, p), H V = sum_i w_i (diag(p_i) - p_i p_i^T)(V x~_i) outer x~_i.
    """

    curvature = 0.5  # diag(p) - p p^T <= (I - 1 1^T / K) / 2 (Boehning 1992)

    def __init__(self, n_classes: int, fit_intercept: bool = True):
        super().__init__(fit_intercept)
        if int(n_classes) < 2:
            raise ValueError(f"SoftmaxLoss needs n_classes >= 2, got {n_classes}")
        self.n_classes = self.n_outputs = int(n_classes)

    def __repr__(self) -> str:
        return f"SoftmaxLoss(n_classes={self.n_classes}, fit_intercept={self.fit_intercept})"

    def _pointwise(self, M, y):
        yi = y.to(torch.int64)
        if yi.numel() and (int(yi.min()) < 0 or int(yi.max()) >= self.n_classes):
            raise ValueError(f"softmax labels must lie in 0..{self.n_classes - 1}")
        lse = torch.logsumexp(M, dim=1)
        loss = lse - M.gather(1, yi[:, None])[:, 0]
        g = torch.exp(M - lse[:, None])
        g[torch.arange(M.shape[0], device=M.device), yi] -= 1
        return loss, g

    def hessian_block(self, coef, X, y, w=None):
        raise NotImplementedError(
            "SoftmaxLoss has no hessian_block: the multinomial Hessian couples all K "
            "classes into a (K*p, K*p) matrix that is not a single (p, p) block; use hessp."
        )

    def hessp(self, coef, X, y, w, v):
        """H V for V (K, p): per row, x~ (diag(p) - p p^T)(V x~), weighted and summed."""
        coef, y, w = self._check(coef, X, y, w)
        v = torch.as_tensor(v).to(device=X.device, dtype=_F64)
        M = self._margins(coef, X)
        P = torch.softmax(M, dim=1)
        U = self._margins(v, X)  # (n, K): V x~_i
        PU = P * U
        R = w[:, None] * (PU - P * PU.sum(1, keepdim=True))
        return self._grad_from_rows(X, R)
