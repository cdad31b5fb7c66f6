"""Several row blocks read as one, without copying their rows: X = [X_1; X_2; ...].

    X v = [X_1 v; X_2 v; ...]        X^T r = sum_k X_k^T r_k        X^T diag(h) X = sum_k X_k^T diag(h_k) X_k

A Spark task may hold several partitions' blocks. Stacked under one ``sparkml.gpu.factored.FactoredBlock``
(``sparkml.strategies.partition_sums``), the (m, p) products with the right factor run once per
product for all of them instead of once per partition: one (m, p) product saved per extra
partition on every Hessian-vector product.
"""

from __future__ import annotations

import torch

from .blocks import _Block

__all__ = ["RowStack"]


class RowStack(_Block):
    """The rows of ``blocks`` in order; they must agree in width, dtype and device."""

    def __init__(self, blocks):
        self.blocks = list(blocks)
        if not self.blocks:
            raise ValueError("RowStack needs at least one block")
        first = self.blocks[0]
        for b in self.blocks[1:]:
            if (b.n_features, b.dtype, b.storage_dtype, b.device) != (
                first.n_features,
                first.dtype,
                first.storage_dtype,
                first.device,
            ):
                raise ValueError("RowStack's blocks must agree in width, dtype, storage dtype and device")
        self.n_features = first.n_features
        self._starts = [0]
        for b in self.blocks:
            self._starts.append(self._starts[-1] + b.n_rows)
        self.n_rows = self._starts[-1]

    @property
    def computed_per_pass(self) -> bool:
        return any(b.computed_per_pass for b in self.blocks)

    @property
    def storage_dtype(self) -> torch.dtype:
        return self.blocks[0].storage_dtype

    @property
    def dtype(self) -> torch.dtype:
        return self.blocks[0].dtype

    @property
    def device(self) -> torch.device:
        return self.blocks[0].device

    def _spans(self):
        return zip(self.blocks, self._starts[:-1], self._starts[1:])

    def to(self, device) -> RowStack:
        return RowStack([b.to(device) for b in self.blocks])

    def matmul(self, v: torch.Tensor) -> torch.Tensor:
        return torch.cat([b.matmul(v) for b in self.blocks])

    def rmatmul(self, r: torch.Tensor) -> torch.Tensor:
        """X^T r; the blocks' float32 sums are added in float64 (as a float32 block's own chunks are)."""
        r = self._vec(r)
        outs = [b.rmatmul(r[start:stop]) for b, start, stop in self._spans()]
        return outs[0] if len(outs) == 1 else sum(o.to(torch.float64) for o in outs)

    def margin_pass(self, v: torch.Tensor, fn) -> torch.Tensor:
        # each block's runs of rows, their positions shifted to the stack's
        return sum(b.margin_pass(v, lambda i, j, m, s=start: fn(s + i, s + j, m)) for b, start, _ in self._spans())

    def take(self, index) -> RowStack:
        """The rows ``index`` (increasing, as an active set is), one taken block per block they fall in."""
        index = self._index(index)
        if len(index) > 1 and not bool((index[1:] >= index[:-1]).all()):
            raise ValueError("RowStack.take needs increasing row indices")
        parts = []
        for b, start, stop in self._spans():
            mine = index[(index >= start) & (index < stop)]
            if len(mine):
                parts.append(b.take(mine - start))
        return RowStack(parts or [self.blocks[0].take(index)])

    def slice(self, start: int, stop: int) -> _Block:
        """The rows start..stop: each block's part of them (views where the blocks allow), stacked."""
        stop = min(stop, self.n_rows)
        parts = [b.slice(max(start, s) - s, min(stop, e) - s) for b, s, e in self._spans() if s < stop and e > start]
        return parts[0] if len(parts) == 1 else RowStack(parts or [self.blocks[0].slice(0, 0)])

    def rows(self, start: int, stop: int) -> torch.Tensor:
        stop = min(stop, self.n_rows)
        pieces = [b.rows(max(start, s) - s, min(stop, e) - s) for b, s, e in self._spans() if s < stop and e > start]
        return torch.cat(pieces) if pieces else self.blocks[0].rows(0, 0)

    def weighted_gram(self, h: torch.Tensor) -> torch.Tensor:
        h = self._vec(h)
        return sum(b.weighted_gram(h[start:stop]) for b, start, stop in self._spans())

    def _moments(self, w, second):
        w = self._vec(w, torch.float64)
        sums = [b._moments(w[start:stop], second) for b, start, stop in self._spans()]
        return sum(s[0] for s in sums), (sum(s[1] for s in sums) if second else None)

    def to_dense(self) -> torch.Tensor:
        return torch.cat([b.to_dense() for b in self.blocks])
