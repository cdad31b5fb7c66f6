"""Executor side shared by the strategies: weighted sums of a ``sparkml.gpu`` loss over resident blocks.

The losses are typed by ``sparkml.gpu.loss_protocol``: a linear model's ``Loss``, or KernelSVC's problem sets
(``BlockLoss``; ``NewtonCGProblems`` for the Newton-CG passes).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from sparkml.data import block_store
from sparkml.runtime import fault_injection, task_context, worker_socket

if TYPE_CHECKING:
    from sparkml.gpu.loss_protocol import BlockLoss, Loss, NewtonCGProblems

Sums = tuple[Any, ...]  # float64 ndarrays (a float where the sum is a scalar), one per returned quantity

_THREADS_SET = False


def set_torch_threads(torch):
    """One intra-op thread per task core: Spark already runs one task per core in parallel."""
    global _THREADS_SET
    if not _THREADS_SET:
        ctx = task_context.current()
        cpus = int(os.environ.get("SPARKML_TORCH_THREADS", ctx.cpus() if ctx else 1))
        torch.set_num_threads(max(1, cpus))
        _THREADS_SET = True


class PartitionSums:
    """The loss sums over the blocks named by ``handles`` (rows whose [0] is the partition id and
    [1] its row count), opened once from the block store on ``device``."""

    def __init__(self, handles, dataset_id: str, loss: BlockLoss | None, device, dtype) -> None:
        import torch

        from sparkml.gpu import resolve_dtype

        set_torch_threads(torch)
        worker_socket.acknowledge_promptly()  # before the input: the JVM's rows arrive without a 40 ms wait
        handles = list(handles)  # drained always, so Spark can reuse this Python worker
        if handles:
            fault_injection.inject("pass", handles[0][0])
        self.partition = handles[0][0] if handles else None
        self.torch, self.loss = torch, loss
        self.device = torch.device(task_context.device(device).device)
        dt = resolve_dtype(dtype)
        self.parts = [block_store.open_partition(dataset_id, row[0], self.device, dt) for row in handles if row[1] > 0]
        self._hessp_cache: tuple[tuple[str, bytes], list[Callable]] | None = None
        self._hessp_parts: list | None = None  # self.parts as the products read them (_stack_factored), made once

    def __bool__(self):
        return bool(self.parts)

    def _coef(self, coef):
        return self.torch.from_numpy(np.ascontiguousarray(coef, dtype=np.float64)).to(self.device)

    def loss_gradient(self, coef: np.ndarray, loss: BlockLoss | None = None) -> Sums | None:
        """(sum_i w_i l_i, sum_i w_i dl_i/dcoef) as float64 (a float when the loss sum is a scalar), or
        None without rows. ``loss``: instead of this object's (a ``sparkml.gpu.problems`` subset, say)."""
        return self._sums(coef, loss or self.loss, "loss_gradient")

    def loss_gradient_hessian(self, coef: np.ndarray, loss: BlockLoss | None = None) -> Sums | None:
        """The sums above plus the Hessian block sum_i w_i h_i x~_i x~_i^T."""
        return self._sums(coef, loss or self.loss, "loss_gradient_hessian")

    def hessian_block(self, coef: np.ndarray, loss: BlockLoss | None = None) -> Sums | None:
        """(the Hessian block sum_i w_i h_i x~_i x~_i^T,): a Newton-CG round's direct steps (``optim.newton_state``)."""
        return self._sums(coef, loss or self.loss, "hessian_block")

    def loss_gradient_diagonal(self, coef: np.ndarray, loss: NewtonCGProblems | None = None) -> Sums | None:
        """(loss, gradient, Hessian diagonal, active row counts) sums of a ``sparkml.gpu.problems`` loss."""
        return self._sums(coef, loss or self.loss, "loss_gradient_diagonal")

    def loss_gradient_curvature(self, coef: np.ndarray, loss: NewtonCGProblems | None = None) -> Sums | None:
        """(loss, gradient, sum_i w_i l''_i per problem, active row counts) sums of a ``sparkml.gpu.problems``
        loss."""
        return self._sums(coef, loss or self.loss, "loss_gradient_curvature")

    def hessp(self, coef_and_v: np.ndarray, loss: Loss | NewtonCGProblems | None = None) -> Sums | None:
        """Hessian-vector product sums at coef_and_v[0] times coef_and_v[1] (one array: one broadcast)."""
        return self._sums(coef_and_v, loss or self.loss, "hessp")

    def _hessp_operators(self, coef, loss: Loss | NewtonCGProblems):
        """Per block, v -> H v at ``coef`` (``hessp_operator``), kept while the passes ask for the same
        coef and loss (a Newton round's CG iterations): the active rows are found and copied once."""
        key = (repr(loss), coef.cpu().numpy().tobytes())
        if self._hessp_cache is None or self._hessp_cache[0] != key:
            self._hessp_cache = None  # frees the previous round's copies before making new ones
            # the products only: the other sums stay per partition, summed as the sync strategy sums them
            if self._hessp_parts is None:
                self._hessp_parts = _stack_factored(self.parts)
            self._hessp_cache = (key, [loss.hessp_operator(coef, p.block, p.y, p.w) for p in self._hessp_parts])
        return self._hessp_cache[1]

    def _part_sums(self, c, loss: Any, kind: str):
        """One tuple of tensors per block."""
        if kind == "hessp":
            return [(op(c[1]),) for op in self._hessp_operators(c[0], loss)]
        self._hessp_cache = None
        if kind == "hessian_block":
            return [(loss.hessian_block(c, p.block, p.y, p.w),) for p in self.parts]
        if kind == "loss_gradient_hessian" and not hasattr(loss, kind):
            return [
                loss.loss_gradient(c, p.block, p.y, p.w) + (loss.hessian_block(c, p.block, p.y, p.w),)
                for p in self.parts
            ]
        return [getattr(loss, kind)(c, p.block, p.y, p.w) for p in self.parts]

    def _sums(self, coef, loss, kind: str) -> Sums | None:
        start, total = time.perf_counter(), None
        for part in self._part_sums(self._coef(coef), loss, kind):
            part = tuple(_numpy(t) for t in part)
            total = part if total is None else tuple(a + b for a, b in zip(total, part))
        fault_injection.straggle(self.partition, time.perf_counter() - start)
        return total


def _stack_factored(parts):
    """Partitions whose blocks share one right factor (Nystroem's projection) read as one stacked
    block (``sparkml.gpu.stacked``): the right factor's products then run once per pass, not per partition."""
    import torch

    from sparkml.gpu.factored import FactoredBlock
    from sparkml.gpu.stacked import RowStack

    if len(parts) < 2 or not all(isinstance(p.block, FactoredBlock) for p in parts):
        return parts
    right = parts[0].block.right
    if not all(p.block.right.shape == right.shape and torch.equal(p.block.right, right) for p in parts[1:]):
        return parts
    block = FactoredBlock(RowStack([p.block.left for p in parts]), right)
    return [block_store.PartitionData(block, torch.cat([p.y for p in parts]), torch.cat([p.w for p in parts]))]


def _numpy(t):
    t = t.double().cpu().numpy()
    return float(t) if t.ndim == 0 else t
