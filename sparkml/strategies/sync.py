"""The ``sync`` strategy: broadcast -> mapPartitions -> treeAggregate, one Spark job per evaluation.

Each evaluation broadcasts the coefficients (original feature space, the ``gpu`` loss layout);
every partition opens its resident block (``block_store``) and returns the weighted SUMS of its
loss and gradient (or its Hessian block) computed by the ``gpu`` loss on the requested device;
``treeAggregate`` adds the parts. The driver divides by the total weight and adds regularization
(``sparkml.objective``). Lost tasks are recomputed by Spark; the sums do not depend on which
executor or worker computes them.
"""
import os

import numpy as np

from sparkml import block_store

_THREADS_SET = False


def _set_torch_threads(torch):
    """One intra-op thread per task core: Spark already runs one task per core in parallel."""
    global _THREADS_SET
    if not _THREADS_SET:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        cpus = int(os.environ.get("SPARKML_TORCH_THREADS", ctx.cpus() if ctx else 1))
        torch.set_num_threads(max(1, cpus))
        _THREADS_SET = True


def _partition_sums(rows, dataset_id, loss, coef_bc, device, dtype, kind):
    """Sum of ``kind`` ('loss_gradient' or 'hessian') over the blocks of the handle rows given."""
    import torch

    from gpu import resolve_device, resolve_dtype

    _set_torch_threads(torch)
    dev, dt = resolve_device(device), resolve_dtype(dtype)
    coef = None
    total = None
    for row in rows:  # always drain the handles so Spark can reuse this Python worker
        partition, n_rows = row[0], row[1]
        if n_rows == 0:
            continue
        data = block_store.open_partition(dataset_id, partition, dev, dt)
        if coef is None:
            coef = torch.from_numpy(np.asarray(coef_bc.value)).to(dev)
        if kind == "loss_gradient":
            f, g = loss.loss_gradient(coef, data.block, data.y, data.w)
            part = (float(f), g.double().cpu().numpy())
        else:
            f, g = loss.loss_gradient(coef, data.block, data.y, data.w)
            h = loss.hessian_block(coef, data.block, data.y, data.w)
            part = (float(f), g.double().cpu().numpy(), h.double().cpu().numpy())
        total = part if total is None else tuple(a + b for a, b in zip(total, part))
    if total is not None:
        yield total


def _add(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return tuple(x + y for x, y in zip(a, b))


class SyncStrategy:
    """Distributed sums of a ``gpu`` loss over ``TrainingData``, one Spark job per call."""

    name = "sync"

    def __init__(self, data, loss, device, aggregation_depth=2):
        self.data, self.loss, self.device = data, loss, device
        self.depth = max(2, int(aggregation_depth))
        self.evaluations = 0

    def _run(self, coef, kind):
        sc = self.data.sc
        coef_bc = sc.broadcast(np.ascontiguousarray(coef, dtype=np.float64))
        dataset_id, loss, device, dtype = self.data.dataset_id, self.loss, self.device, self.data.dtype
        try:
            parts = self.data.handles.mapPartitions(
                lambda rows: _partition_sums(rows, dataset_id, loss, coef_bc, device, dtype, kind)
            )
            total = parts.treeAggregate(None, _add, _add, depth=self.depth)
        finally:
            coef_bc.unpersist(blocking=False)
        self.evaluations += 1
        if total is None:
            raise RuntimeError("no partition returned a result: the training blocks are missing")
        return total

    def loss_gradient(self, coef):
        """(sum_i w_i l_i, sum_i w_i dl_i/dcoef) at ``coef`` (float64 ndarray in the loss's layout)."""
        return self._run(coef, "loss_gradient")

    def loss_gradient_hessian(self, coef):
        """The sums above plus the Hessian block sum_i w_i h_i x~_i x~_i^T (one pass)."""
        return self._run(coef, "hessian")
