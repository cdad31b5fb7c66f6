"""The ``jobs`` transport: a Spark job per evaluation, the solver on the driver.

Each evaluation ships its values to the partitions (a broadcast; in a Spark Connect session the task
closure: ``transport``); every partition opens its resident block (``block_store``) and returns the
weighted SUMS of its loss and gradient (or its Hessian block) computed by the ``sparkml.gpu`` loss on the
requested device, or whatever else the solver asks of it (``SparkJobs.sum_of``); ``treeAggregate`` adds the
parts. The driver divides by the total weight and adds regularization (``sparkml.optim.linear_objective``). Lost
tasks are recomputed by Spark; the sums do not depend on which executor or worker computes them.

``SparkJobs`` is both the transport (``run``: the solver runs here, on the driver) and the communicator the
solver sums through (``strategies.solver_protocols.Communicator``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sparkml.runtime.cancellation import check_interrupted
from sparkml.strategies.partition_sums import PartitionSums
from sparkml.strategies.transport import Transport


def _each_partition(rows, dataset_id, loss, device, dtype, fn, shared):
    """A partition's share: ``fn(sums, *values)`` over its resident block (nothing without rows)."""
    sums = PartitionSums(rows, dataset_id, loss, device, dtype)
    if sums:
        part = fn(sums, *(np.asarray(v.value) if v.value is not None else None for v in shared))
        if part is not None:
            yield part


# the pass kinds that return symmetric Hessians, and where in their sums: they travel packed (``_pack_symmetric``)
_HESSIAN_AT = {"loss_gradient_hessian": 2, "hessian_block": 0}


def _loss_sums(kind, loss):
    """The share function of one pass of ``PartitionSums.<kind>``; Hessians travel packed (``_HESSIAN_AT``)."""
    at = _HESSIAN_AT.get(kind)

    def share(sums, coef):
        out = getattr(sums, kind)(coef, loss)
        if out is None or at is None:
            return out
        return out[:at] + (_pack_symmetric(out[at]),) + out[at + 1 :]

    return share


def _pack_symmetric(h):
    """The upper triangles (..., p (p + 1) / 2) of symmetric (..., p, p) Hessians: half the bytes to
    ship and add (ten one-vs-rest Hessians of 601 features are 29 MB per partition and pass)."""
    rows, cols = np.triu_indices(h.shape[-1])
    return np.ascontiguousarray(h[..., rows, cols])


def _unpack_symmetric(packed, p):
    rows, cols = np.triu_indices(p)
    h = np.empty(packed.shape[:-1] + (p, p))
    h[..., rows, cols] = packed
    h[..., cols, rows] = packed
    return h


class SparkJobs:
    """Distributed sums over a ``TrainingData``'s partitions, one Spark job per call; the solver runs on the
    driver (module docstring)."""

    name = "jobs"
    rank, world = 0, 1  # the driver is the one process the solver runs in

    def __init__(self, data, loss, options):
        self.data, self.loss, self.device = data, loss, options.device
        self.transport = Transport(data, options.aggregation_depth)

    def run(self, solve: Callable[..., Any], *, last_pass: bool, progress, checkpoint) -> Any:
        """``solve(communicator, progress, checkpoint)`` on the driver, this object the communicator.
        ``last_pass`` matters only to the barrier transport (``TrainingData.release`` deletes the blocks)."""
        return solve(self, progress, checkpoint)

    def sum_of(self, fn: Callable[..., Any], shapes: Sequence[tuple] | None, *values) -> tuple:
        """The element-wise sum over the partitions of ``fn(sums, *values)`` (``sums``: the partition's
        ``PartitionSums``; ``fn`` returns a tuple of floats / arrays, or None to add nothing). ``values``
        travel as broadcasts; ``shapes`` (the tuple's) is what a barrier stage needs, not used here."""
        shared = [self.transport.share(None if v is None else np.ascontiguousarray(v, np.float64)) for v in values]
        dataset_id, loss, device, dtype = self.data.dataset_id, self.loss, self.device, self.data.compute_dtype
        check_interrupted()  # Ctrl-C between two passes: no job was running for it to cancel
        try:
            total = self.transport.sum(lambda rows: _each_partition(rows, dataset_id, loss, device, dtype, fn, shared))
        finally:
            for s in shared:
                s.unpersist(blocking=False)
        if total is None:
            raise RuntimeError("no partition returned a result: the training blocks are missing")
        return total

    def sum(self, kind: str, coef, shapes: Sequence[tuple] | None = None, loss=None) -> tuple:
        """The sums of one pass of ``PartitionSums.<kind>`` (e.g. ``loss_gradient``: (sum_i w_i l_i,
        sum_i w_i dl_i/dcoef)) at ``coef`` over all rows, for ``loss`` (default: the fit's)."""
        total = self.sum_of(_loss_sums(kind, loss or self.loss), shapes, coef)
        at = _HESSIAN_AT.get(kind)
        if at is None:
            return total
        # H is p x p for p coefficients: a linear model's (p,) or the problems' (k, p) coef
        return total[:at] + (_unpack_symmetric(total[at], np.shape(coef)[-1]),) + total[at + 1 :]
