"""Platt scaling of fixed SVM decision values, every problem in one pass (``sparkml.kernel.platt`` fits them).

``PlattProblems(svm_coef, classes, targets, pairs=None)``: Platt scaling (Platt 1999, with the targets of
Lin, Lin & Weng 2007). For problem j with decision values s_ij = x~_i . svm_coef_j (fixed),
P(y = c_j | s) = sigmoid(a_j s + b_j) is fitted by the log loss against smoothed targets
t_ij = t+_j if y_i = c_j else t-_j, t+ = (N+ + 1) / (N+ + 2), t- = 1 / (N- + 2):

    l = log(1 + e^m) - t m,  m = a s + b,   dl/d(a, b) = (p - t)(s, 1),   d2l = p (1 - p) (s, 1)(s, 1)^T

with p = sigmoid(m); theta_j = (a_j, b_j). With one-vs-one ``pairs`` problem j = (a, b) is fitted on the
rows of a and b only, P(y = a | y in {a, b}, s), as libsvm does before coupling the pairs.
"""

from __future__ import annotations

import torch

from .losses import LinearLoss
from .problems import _F64, _indicators, _inputs, _row_weights

__all__ = ["PlattProblems"]


class PlattProblems:
    """Platt sigmoids of fixed decision values; theta_j = (a_j, b_j). Problem j is class c_j against the
    rest, or with ``pairs`` class a against class b of pair j = (a, b) (then ``classes`` are the a's)."""

    def __init__(self, svm_coef, classes, targets, fit_intercept: bool = True, pairs=None):
        self.decision = LinearLoss(fit_intercept)  # its margins x~ . svm_coef_j are the decision values
        self.svm_coef = torch.as_tensor(svm_coef, dtype=_F64)
        self.targets = torch.as_tensor(targets, dtype=_F64).reshape(-1, 2)  # (k, [t+, t-])
        self.classes = tuple(float(c) for c in classes)
        self.pairs = None if pairs is None else tuple((float(a), float(b)) for a, b in pairs)
        if self.svm_coef.shape[0] != len(self.classes) or self.targets.shape[0] != len(self.classes):
            raise ValueError("PlattProblems needs one svm_coef row and one (t+, t-) pair per class")
        if self.pairs is not None and [a for a, _ in self.pairs] != list(self.classes):
            raise ValueError("PlattProblems' classes must be the first class of each pair")

    def __repr__(self) -> str:
        return f"PlattProblems(classes={self.classes}, pairs={self.pairs})"

    def coef_shape(self, n_features: int) -> tuple[int, int]:
        return (len(self.classes), 2)

    def _setup(self, coef, X, y, w):
        """(decision values s, margins a s + b, targets t, the rows' weight in each problem), all (n, k)."""
        coef, w, y = _inputs(coef, X, y, w, (len(self.classes), 2))
        labels = _indicators(y, self.classes)
        w = _row_weights(w, y, len(self.classes), self.pairs)
        s = self.decision._margins(self.svm_coef.to(X.device), X)
        targets = self.targets.to(X.device)
        t = labels * targets[:, 0] + (1 - labels) * targets[:, 1]
        return s, s * coef[:, 0] + coef[:, 1], t, w

    def loss_gradient(self, coef, X, y, w=None):
        s, m, t, w = self._setup(coef, X, y, w)
        loss = torch.clamp(m, min=0) + torch.log1p(torch.exp(-m.abs())) - t * m
        r = w * (torch.sigmoid(m) - t)
        return (w * loss).sum(0), torch.stack([(r * s).sum(0), r.sum(0)], dim=1)

    def hessian_block(self, coef, X, y, w=None):
        s, m, _, w = self._setup(coef, X, y, w)
        p = torch.sigmoid(m)
        hw = w * p * (1 - p)
        ss, s1, one = (hw * s * s).sum(0), (hw * s).sum(0), hw.sum(0)
        return torch.stack([torch.stack([ss, s1], dim=1), torch.stack([s1, one], dim=1)], dim=1)
