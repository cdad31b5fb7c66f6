"""What more Nystroem landmarks buy a kernel SVM, measured on rows held out from its training.

A small classifier stands in for the one a fit would train: on a training sample T of n rows, the squared-hinge SVM
over the Nystroem features of the landmarks L,

    min_{w, b}  (1/n) sum_{i in T} max(0, 1 - s_i (phi(x_i) w + b))^2 + reg/2 |w|^2,
    phi(x) = C^{-1} K(L, x)    with C C^T = K_LL (``nystroem.jittered_cholesky``),

one problem per positive class (s_i = +1 for the class, -1 for the others; the binary problem is class 1 against
0), and the measure is its mean hinge max(0, 1 - s f(x)) on held-out probe rows, summed over the problems: it bounds
the error rate (a row misclassified by the problems' argmax has a hinge of at least 1 in one of them), where an
average over ten classes' problems would understate a change in it tenfold. Its
features' inner products are those of ``NystroemMap``'s (K(x, L) K_LL^+ K(L, x')) at a sixth of the cost.

The squared hinge is piecewise quadratic, so the problem is solved by Newton on the active set (the rows with margin
below 1): with A fixed the optimum is the ridge regression of s on the active rows,

    (2/n X_A^T X_A + R) (w, b) = 2/n X_A^T s_A,        R = reg I with b unpenalized,

and the rounds stop when the active set stops changing (Keerthi and DeCoste, "A modified finite Newton method
for fast solution of large scale linear SVMs", JMLR 2005). A step with more landmarks starts from the active set
the previous step ended with, not from every row: the same rows are mostly the ones on the wrong side of their
margin, so it takes a round or two instead of five to ten.

``decision(landmarks)`` gives the classifiers a call trained as f(x) = K(x, L) alpha + b (alpha = C^{-T} w): on the
landmarks the search keeps they are where the fit's own Newton rounds start (``sparkml.kernel.feature_map``).
"""

from __future__ import annotations

import torch

from .kernels import kernel_matrix
from .nystroem import NystroemMap, jittered_cholesky

__all__ = ["HeldOutHinge"]

_F64 = torch.float64
_MAX_ROUNDS = 30


