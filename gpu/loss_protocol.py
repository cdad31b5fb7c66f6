"""What the strategies and optimizers ask of this package's losses, as ``typing.Protocol`` classes.

Every method sums over ONE row block ``X`` (``blocks``: dense, CSR, or a ``factored``/``stacked``
block of them) with labels ``y`` and sample weights ``w`` (None: every row weighs 1), at
coefficients ``coef`` laid out as ``coef_shape(X.n_features)`` says, and returns float64 tensors:
sums, with no division by the weight total and no regularization (the driver adds both after a
Spark reduce, ``sparkml.strategies.partition_sums``).

* ``BlockLoss``: what every loss and problem set offers, the sums of an L-BFGS pass
  (``loss_gradient``) and of a Newton round that forms its Hessians (``hessian_block``):
  ``losses``' and ``huber``'s losses, ``problems.OneVsRestProblems`` and ``problems.PlattProblems``.
* ``Loss``: a linear model's loss (``losses.LinearLoss`` and its subclasses, ``huber.HuberLoss``):
  also whether it fits an intercept, its curvature bound (the first-order strategies' step size)
  and Hessian-vector products.
* ``NewtonCGProblems``: the problem sets truncated Newton (``sparkml.optim.newton``'s ``solver="cg"``)
  solves (``problems.OneVsRestProblems``): also the Hessians' diagonals or curvature weights, and
  Hessian-vector products.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

import torch

from .blocks import _Block

__all__ = ["BlockLoss", "Loss", "NewtonCGProblems"]


@runtime_checkable
class BlockLoss(Protocol):
    """The sums over one row block that every loss and problem set of this package gives."""

    def coef_shape(self, n_features: int) -> tuple[int, ...]:
        """The shape of ``coef`` for rows of ``n_features`` features: (p,) for one output, (K, p) for K
        outputs or problems (p = n_features + fit_intercept; HuberLoss: + 1 for its scale)."""
        ...

    def loss_gradient(
        self, coef: torch.Tensor, X: _Block, y: torch.Tensor, w: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(sum_i w_i l_i: 0-dim, or (k,) for k problems; sum_i w_i dl_i/dcoef: the shape of coef)."""
        ...

    def hessian_block(
        self, coef: torch.Tensor, X: _Block, y: torch.Tensor, w: torch.Tensor | None = None
    ) -> torch.Tensor:
        """sum_i w_i d2l_i/dcoef2: (p, p), or (k, p, p) for k problems; NotImplementedError for a loss
        without one (hinge, huber, softmax)."""
        ...


@runtime_checkable
class Loss(BlockLoss, Protocol):
    """A linear model's loss of the margins x . beta + b (``losses``, ``huber``)."""

    @property
    def fit_intercept(self) -> bool:
        """Whether coef ends with the intercept(s)."""
        ...

    @property
    def curvature(self) -> float | None:
        """Sup of the loss's second derivative in the margin (softmax: of its curvature's largest
        eigenvalue); None when it is not smooth (hinge)."""
        ...

    def hessp_operator(
        self, coef: torch.Tensor, X: _Block, y: torch.Tensor, w: torch.Tensor | None = None
    ) -> Callable[[torch.Tensor], torch.Tensor]:
        """v -> sum_i w_i d2l_i/dcoef2 v (v and the product: the shape of coef), at one coef."""
        ...


@runtime_checkable
class NewtonCGProblems(BlockLoss, Protocol):
    """Several problems over the same rows, coef (k, p), solved by Newton-CG (``problems``)."""

    def loss_gradient_diagonal(
        self, coef: torch.Tensor, X: _Block, y: torch.Tensor, w: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``loss_gradient``'s sums, the Hessians' diagonals, (k, p), and each problem's count of rows with a
        non-zero second derivative, (k,)."""
        ...

    def loss_gradient_curvature(
        self, coef: torch.Tensor, X: _Block, y: torch.Tensor, w: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``loss_gradient``'s sums, each problem's curvature weight sum_i w_i l''_ij, (k,), and its count of rows
        with l''_ij != 0, (k,)."""
        ...

    def hessp_operator(
        self, coef: torch.Tensor, X: _Block, y: torch.Tensor, w: torch.Tensor | None = None
    ) -> Callable[[torch.Tensor], torch.Tensor]:
        """v -> each problem's Hessian times its row of v, (k, p), at one coef."""
        ...
