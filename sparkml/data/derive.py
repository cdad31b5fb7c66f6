"""Derived features of one partition, written on the executor that holds it: what ``TrainingData.derive``'s
tasks run (no pyspark here: a harness without Spark runs it too).

``features(rows)`` maps a dense (k, d) tensor of rows to (k, m) (a Nystroem kernel block K(rows, L), random
Fourier features), written as the dense block ``x`` of a new dataset; labels and weights are copied.

A ``KernelPlan`` (Nystroem) bounds what a partition keeps. Its executor's budget (``budget_bytes``, or on a GPU
``GPU_SHARE`` of the device's memory) is shared by the partitions there in proportion to their rows
(``shares``). With ``mode="auto"`` on a CPU a partition whose K(rows, L) fits its share is stored; else the first
rows within ``STORED_SHARE`` of it are (measured: the rest of the share, holding a Newton round's active rows,
saves more than storing more rows would), and the rest are kept as rows (``rows``, with ``landmarks`` and the
kernel in ``attrs.json``) whose kernel every pass computes in chunks (``sparkml.gpu.kernel_block``): memory stays
flat in n. On a GPU
``"auto"`` computes every row's kernel per pass: recomputing costs milliseconds per million rows there, less
than moving stored blocks to the device (``benchmarks/bench_kernel_per_pass.py``). ``"stored"``: every row
stored, whatever the budget; ``"per_pass"``: none. A Newton round materializes the kernel blocks of its active
rows within what the share leaves (``KernelBlock.take``), and copies the stored ones it needs: a partition holds
at most about twice its share. Rows as wide as the kernel block (d >= m, wide sparse data) are always stored:
keeping them would save nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sparkml.data import block_store

GPU_SHARE = 0.5  # of a GPU's memory, for the kernel blocks of the partitions its executor holds
_ROW_RUN = 1 << 20  # rows copied at a time into the kept rows
# a partition whose kernel blocks exceed its budget stores rows within this share of it, and leaves the rest to the
# Newton rounds' active rows (the hinge's band), which each of a round's conjugate-gradient products reads again
STORED_SHARE = 0.5


@dataclass(frozen=True, eq=False)
class KernelPlan:
    """How the partitions keep their kernel blocks K(X, L) (the module docstring)."""

    kind: str
    landmarks: np.ndarray  # (m, d) float64
    gamma: float
    degree: int
    coef0: float
    mode: str = "auto"
    budget_bytes: int | None = None  # per executor, on any device (kernelBlockMemory); None: by device, as below
    cpu_budget_bytes: int = 0  # per CPU executor, from its memory setting (``sparkml.kernel.block_budget``)
    shares: dict[int, float] = field(default_factory=dict)  # partition -> its rows' share of its executor's

    def partition_budget(self, partition, device) -> int:
        """The bytes of kernel blocks this partition may hold on ``device``."""
        import torch

        device = torch.device(device)
        budget = self.budget_bytes
        if budget is None and device.type == "cuda":
            budget = int(GPU_SHARE * torch.cuda.get_device_properties(device).total_memory)
        elif budget is None:
            budget = self.cpu_budget_bytes
        return int(budget * self.shares.get(partition, 1.0))

    def stored_rows(self, partition, rows, d, itemsize, device) -> int:
        """How many of the partition's ``rows`` (of ``d`` features) keep their kernel block stored."""
        import torch

        m = len(self.landmarks)
        if self.mode == "stored" or d >= m:
            return rows
        if self.mode == "per_pass" or torch.device(device).type != "cpu":
            return 0
        budget, per_row = self.partition_budget(partition, device), m * itemsize
        return rows if rows * per_row <= budget else int(STORED_SHARE * budget // per_row)

    def attrs(self, partition, device, stored_bytes) -> dict:
        """What the block store keeps beside the rows: the kernel, and the bytes a Newton round may materialize
        of its active rows' kernel blocks (``KernelBlock.take``): the partition's budget less what it stores."""
        kernel = {"kind": self.kind, "gamma": self.gamma, "degree": self.degree, "coef0": self.coef0}
        return {"kernel": kernel, "take_bytes": max(0, self.partition_budget(partition, device) - stored_bytes)}


def executor_shares(blocks) -> dict[int, float]:
    """{partition: its rows / the rows of every partition on its executor} for ``TrainingData.blocks``
    ((partition, rows, store key) of each non-empty partition; the key names the executor's block store)."""
    totals: dict[str, int] = {}
    for _, rows, store in blocks:
        totals[store] = totals.get(store, 0) + rows
    return {p: rows / max(1, totals[store]) for p, rows, store in blocks}


def derive_partition(
    source, target, partition, device, dtype, features, right_factor=None, plan=None, chunk=8192, by_label=False
):
    """Write partition ``partition`` of dataset ``source`` as dataset ``target``'s: ``features`` of its rows
    (all, or the first ``plan.stored_rows``; the others as rows with the plan's landmarks and kernel), times
    ``right_factor`` when given (stored beside, ``sparkml.gpu.factored``), and its labels and weights.
    ``by_label``: the rows in label order (stable), so that a one-vs-one pass reads each class's rows as one run
    (``sparkml.gpu.problems.OneVsOneProblems``). Not by default: in float32, sums over rows of one sign (a binary
    problem's classes one after the other) round more than sums whose terms cancel as they go."""
    import torch

    from sparkml.gpu import resolve_dtype

    device = torch.device(device)
    part = block_store.open_partition(source, partition, device, resolve_dtype(dtype))
    block, y, w = part.block, part.y, part.w
    if by_label and len(y) > 1 and bool((y[1:] < y[:-1]).any()):
        order = torch.argsort(y, stable=True)
        block, y, w = block.take(order), y.index_select(0, order), w.index_select(0, order)
    n, itemsize = part.n_rows, np.dtype(dtype).itemsize
    writer = block_store.PartitionWriter(target, partition)
    try:
        d = block.n_features
        stored = n if plan is None else plan.stored_rows(partition, n, d, itemsize, device)
        for i in range(0, stored, chunk):
            writer.append("x", features(block.rows(i, min(i + chunk, stored))).cpu().numpy())
        if stored < n:  # the rows as they are: a copy, in long runs
            for i in range(stored, n, _ROW_RUN):
                writer.append("rows", block.rows(i, min(i + _ROW_RUN, n)).cpu().numpy())
            writer.append("landmarks", np.asarray(plan.landmarks, dtype=np.float64))
            writer.attrs = plan.attrs(partition, device, stored * len(plan.landmarks) * itemsize)
        if right_factor is not None:
            writer.append("right", np.asarray(right_factor, dtype=dtype))
        writer.append("y", y.cpu().numpy())
        writer.append("w", w.cpu().numpy())
        writer.commit()
    except BaseException:
        writer.abort()
        raise
    return stored
