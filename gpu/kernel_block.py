"""A kernel block computed per pass: K(X, L) for rows X and landmarks L, never held whole.

A stored Nystroem block holds K(X, L): m values per row (16 KB a row at m = 4000 in float32), against the d
values of the row itself. ``KernelBlock`` keeps the rows X (n, d) and the landmarks L (m, d) instead, and
every product computes K(X_c, L) for one chunk of rows c at a time, uses it and drops it:

    X v                = [K(X_c, L) v]_c
    X^T r              = sum_c K(X_c, L)^T r_c                          (float64 sum over the chunks)
    margin_pass(v, fn) = sum_c K(X_c, L)^T fn(K(X_c, L) v)              (one kernel chunk for both products)
    X^T diag(h) X      = sum_c K(X_c, L)^T diag(h_c) K(X_c, L)          (the chunks of rows with h != 0)

Memory: the rows, the landmarks and one chunk of at most ``chunk_bytes``, whatever n. Cost: every pass
computes the kernel again, 2 n m d flops and n m exponentials (rbf), where a stored block reads n m values:
on a GPU a few milliseconds per million rows; on a CPU several times the stored read
(``benchmarks/bench_kernel_torch.py``). ``take(index)`` (the active rows of a Newton round, which its
conjugate-gradient products read again and again) materializes K(X[index], L) as a ``DenseBlock`` when that
fits ``take_bytes`` (as many of them as do, the others computed per product).

Each chunk is computed as a stored block is (``kernel_matrix`` of the rows in their storage dtype against the
landmarks cast to it) and multiplied as a ``DenseBlock`` of it, so the two give the same numbers up to the
order in which the chunks' float64 sums are added.
"""

from __future__ import annotations

import torch

from .blocks import DenseBlock, _Block, _compute_dtype
from .kernels import DEFAULT_BUDGET_BYTES, kernel_matrix
from .stacked import RowStack

__all__ = ["KernelBlock", "default_chunk_bytes"]

_F64 = torch.float64
# rows of a chunk of at least this many: a multiple of it, the 4096-row sums of a stored block's X^T r
# (``blocks._chunked_rmatmul``)
_ROW_MULTIPLE = 4096
# a CPU chunk of 4 MiB (262 rows at m = 4000, float32) is computed and multiplied while it stays in cache: 2.2 ns
# per kernel value on one core, against 3.9 for 64 MiB chunks read back from memory by the products; a GPU
# chunk of 1 GiB: few enough chunks that kernel launches do not count
_CPU_CHUNK_BYTES, _GPU_CHUNK_BYTES = 4 << 20, 1 << 30


def default_chunk_bytes(device) -> int:
    """The bytes of one kernel chunk on ``device``."""
    return _CPU_CHUNK_BYTES if torch.device(device).type == "cpu" else _GPU_CHUNK_BYTES


