"""The exact solvers: every pass an exact sum over all the fit's rows, whichever transport carries it.

* ``quasi_newton``: L-BFGS, OWL-QN (an L1 term) or L-BFGS-B (a box) on the linear models' objective
  (``optim.minimize.run_optimizer``), the data term's (loss, gradient) summed by the communicator;
* ``newton``: KernelSVC's one-vs-rest Newton problems (``optim.newton.newton_warm_started``), each pass's
  (loss, gradient, Hessian block or curvature) summed by the communicator.

On the ``jobs`` transport they run on the driver and each sum is a Spark job; on ``barrier`` every task runs
them on bit-identical sums. Both are plain functions of the communicator (``strategies.solver_protocols``).
"""

from __future__ import annotations

import numpy as np

from sparkml.optim.minimize import run_optimizer
from sparkml.optim.newton import newton_warm_started

# what each PartitionSums pass returns, for k problems of p coefficients
NEWTON_SHAPES = {
    "loss_gradient": lambda k, p: [(k,), (k, p)],
    "loss_gradient_hessian": lambda k, p: [(k,), (k, p), (k, p, p)],
    "loss_gradient_diagonal": lambda k, p: [(k,), (k, p), (k, p), (k,)],
    "loss_gradient_curvature": lambda k, p: [(k,), (k, p), (k,), (k,)],
    "hessian_block": lambda k, p: [(k, p, p)],
    "hessp": lambda k, p: [(k, p)],
}


def loss_shape(objective) -> tuple:
    """Shape of the ``sparkml.gpu`` loss coefficients the objective evaluates."""
    return np.shape(objective.loss_coef(np.zeros(objective.size)))


def distributed(objective, comm):
    """``objective`` whose data term is the communicator's (loss, gradient) sum over all rows."""
    shapes = [(), loss_shape(objective)]
    return objective.with_data_sum(lambda coef: comm.sum("loss_gradient", coef, shapes))


def quasi_newton(
    comm, objective, theta0, *, options, max_iter, tol, name, owlqn, bounds, progress, checkpoint, warm_start=False
):
    """L-BFGS / OWL-QN / L-BFGS-B over the exact objective (module docstring) -> (theta, TrainingSummary);
    ``warm_start``: ``theta0`` is another objective's solution (a regularization path's step)."""
    return run_optimizer(
        distributed(objective, comm),
        theta0,
        max_iter=max_iter,
        tol=tol,
        name=name,
        owlqn=owlqn,
        bounds=bounds,
        progress=progress,
        checkpoint=checkpoint,
        warm_start=warm_start,
    )


def newton(comm, make_problems, theta0, *, progress, checkpoint, **options):
    """``optim.newton.newton_warm_started`` over the problems ``make_problems(idx)`` (a ``sparkml.gpu.problems``
    loss for the problem indices idx), one sum per pass -> (theta, [TrainingSummary])."""

    def evaluate_for(problems):
        def evaluate(theta, idx, kind):
            return comm.sum(kind, theta, NEWTON_SHAPES[kind](len(idx), theta.shape[-1]), problems(idx))

        return evaluate

    return newton_warm_started(evaluate_for, make_problems, theta0, progress=progress, checkpoint=checkpoint, **options)
