"""CSR row blocks (``blocks``' products over sparse rows, laid out like ``scipy.sparse.csr_matrix``)."""

from __future__ import annotations

import numpy as np
import torch

from .blocks import _CHUNK_ELEMENTS, _Block, _compute_dtype

__all__ = ["CsrBlock"]


class CsrBlock(_Block):
    """CSR rows, laid out like ``scipy.sparse.csr_matrix``.

    ``crow_indices`` (n+1,), ``col_indices`` (nnz,), ``values`` (nnz,) whose dtype is
    the block dtype; indices may be int32 or int64 (stored as int64). The row of each
    nonzero is precomputed once, so X @ v is a gather of v by column plus an
    ``index_add_`` by row, and X^T @ r a gather by row plus an ``index_add_`` by column.
    """

    def __init__(self, crow_indices, col_indices, values, shape, compute_dtype=None):
        values = torch.as_tensor(values)
        if not values.is_floating_point():
            raise ValueError(f"CsrBlock values must be floating, got {values.dtype}")
        device = values.device
        crow = torch.as_tensor(crow_indices).to(device=device, dtype=torch.int64)
        col = torch.as_tensor(col_indices).to(device=device, dtype=torch.int64)
        n, d = int(shape[0]), int(shape[1])
        if crow.dim() != 1 or crow.numel() != n + 1:
            raise ValueError(f"crow_indices must have n_rows+1={n + 1} entries, got {crow.numel()}")
        if col.numel() != values.numel():
            raise ValueError("col_indices and values must have the same length")
        self.crow_indices, self.col_indices, self.values = crow, col, values.reshape(-1)
        self.n_rows, self.n_features = n, d
        self._compute = _compute_dtype(values.dtype, compute_dtype)
        counts = crow[1:] - crow[:-1]
        self.row_indices = torch.repeat_interleave(
            torch.arange(n, device=device), counts, output_size=self.values.numel()
        )

    @classmethod
    def from_scipy(cls, csr, dtype=torch.float64, device="cpu") -> CsrBlock:
        """Build from a ``scipy.sparse`` matrix (converted to CSR)."""
        csr = csr.tocsr()
        return cls(
            torch.from_numpy(np.asarray(csr.indptr, dtype=np.int64)).to(device),
            torch.from_numpy(np.asarray(csr.indices, dtype=np.int64)).to(device),
            torch.from_numpy(np.asarray(csr.data)).to(device=device, dtype=dtype),
            csr.shape,
        )

    @property
    def storage_dtype(self) -> torch.dtype:
        return self.values.dtype

    @property
    def device(self) -> torch.device:
        return self.values.device

    @property
    def nnz(self) -> int:
        return int(self.values.numel())

    def to(self, device) -> CsrBlock:
        out = object.__new__(CsrBlock)
        out.n_rows, out.n_features, out._compute = self.n_rows, self.n_features, self._compute
        for name in ("crow_indices", "col_indices", "values", "row_indices"):
            setattr(out, name, getattr(self, name).to(device))
        return out

    def matmul(self, v: torch.Tensor) -> torch.Tensor:
        """X @ v: out[row_k] += values_k * v[col_k]."""
        v = self._vec(v)
        contrib = v.index_select(0, self.col_indices)
        contrib = contrib * (self.values if v.dim() == 1 else self.values[:, None])
        out = torch.zeros((self.n_rows,) + tuple(v.shape[1:]), dtype=self.dtype, device=self.device)
        return out.index_add_(0, self.row_indices, contrib)

    def rmatmul(self, r: torch.Tensor) -> torch.Tensor:
        """X^T @ r: out[col_k] += values_k * r[row_k]."""
        r = self._vec(r)
        contrib = r.index_select(0, self.row_indices)
        contrib = contrib * (self.values if r.dim() == 1 else self.values[:, None])
        out = torch.zeros((self.n_features,) + tuple(r.shape[1:]), dtype=self.dtype, device=self.device)
        return out.index_add_(0, self.col_indices, contrib)

    def rows(self, start: int, stop: int) -> torch.Tensor:
        return self._dense_rows(start, stop, self.dtype)

    def take(self, index: torch.Tensor) -> CsrBlock:
        index = self._index(index)
        starts = self.crow_indices.index_select(0, index)
        counts = self.crow_indices.index_select(0, index + 1) - starts
        crow = torch.zeros(len(index) + 1, dtype=torch.int64, device=self.device)
        torch.cumsum(counts, 0, out=crow[1:])
        nnz = int(crow[-1])
        # position of each kept nonzero in the old arrays: its row's old start + its offset in the row
        pos = torch.repeat_interleave(starts - crow[:-1], counts, output_size=nnz) + torch.arange(
            nnz, device=self.device
        )
        return CsrBlock(crow, self.col_indices[pos], self.values[pos], (len(index), self.n_features), self._compute)

    def _dense_rows(self, start: int, stop: int, dtype) -> torch.Tensor:
        """Rows [start, stop) as a dense (stop-start, d) tensor."""
        lo, hi = int(self.crow_indices[start]), int(self.crow_indices[stop])
        out = torch.zeros((stop - start, self.n_features), dtype=dtype, device=self.device)
        out.index_put_(
            (self.row_indices[lo:hi] - start, self.col_indices[lo:hi]),
            self.values[lo:hi].to(dtype),
            accumulate=True,
        )
        return out

    def weighted_gram(self, h: torch.Tensor) -> torch.Tensor:
        """X^T diag(h) X, (d, d), in the block dtype, by dense row chunks (meant for small d)."""
        h = self._vec(h)
        gram = torch.zeros((self.n_features, self.n_features), dtype=self.dtype, device=self.device)
        step = max(1, _CHUNK_ELEMENTS // max(1, self.n_features))
        for i in range(0, self.n_rows, step):
            xc = self._dense_rows(i, min(i + step, self.n_rows), self.dtype)
            gram += xc.T @ (xc * h[i : i + step, None])
        return gram

    def _moments(self, w, second):
        w = self._vec(w, torch.float64)
        vals = self.values.to(torch.float64)
        wk = w.index_select(0, self.row_indices) * vals
        zeros = torch.zeros(self.n_features, dtype=torch.float64, device=self.device)
        s1 = zeros.clone().index_add_(0, self.col_indices, wk)
        s2 = zeros.index_add_(0, self.col_indices, wk * vals) if second else None
        return s1, s2

    def to_dense(self) -> torch.Tensor:
        return self._dense_rows(0, self.n_rows, self.dtype)
