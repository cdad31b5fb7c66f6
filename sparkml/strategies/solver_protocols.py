"""What a solver is: a plain function of a communicator, which the transport provides.

A strategy (``strategies.table``) is a transport crossed with a solver. The transport (``strategies.job_transport``:
a Spark job per sum, the solver on the driver; ``strategies.barrier_transport``: one barrier stage, the solver on every
task) calls the solver with a ``Communicator``, through which it sums what every worker computes over its
rows; the solver never sees Spark. Solvers that talk to single ranks (``piag``, ``gossip``) need the
barrier task's process group too (``BarrierTask``), and run on the ``barrier`` transport only.

This module only states the contracts, for the type checker and the next solver's author.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

Shapes = Sequence[tuple]


class Communicator(Protocol):
    """Sums over all the fit's rows, each worker computing its share over the blocks it holds.

    Every call is collective on the ``barrier`` transport: every rank makes the same calls in the same order,
    and every rank receives the same bits."""

    rank: int
    world: int

    def sum(self, kind: str, coef: np.ndarray, shapes: Shapes, loss: Any = None) -> tuple:
        """The sums of one pass of ``PartitionSums.<kind>`` (``loss_gradient``, ``loss_gradient_hessian``,
        ``loss_gradient_diagonal``, ``loss_gradient_curvature``, ``hessp``) at ``coef``, for ``loss``
        (a ``sparkml.gpu`` loss; default the fit's), as a tuple of ``shapes`` (``()``: a float)."""
        ...

    def sum_of(self, fn: Callable[..., tuple | None], shapes: Shapes, *values: np.ndarray | None) -> tuple:
        """The sum over the workers of ``fn(sums, *values)`` (``sums``: the worker's ``PartitionSums``), a tuple
        of ``shapes``; ``fn`` must be a module-level function or a ``functools.partial`` of one (it travels to
        the executors), returning None to add nothing."""
        ...


class Minimizer(Protocol):
    """A solver of the linear models' objective (``optim.linear_objective``): returns (theta, TrainingSummary).

    The exact one (``strategies.exact.quasi_newton``) also takes ``warm_start``: a regularization path's step
    (``ComposedStrategy.minimize_path``), which runs on it only.

    ``options`` is the estimator's ``StrategyOptions`` (``localIter``, ``staleness``, ``topology``, ...);
    ``bounds``: (lower, upper) over theta, or None; ``checkpoint``: an ``optim.checkpoint.Checkpoint`` (this
    rank's) or None; ``progress``: where each iteration is reported (silent on ranks other than 0)."""

    def __call__(
        self,
        comm: Any,
        objective: Any,
        theta0: np.ndarray,
        *,
        options: Any,
        max_iter: int,
        tol: float,
        name: str,
        owlqn: bool,
        bounds: tuple[np.ndarray, np.ndarray] | None,
        progress: Any,
        checkpoint: Any,
    ) -> tuple[np.ndarray, Any]: ...


class NewtonSolver(Protocol):
    """A solver of KernelSVC's problems (``optim.newton``): returns (theta, [TrainingSummary per problem])."""

    def __call__(
        self, comm: Any, make_problems: Callable, theta0: np.ndarray, *, progress: Any, checkpoint: Any, **options: Any
    ) -> tuple[np.ndarray, list]: ...
