"""gpu.loss_protocol: every loss and problem set of sparkml.gpu offers what its Protocol says."""

import pytest

from sparkml.gpu import (
    BlockLoss,
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
