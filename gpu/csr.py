"""CSR row blocks (``blocks``' products over sparse rows, laid out like ``scipy.sparse.csr_matrix``).

The two products every pass needs, X @ v and X^T @ r, take most of a sparse fit's time, so each
runs on a compiled sparse kernel (``benchmarks/bench_sparse.py``, ``benchmarks/bench_blocks.py``):

* CPU: scipy's CSR kernels over the block's own buffers (no copy): X @ v is a loop over rows
  (``csr_matvec``), X^T @ r a scatter over the same rows (``csc_matvec`` of the transpose).
* CUDA: cuSPARSE through ``torch.sparse_csr_tensor``. X^T @ r runs on a CSR copy of X^T, made on
  first use: cuSPARSE's transposed product over X's own CSR was 25 times slower than the plain one.

Both kernels take one dtype for the matrix and the vector, so a float32 block that computes in
float64 widens its values to float64 once, when built: converting them on every product cost more
than the product. Where a dense float32 block halves the memory, a CSR one's values are a third of
it (the column indices, int32 where they fit, are the rest).
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
import torch

from .blocks import _CHUNK_ELEMENTS, _Block, _compute_dtype

__all__ = ["CsrBlock"]

_INT32_MAX = np.iinfo(np.int32).max


class CsrBlock(_Block):
    """CSR rows, laid out like ``scipy.sparse.csr_matrix``.

    ``crow_indices`` (n+1,), ``col_indices`` (nnz,), ``values`` (nnz,) whose dtype is
    the block dtype. Indices may be int32 or int64; int32 column indices are kept as given
    (half the memory of int64). The row of each nonzero (``row_indices``) is built on first use.
    """

    def __init__(self, crow_indices, col_indices, values, shape, compute_dtype=None):
        values = torch.as_tensor(values)
        if not values.is_floating_point():
            raise ValueError(f"CsrBlock values must be floating, got {values.dtype}")
        device = values.device
        crow = torch.as_tensor(crow_indices).to(device=device, dtype=torch.int64)
        col = torch.as_tensor(col_indices).to(device=device)
        if col.dtype not in (torch.int32, torch.int64):
            col = col.to(torch.int64)
        n, d = int(shape[0]), int(shape[1])
        if crow.dim() != 1 or crow.numel() != n + 1:
            raise ValueError(f"crow_indices must have n_rows+1={n + 1} entries, got {crow.numel()}")
        if col.numel() != values.numel():
            raise ValueError("col_indices and values must have the same length")
        compute = _compute_dtype(values.dtype, compute_dtype)
        if compute is not None:
            values, compute = values.to(compute), None  # see the module docstring
        self.crow_indices, self.col_indices, self.values = crow, col, values.reshape(-1)
        self.n_rows, self.n_features = n, d
        self._compute = compute
        self._row_indices: torch.Tensor | None = None
        self._scipy: sp.csr_matrix | None = None
        self._sparse: tuple[torch.Tensor, torch.Tensor | None] | None = None

    @classmethod
    def from_scipy(cls, csr, dtype=torch.float64, device="cpu") -> CsrBlock:
        """Build from a ``scipy.sparse`` matrix (converted to CSR)."""
        csr = csr.tocsr()
        return cls(
            torch.from_numpy(np.asarray(csr.indptr, dtype=np.int64)).to(device),
            torch.from_numpy(np.asarray(csr.indices)).to(device),
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

    @property
    def row_indices(self) -> torch.Tensor:
        """The row of each nonzero, (nnz,) int64."""
        if self._row_indices is None:
            counts = self.crow_indices[1:] - self.crow_indices[:-1]
            self._row_indices = torch.repeat_interleave(
                torch.arange(self.n_rows, device=self.device), counts, output_size=self.nnz
            )
        return self._row_indices

    def to(self, device) -> CsrBlock:
        values = self.values.to(device)
        return CsrBlock(self.crow_indices.to(device), self.col_indices.to(device), values, self.shape, self._compute)

    def _csr(self) -> sp.csr_matrix:
        """The block as a scipy CSR matrix over the same buffers (CPU only)."""
        if self._scipy is None:
            indptr = self.crow_indices.numpy()
            if self.col_indices.dtype == torch.int32 and self.nnz <= _INT32_MAX:
                indptr = indptr.astype(np.int32)  # scipy wants one index dtype; n+1 entries
            indices = self.col_indices.numpy()
            if indices.dtype != indptr.dtype:
                indices = indices.astype(indptr.dtype)
            self._scipy = sp.csr_matrix((self.values.numpy(), indices, indptr), shape=self.shape, copy=False)
        return self._scipy

    def _torch_sparse(self, transposed: bool) -> torch.Tensor:
        """X (or X^T, built on first use) as a torch sparse CSR tensor over the block's values."""
        if self._sparse is None:
            small = max(self.nnz, self.n_rows, self.n_features) <= _INT32_MAX
            index = torch.int32 if small else torch.int64
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"
                x = torch.sparse_csr_tensor(
                    self.crow_indices.to(index),
                    self.col_indices.to(index),
                    self.values,
                    self.shape,
                    check_invariants=False,
                )
            self._sparse = (x, None)
        x, xt = self._sparse
        if not transposed:
            return x
        if xt is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                csc = x.to_sparse_csc()
                xt = torch.sparse_csr_tensor(
                    csc.ccol_indices(),
                    csc.row_indices(),
                    csc.values(),
                    (self.n_features, self.n_rows),
                    check_invariants=False,
                )
            self._sparse = (x, xt)
        return xt

    def _product(self, transposed: bool, v: torch.Tensor) -> torch.Tensor:
        v = self._vec(v)
        if self.device.type == "cpu":
            x = self._csr()
            return torch.from_numpy(np.asarray((x.T if transposed else x) @ v.numpy()))
        return self._torch_sparse(transposed) @ v

    def matmul(self, v: torch.Tensor) -> torch.Tensor:
        """X @ v."""
        return self._product(False, v)

    def rmatmul(self, r: torch.Tensor) -> torch.Tensor:
        """X^T @ r."""
        return self._product(True, r)

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
        if self.device.type == "cpu":
            csr = self._csr()
            s1 = torch.from_numpy(np.asarray(csr.T @ w.numpy(), dtype=np.float64))
            if not second:
                return s1, None
            squared = sp.csr_matrix((csr.data.astype(np.float64) ** 2, csr.indices, csr.indptr), shape=csr.shape)
            return s1, torch.from_numpy(np.asarray(squared.T @ w.numpy()))
        vals = self.values.to(torch.float64)
        wk = w.index_select(0, self.row_indices) * vals
        zeros = torch.zeros(self.n_features, dtype=torch.float64, device=self.device)
        s1 = zeros.clone().index_add_(0, self.col_indices, wk)
        s2 = zeros.index_add_(0, self.col_indices, wk * vals) if second else None
        return s1, s2

    def to_dense(self) -> torch.Tensor:
        return self._dense_rows(0, self.n_rows, self.dtype)
