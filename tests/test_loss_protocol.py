"""gpu.loss_protocol: every loss and problem set of sparkml.gpu offers what its Protocol says."""

import numpy as np
import pytest
import torch

from sparkml.gpu import (
    BlockLoss,
    DenseBlock,
    GridProblems,
    HingeLoss,
    HuberLoss,
    LogisticLoss,
    Loss,
    NewtonCGProblems,
    OneVsRestProblems,
    PlattProblems,
    SmoothedHingeLoss,
    SoftmaxLoss,
    SquaredHingeLoss,
    SquaredLoss,
)

LOSSES = [
    LogisticLoss(),
    SoftmaxLoss(3),
    SquaredLoss(False),
    HingeLoss(),
    SquaredHingeLoss(),
    SmoothedHingeLoss(width=0.5),
    HuberLoss(),
]


@pytest.mark.parametrize("loss", LOSSES, ids=repr)
def test_losses_are_losses(loss):
    assert isinstance(loss, Loss) and isinstance(loss, BlockLoss)
    assert not isinstance(loss, NewtonCGProblems)  # a single loss has no per-problem diagonals
    assert isinstance(loss.fit_intercept, bool)
    assert loss.curvature is None or loss.curvature > 0


def test_problem_sets():
    ovr = OneVsRestProblems(SquaredHingeLoss(), [0.0, 1.0, 2.0])
    platt = PlattProblems([[1.0, 0.0], [0.5, 0.1]], [0.0, 1.0], [[0.9, 0.1], [0.8, 0.2]])
    assert isinstance(ovr, NewtonCGProblems) and isinstance(ovr, BlockLoss)
    assert isinstance(platt, BlockLoss)
    assert not isinstance(platt, NewtonCGProblems)  # Platt scaling's Newton forms its (2, 2) Hessians
    assert not isinstance(ovr, Loss)  # no curvature bound: not a loss a first-order strategy steps with


@pytest.mark.parametrize("loss", [HingeLoss(), LogisticLoss(), SquaredLoss(False)], ids=repr)
def test_grid_problems_are_the_loss_at_each_coefficient_vector(loss):
    """``GridProblems(loss, k)``: one pass, the sums each coefficient vector's own ``loss_gradient`` gives
    (float32 rows computed in float64, weighted, real labels for the squared loss)."""
    rng = np.random.default_rng(3)
    x = DenseBlock(torch.from_numpy(rng.normal(size=(3000, 6)).astype(np.float32)), torch.float64)
    y = torch.from_numpy(rng.normal(size=3000) if isinstance(loss, SquaredLoss) else rng.integers(0, 2, 3000) * 1.0)
    w = torch.from_numpy(rng.uniform(0.5, 2.0, 3000))
    coef = torch.from_numpy(rng.normal(size=(4, 6 + loss.fit_intercept)))
    grid = GridProblems(loss, 4)
    assert isinstance(grid, NewtonCGProblems) and grid.coef_shape(6) == (4, 6 + loss.fit_intercept)
    f, g = grid.loss_gradient(coef, x, y, w)
    for j in range(4):
        fj, gj = loss.loss_gradient(coef[j], x, y, w)
        np.testing.assert_allclose(f[j].item(), fj.item(), rtol=1e-12)
        np.testing.assert_allclose(g[j].numpy(), gj.numpy(), rtol=1e-10, atol=1e-10)