class KernelBlock(_Block):
    """K(rows, landmarks) of ``kernel`` (``sparkml.gpu.kernels``: gamma, degree, coef0), computed per product.

    ``rows`` (n, d) and ``landmarks`` (m, d) tensors; the kernel is computed in the rows' dtype (the storage
    dtype), the products in ``compute_dtype`` as a ``DenseBlock`` does. ``take_bytes``: the most bytes that
    ``take`` materializes."""

    def __init__(
        self,
        rows,
        landmarks,
        kernel,
        *,
        gamma=None,
        degree=3,
        coef0=1.0,
        compute_dtype=None,
        chunk_bytes=None,
        take_bytes=0,
    ):
        rows = torch.as_tensor(rows)
        if rows.dim() != 2 or not rows.is_floating_point():
            raise ValueError(f"KernelBlock needs a floating 2-D tensor of rows, got {rows.dtype} {tuple(rows.shape)}")
        landmarks = torch.as_tensor(landmarks)
        if landmarks.dim() != 2 or landmarks.shape[1] != rows.shape[1] or landmarks.shape[0] == 0:
            raise ValueError(f"landmarks must be (m, {rows.shape[1]}); got {tuple(landmarks.shape)}")
        self.x = rows
        self.landmarks = landmarks.to(device=rows.device, dtype=rows.dtype)
        self.kernel, self.kernel_args = kernel, {"gamma": gamma, "degree": degree, "coef0": coef0}
        self.n_rows, self.n_features = int(rows.shape[0]), int(landmarks.shape[0])
        self._compute = _compute_dtype(rows.dtype, compute_dtype)
        self.chunk_bytes = int(chunk_bytes or default_chunk_bytes(rows.device))
        self.take_bytes = int(take_bytes)
        fit = max(1, self.chunk_bytes // max(1, self.n_features * rows.element_size()))
        self.chunk_rows = fit if fit < _ROW_MULTIPLE else fit // _ROW_MULTIPLE * _ROW_MULTIPLE

    def _like(self, rows) -> KernelBlock:
        return KernelBlock(
            rows,
            self.landmarks,
            self.kernel,
            **self.kernel_args,
            compute_dtype=self._compute,
            chunk_bytes=self.chunk_bytes,
            take_bytes=self.take_bytes,
        )

    @property
    def computed_per_pass(self) -> bool:
        return True

    @property
    def storage_dtype(self) -> torch.dtype:
        return self.x.dtype

    @property
    def device(self) -> torch.device:
        return self.x.device

    def to(self, device) -> KernelBlock:
        return self._like(self.x.to(device))

    def _kernel(self, x) -> torch.Tensor:
        """K(x, L) in the storage dtype, as a stored block's rows were computed."""
        budget = max(DEFAULT_BUDGET_BYTES, self.chunk_bytes) if self.device.type != "cpu" else DEFAULT_BUDGET_BYTES
        return kernel_matrix(self.kernel, x, self.landmarks, **self.kernel_args, budget_bytes=budget)

    def _chunks(self):
        """(start, the stored-like block of rows start..start + chunk_rows), in order."""
        for i in range(0, self.n_rows, self.chunk_rows):
            yield i, DenseBlock(self._kernel(self.x[i : i + self.chunk_rows]), self._compute)

    def _sum(self, parts) -> torch.Tensor:
        """The chunks' products added: one chunk's as it is (a stored block's own), several in float64."""
        parts = iter(parts)
        total = next(parts)  # a block of rows has at least one chunk
        for part in parts:
            total = total.to(_F64) + part.to(_F64)
        return total

    def matmul(self, v: torch.Tensor) -> torch.Tensor:
        v = self._vec(v)
        out = torch.empty((self.n_rows,) + tuple(v.shape[1:]), dtype=self.dtype, device=self.device)
        for i, chunk in self._chunks():
            out[i : i + chunk.n_rows] = chunk.matmul(v)
        return out

    def rmatmul(self, r: torch.Tensor) -> torch.Tensor:
        r = self._vec(r)
        if self.n_rows == 0:
            return torch.zeros((self.n_features,) + tuple(r.shape[1:]), dtype=self.dtype, device=self.device)
        return self._sum(chunk.rmatmul(r[i : i + chunk.n_rows]) for i, chunk in self._chunks())

    def margin_pass(self, v: torch.Tensor, fn) -> torch.Tensor:
        """X^T fn(X v), computing each chunk of the kernel once for both products."""
        v = self._vec(v)
        if self.n_rows == 0:
            return torch.zeros((self.n_features,) + tuple(v.shape[1:]), dtype=self.dtype, device=self.device)
        return self._sum(chunk.margin_pass(v, lambda a, b, m, s=i: fn(s + a, s + b, m)) for i, chunk in self._chunks())

    def weighted_gram(self, h: torch.Tensor) -> torch.Tensor:
        """X^T diag(h) X over the rows with h != 0, a chunk of them at a time, the chunks added in float64."""
        h = self._vec(h)
        rows = torch.nonzero(h, as_tuple=True)[0]
        gram = torch.zeros((self.n_features, self.n_features), dtype=_F64, device=self.device)
        for i in range(0, len(rows), self.chunk_rows):
            idx = rows[i : i + self.chunk_rows]
            chunk = DenseBlock(self._kernel(self.x.index_select(0, idx)), self._compute)
            gram += chunk.weighted_gram(h.index_select(0, idx)).to(_F64)
        return gram.to(self.dtype)

    def rows(self, start: int, stop: int) -> torch.Tensor:
        return self._kernel(self.x[start:stop]).to(self.dtype)

    def slice(self, start: int, stop: int) -> KernelBlock:
        return self._like(self.x[start:stop])

    def take(self, index) -> _Block:
        """The rows ``index``: the kernel block of as many of them as ``take_bytes`` holds, as a ``DenseBlock``
        (computed once here), and a ``KernelBlock`` of the others (stacked after it)."""
        taken = self.x.index_select(0, self._index(index))
        kept = min(len(taken), self.take_bytes // max(1, self.n_features * self.x.element_size()))
        if kept == 0:
            return self._like(taken)
        stored = DenseBlock(self._like(taken[:kept])._materialize(), self._compute)
        return stored if kept == len(taken) else RowStack([stored, self._like(taken[kept:])])

    def _materialize(self) -> torch.Tensor:
        out = torch.empty((self.n_rows, self.n_features), dtype=self.x.dtype, device=self.device)
        for i in range(0, self.n_rows, self.chunk_rows):
            out[i : i + self.chunk_rows] = self._kernel(self.x[i : i + self.chunk_rows])
        return out

    def to_dense(self) -> torch.Tensor:
        return self._materialize().to(self.dtype)

    def _moments(self, w, second):
        w = self._vec(w, _F64)
        s1 = torch.zeros(self.n_features, dtype=_F64, device=self.device)
        s2 = torch.zeros_like(s1) if second else None
        for i, chunk in self._chunks():
            a, b = chunk._moments(w[i : i + chunk.n_rows], second)
            s1 += a
            if second:
                s2 += b
        return s1, s2