class HeldOutHinge:
    """The held-out mean hinge of the stand-in classifier (module docstring) for successive landmark sets over
    the same training and probe rows; ``loss(landmarks)`` warm-starts from the previous call's active sets.

    ``train``, ``probe``: (n, d) and (q, d) rows; ``train_labels``, ``probe_labels``: their labels; ``classes``:
    the positive class of each problem ([1.0] for binary); ``reg``: the L2 strength (the fit's ``regParam``);
    ``kernel``: keyword arguments of ``kernels.kernel_matrix`` (``kind``, ``gamma``, ``degree``, ``coef0``).
    Computed in ``dtype`` (the products; the small solves in float64)."""

    def __init__(self, train, train_labels, probe, probe_labels, classes, reg, kernel, dtype=torch.float32):
        self.train = torch.as_tensor(train).to(_F64)
        self.probe = torch.as_tensor(probe).to(_F64)
        train_labels, probe_labels = torch.as_tensor(train_labels), torch.as_tensor(probe_labels)
        self.signs = [torch.where(train_labels == c, 1.0, -1.0).to(_F64) for c in classes]
        self.probe_signs = [torch.where(probe_labels == c, 1.0, -1.0).to(_F64) for c in classes]
        self.reg, self.kernel, self.dtype = float(reg), dict(kernel), dtype
        self.active = [torch.ones(len(self.train), dtype=torch.bool) for _ in classes]
        self.rounds: list[int] = []  # Newton rounds of each problem in the last ``loss`` call
        self.weights: list[torch.Tensor] = []  # each problem's (w, b) of the last ``loss`` call, float64
        self.row_hinges: torch.Tensor | None = None  # (q,): each probe row's hinge summed over the problems, last call
        self._fits: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []  # (landmarks, alpha, b) a call

    def decision(self, landmarks):
        """(alpha (k, m), b (k,)), float64: the classifiers ``loss(landmarks)`` trained, as f_j(x) = K(x, L) alpha_j
        + b_j over those landmarks (a start for the fit's own problems on them); None when no call had them."""
        lm = torch.as_tensor(landmarks).to(_F64)
        for seen, alpha, b in self._fits:
            if seen.shape == lm.shape and torch.equal(seen, lm):
                return alpha, b
        return None

    def features(self, landmarks, *row_sets):
        """For each of ``row_sets``, (n, m + 1): phi(rows) (module docstring) and a column of ones for the
        intercept, in ``dtype``; K_LL is factored once for all of them."""
        return self._features(landmarks, *row_sets)[0]

    def _features(self, landmarks, *row_sets):
        """(``features``, w -> alpha: the landmarks' weights K(x, L) alpha = phi(x) w of feature weights w)."""
        lm = torch.as_tensor(landmarks).to(_F64)
        factor = jittered_cholesky(kernel_matrix(self.kernel["kind"], lm, **self._args()))
        nystroem = None
        if factor is None:  # not positive semi-definite (the sigmoid kernel): its eigendecomposition's Nystroem map
            nystroem = NystroemMap(self.kernel["kind"], lm, rcond=1e-6, **self._args())
        out = []
        for rows in row_sets:
            if nystroem is not None:
                phi = nystroem.transform(rows)
            else:
                phi = torch.linalg.solve_triangular(
                    factor, kernel_matrix(self.kernel["kind"], lm, rows, **self._args()), upper=False
                ).T
            out.append(torch.cat([phi, torch.ones(len(rows), 1, dtype=_F64)], 1).to(self.dtype))
        if nystroem is not None:
            projection = nystroem.projection.to(_F64)
            return out, lambda w: projection @ w
        return out, lambda w: torch.linalg.solve_triangular(factor.T, w[:, None], upper=True)[:, 0]

    def _args(self):
        return {k: v for k, v in self.kernel.items() if k != "kind"}

    def loss(self, landmarks) -> float:
        """The held-out mean hinge of the problems' classifiers on ``landmarks``, summed over the problems (module
        docstring); each probe row's own sum is kept as ``row_hinges`` (what measures the noise of a change between
        two calls: ``sparkml.kernel.landmarks.grow_landmarks``)."""
        (x, probe), landmark_weights = self._features(landmarks, self.train, self.probe)
        n, p = x.shape
        penalty = torch.full((p,), self.reg, dtype=_F64)
        penalty[-1] = 0.0  # the intercept
        rows = torch.zeros(len(self.probe), dtype=_F64)
        self.rounds, self.weights = [], []
        for k, s in enumerate(self.signs):
            active, rounds = self.active[k], 0
            while True:
                rounds += 1
                xa = x[active]
                lhs = (2.0 / n) * (xa.T @ xa).to(_F64) + torch.diag(penalty)
                rhs = (2.0 / n) * (xa.T @ s[active].to(x.dtype)).to(_F64)
                w = torch.linalg.solve(lhs + 1e-12 * torch.eye(p, dtype=_F64), rhs)
                now = s * (x @ w.to(x.dtype)).to(_F64) < 1.0
                if torch.equal(now, active) or rounds >= _MAX_ROUNDS:
                    break
                active = now
            self.active[k] = now
            self.rounds.append(rounds)
            self.weights.append(w)
            margins = self.probe_signs[k] * (probe @ w.to(probe.dtype)).to(_F64)
            rows += torch.clamp(1.0 - margins, min=0.0)
        alpha = torch.stack([landmark_weights(w[:-1]) for w in self.weights])
        self._fits.append((torch.as_tensor(landmarks).to(_F64), alpha, torch.stack([w[-1] for w in self.weights])))
        self.row_hinges = rows
        return float(rows.mean())
