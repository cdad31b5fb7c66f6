"""Executor side shared by the strategies: weighted sums of a ``gpu`` loss over resident blocks."""
import os

import numpy as np

from sparkml import block_store

_THREADS_SET = False


def set_torch_threads(torch):
    """One intra-op thread per task core: Spark already runs one task per core in parallel."""
    global _THREADS_SET
    if not _THREADS_SET:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        cpus = int(os.environ.get("SPARKML_TORCH_THREADS", ctx.cpus() if ctx else 1))
        torch.set_num_threads(max(1, cpus))
        _THREADS_SET = True


class PartitionSums:
    """The loss sums over the blocks named by ``handles`` (rows whose [0] is the partition id and
    [1] its row count), opened once from the block store on ``device``."""

    def __init__(self, handles, dataset_id, loss, device, dtype):
        import torch

        from gpu import resolve_device, resolve_dtype

        set_torch_threads(torch)
        self.torch, self.loss = torch, loss
        self.device = resolve_device(device)
        dt = resolve_dtype(dtype)
        # always drain the handles so Spark can reuse this Python worker
        self.parts = [block_store.open_partition(dataset_id, row[0], self.device, dt)
                      for row in list(handles) if row[1] > 0]

    def __bool__(self):
        return bool(self.parts)

    def _coef(self, coef):
        return self.torch.from_numpy(np.ascontiguousarray(coef, dtype=np.float64)).to(self.device)

    def loss_gradient(self, coef):
        """(sum_i w_i l_i, sum_i w_i dl_i/dcoef) as (float, float64 ndarray), or None without rows."""
        c, total = self._coef(coef), None
        for p in self.parts:
            f, g = self.loss.loss_gradient(c, p.block, p.y, p.w)
            part = (float(f), g.double().cpu().numpy())
            total = part if total is None else (total[0] + part[0], total[1] + part[1])
        return total

    def loss_gradient_hessian(self, coef):
        c, total = self._coef(coef), None
        for p in self.parts:
            f, g = self.loss.loss_gradient(c, p.block, p.y, p.w)
            h = self.loss.hessian_block(c, p.block, p.y, p.w)
            part = (float(f), g.double().cpu().numpy(), h.double().cpu().numpy())
            total = part if total is None else tuple(a + b for a, b in zip(total, part))
        return total
