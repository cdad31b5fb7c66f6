"""Row blocks of a design matrix X (n rows, d features), dense or CSR.

Both classes expose the same products, which is all the losses need:

* ``matmul(v)``        X @ v          v: (d,) -> (n,)   or (d, K) -> (n, K)
* ``rmatmul(r)``       X^T @ r        r: (n,) -> (d,)   or (n, K) -> (d, K)
* ``weighted_gram(h)`` X^T diag(h) X  h: (n,) -> (d, d)
* ``column_sums(h)``   X^T h          h: (n,) -> (d,)   float64
* ``weighted_moments(w)`` (sum_i w_i x_i, sum_i w_i x_i^2), both (d,) float64
* ``rows(start, stop)`` rows [start, stop) as a dense (stop - start, d) tensor
* ``take(index)``      the rows ``index`` as a new block of the same kind (a copy)
* ``margin_pass(v, fn)`` X^T fn(X v) where fn maps the products of a run of rows to a vector
  of the same shape: a loss-and-gradient pass (fn: margins -> weighted dl/dm)

``matmul``/``rmatmul``/``weighted_gram`` run in the block's ``dtype`` (arguments are
cast to it); ``column_sums``/``weighted_moments`` accumulate in float64 because they
feed feature means and standard deviations.

A block may store its values in float32 and compute in float64 (``compute_dtype=torch.float64``):
``dtype`` is then float64 and every product is exact float64 arithmetic on the stored values
(float32 numbers are exact in float64), half the memory of a float64 block. Dense products
upcast 1024 rows at a time into a reused buffer that stays in cache; on one CPU core the
conversion is the larger cost (``benchmarks/bench_blocks.py``). ``margin_pass`` converts each
run of rows once for both of its products, so a whole logistic loss-and-gradient pass costs little
more than the float64 one.
``CsrBlock`` (``gpu/csr.py``) uses only gathers and ``index_add_`` (no torch.sparse), so it runs on any device.
"""

from __future__ import annotations

from typing import cast

import torch

__all__ = ["DenseBlock"]

# Elements per temporary dense chunk (float64 moments / CSR Gram): bounds extra memory.
_CHUNK_ELEMENTS = 1 << 22


class _Block:
    n_rows: int
    n_features: int
    _compute: torch.dtype | None = None  # float64 over float32 storage, else None (compute in the storage dtype)

    @property
    def storage_dtype(self) -> torch.dtype:
        raise NotImplementedError

    @property
    def computed_per_pass(self) -> bool:
        """Whether the products compute the block's values from something smaller (``kernel_block.KernelBlock``):
        copying rows out (``take``) then costs little next to a product, whatever their share."""
        return False

    @property
    def device(self) -> torch.device:
        """The device the block's tensors live on."""
        raise NotImplementedError

    def to(self, device) -> _Block:
        """The same rows on ``device``."""
        raise NotImplementedError

    def matmul(self, v: torch.Tensor) -> torch.Tensor:
        """X @ v."""
        raise NotImplementedError

    def rmatmul(self, r: torch.Tensor) -> torch.Tensor:
        """X^T @ r."""
        raise NotImplementedError

    def weighted_gram(self, h: torch.Tensor) -> torch.Tensor:
        """X^T diag(h) X, (d, d), in the block dtype."""
        raise NotImplementedError

    def rows(self, start: int, stop: int) -> torch.Tensor:
        """Rows [start, stop) as a dense (stop - start, d) tensor in the block dtype."""
        raise NotImplementedError

    def take(self, index) -> _Block:
        """The rows ``index`` as a new block of the same kind (a copy)."""
        raise NotImplementedError

    def slice(self, start: int, stop: int) -> _Block:
        """The rows start..stop as a block over the same storage where the kind allows (a view), else a copy."""
        return self.take(torch.arange(start, stop, device=self.device))

    def to_dense(self) -> torch.Tensor:
        """All rows as a dense (n, d) tensor in the block dtype."""
        raise NotImplementedError

    def for_products(self, columns: int) -> _Block:
        """The block that many products of ``columns`` vectors each (a Newton round's CG iterations over several
        problems) read fastest: this one, unless its kind pays per product for what forming it once would save
        (``factored.FactoredBlock``)."""
        return self

    def _moments(self, w, second: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(sum_i w_i x_i, sum_i w_i x_i**2 when ``second`` else None), float64."""
        raise NotImplementedError

    @property
    def dtype(self) -> torch.dtype:
        """The dtype products are computed and returned in."""
        return self._compute or self.storage_dtype

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n_rows, self.n_features)

    def column_sums(self, h: torch.Tensor) -> torch.Tensor:
        """X^T h accumulated in float64, shape (d,)."""
        return self._moments(h, second=False)[0]

    def weighted_moments(self, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(sum_i w_i x_i, sum_i w_i x_i**2), each (d,) float64."""
        return cast("tuple[torch.Tensor, torch.Tensor]", self._moments(w, second=True))  # second: both sums

    def margin_pass(self, v: torch.Tensor, fn) -> torch.Tensor:
        """X^T r with r = fn(start, stop, X[start:stop] @ v) over runs of rows covering X in order.

        ``fn`` gets the products of rows [start, stop) in ``dtype`` and returns r for those rows,
        same shape; it may keep its own running sums (a loss). Blocks that compute in their
        storage dtype make one run of all rows; a float32 block computing in float64 reads each
        run of rows once for both products, instead of converting every row twice.
        """
        return self.rmatmul(fn(0, self.n_rows, self.matmul(v)))

    def _vec(self, t: torch.Tensor, dtype=None) -> torch.Tensor:
        return torch.as_tensor(t).to(device=self.device, dtype=dtype or self.dtype)

    def _index(self, index) -> torch.Tensor:
        return torch.as_tensor(index).to(device=self.device, dtype=torch.int64).reshape(-1)


_SUM_CHUNK_ROWS = 1024
# float64 values per upcast chunk on a GPU (a 256 MiB buffer): few enough chunks that launches don't count
_GPU_CHUNK_ELEMENTS = 1 << 25
_PASS_CHUNK_ROWS = 4096
_WIDE_FEATURES = 512  # columns from which X^T r sums a loop of 4096-row chunks
_WIDE_SUM_ROWS = 4096


def transposed_product(x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """X^T r for a 2-D X and r of shape (n,) or (n, k), computed as (r^T X)^T when r has columns.

    The same numbers either way; but torch's CPU GEMM with a transposed left operand and a few
    right-hand columns runs 10x to 20x slower than the untransposed product (a (4000, 4000) float32
    X with k = 2: 56 ms against 5.6 ms on 2 cores), which made every one-vs-rest product of a
    multi-class KernelSVC pay it. A vector r is a GEMV, fast both ways."""
    if r.dim() < 2:
        return x.T @ r
    return (r.T @ x).T


def columns_product(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """X v for a 2-D X and v of shape (d,) or (d, k), computed as (v^T X^T)^T when v has columns.

    The same numbers either way; torch's CPU GEMM of a (4096, 100) float64 X by a few columns runs up to 3x
    slower than the product with the operands swapped (k = 4: 0.46 ms against 0.15 ms on one core; k = 12:
    0.31 against 0.27), which the passes of several problems at once (``problems.GridProblems``) pay on every
    chunk. The result is a transposed view."""
    if v.dim() < 2:
        return x @ v
    return (v.T @ x.T).T


def _compute_dtype(storage: torch.dtype, compute) -> torch.dtype | None:
    """None when products run in the storage dtype; float64 for a float32 block computed in float64."""
    if compute is None or compute == storage:
        return None
    if storage == torch.float32 and compute == torch.float64:
        return compute
    raise ValueError(f"a {storage} block cannot compute in {compute}: only float32 storage computes in float64")


def _chunked_rmatmul(x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """X^T r as float64 sums of float32 partial products over chunks of rows.

    One float32 GEMV over 500k rows loses about 1e-5 relative accuracy to accumulation, which
    puts a floor under the gradient norm well above MLlib's stopping rule; summing per-chunk
    partials in float64 brings that to ~4e-7 (1024-row chunks) or ~1e-6 (4096).

    Narrow blocks: one batch of row-vector products r_c^T X_c over 1024-row chunks (X read row by
    row, as stored), about the cost of the plain GEMV (the column-wise X_c^T r_c batch costs twice
    that). Wide blocks (a kernel block K(X, L) of thousands of columns) make that batch slow: there
    a loop of r_c^T X_c over 4096-row chunks costs the plain GEMV's time.
    """
    n, d = x.shape
    r2 = r.reshape(n, -1)
    k = r2.shape[1]
    if d >= _WIDE_FEATURES:
        out = torch.zeros((k, d), dtype=torch.float64, device=x.device)
        for i in range(0, n, _WIDE_SUM_ROWS):
            out += (r2[i : i + _WIDE_SUM_ROWS].T @ x[i : i + _WIDE_SUM_ROWS]).to(torch.float64)
        return out.T.reshape((d,) + tuple(r.shape[1:]))
    m = n - n % _SUM_CHUNK_ROWS
    rc = r2[:m].view(-1, _SUM_CHUNK_ROWS, k).transpose(1, 2)  # (chunks, k, rows)
    out = torch.bmm(rc, x[:m].view(-1, _SUM_CHUNK_ROWS, d)).to(torch.float64).sum(0).T  # (d, k)
    if m < n:
        out = out + transposed_product(x[m:], r2[m:]).to(torch.float64)
    return out.reshape((d,) + tuple(r.shape[1:]))


class DenseBlock(_Block):
    """Dense rows: ``x`` is a floating (n, d) tensor."""

    def __init__(self, x: torch.Tensor, compute_dtype: torch.dtype | None = None):
        x = torch.as_tensor(x)
        if x.dim() != 2:
            raise ValueError(f"DenseBlock needs a 2-D tensor, got shape {tuple(x.shape)}")
        if not x.is_floating_point():
            raise ValueError(f"DenseBlock needs a floating tensor, got {x.dtype}")
        self.x = x
        self.n_rows, self.n_features = int(x.shape[0]), int(x.shape[1])
        self._compute = _compute_dtype(x.dtype, compute_dtype)

    @property
    def storage_dtype(self) -> torch.dtype:
        return self.x.dtype

    @property
    def device(self) -> torch.device:
        return self.x.device

    def to(self, device) -> DenseBlock:
        return DenseBlock(self.x.to(device), self._compute)

    def _upcast_chunks(self, rows=_SUM_CHUNK_ROWS):
        """(start, rows start..start+rows in the compute dtype), through one reused buffer. On a GPU
        the chunks hold up to _GPU_CHUNK_ELEMENTS values: each chunk costs kernel launches (the
        products, and a pass's pointwise loss), which small chunks made the larger cost of a float64
        pass over float32 rows (``benchmarks/bench_blocks.py --device cuda``)."""
        if self.device.type != "cpu":
            rows = max(rows, _GPU_CHUNK_ELEMENTS // max(1, self.n_features))
        buf = torch.empty((min(rows, self.n_rows), self.n_features), dtype=self.dtype, device=self.device)
        for i in range(0, self.n_rows, rows):
            chunk = buf[: min(rows, self.n_rows - i)]
            yield i, chunk.copy_(self.x[i : i + rows])

    def margin_pass(self, v: torch.Tensor, fn) -> torch.Tensor:
        if self._compute is None:
            return super().margin_pass(v, fn)
        v = self._vec(v)
        out = torch.zeros((self.n_features,) + tuple(v.shape[1:]), dtype=self.dtype, device=self.device)
        # runs of 4096 rows: fn's per-run overhead stays small next to the products
        for i, xc in self._upcast_chunks(_PASS_CHUNK_ROWS):
            out += transposed_product(xc, self._vec(fn(i, i + len(xc), columns_product(xc, v))))
        return out

    def matmul(self, v: torch.Tensor) -> torch.Tensor:
        """X @ v."""
        v = self._vec(v)
        if self._compute is None:
            return self.x @ v
        out = torch.empty((self.n_rows,) + tuple(v.shape[1:]), dtype=self.dtype, device=self.device)
        for i, xc in self._upcast_chunks():
            torch.matmul(xc, v, out=out[i : i + len(xc)])
        return out

    def rows(self, start: int, stop: int) -> torch.Tensor:
        return self.x[start:stop].to(self.dtype)

    def take(self, index: torch.Tensor) -> DenseBlock:
        return DenseBlock(self.x.index_select(0, self._index(index)), self._compute)

    def slice(self, start: int, stop: int) -> DenseBlock:
        return DenseBlock(self.x[start:stop], self._compute)

    def rmatmul(self, r: torch.Tensor) -> torch.Tensor:
        """X^T @ r, in float64 when the block is float32 (see ``_chunked_rmatmul``)."""
        r = self._vec(r)
        if self._compute is not None:
            out = torch.zeros((self.n_features,) + tuple(r.shape[1:]), dtype=self.dtype, device=self.device)
            for i, xc in self._upcast_chunks():
                out += transposed_product(xc, r[i : i + len(xc)])
            return out
        if self.dtype == torch.float64 or self.n_rows < 2 * _SUM_CHUNK_ROWS:
            return transposed_product(self.x, r)
        return _chunked_rmatmul(self.x, r)

    def weighted_gram(self, h: torch.Tensor) -> torch.Tensor:
        """X^T diag(h) X, (d, d), in the block dtype, over the rows with h != 0 only (a squared
        hinge's active set), in row chunks: temporaries stay bounded and the chunks' partial
        products are added in float64."""
        h = self._vec(h)
        rows = torch.nonzero(h, as_tuple=True)[0]
        gram = torch.zeros((self.n_features, self.n_features), dtype=torch.float64, device=self.device)
        step = max(1, _CHUNK_ELEMENTS // max(1, self.n_features))
        for i in range(0, len(rows), step):
            idx = rows[i : i + step]
            xc = self.x[idx].to(self.dtype)
            gram += (xc.T @ (xc * h[idx, None])).to(torch.float64)
        return gram.to(self.dtype)

    def _moments(self, w, second):
        w = self._vec(w, torch.float64)
        s1 = torch.zeros(self.n_features, dtype=torch.float64, device=self.device)
        s2 = torch.zeros_like(s1) if second else None
        step = max(1, _CHUNK_ELEMENTS // max(1, self.n_features))
        for i in range(0, self.n_rows, step):
            xc = self.x[i : i + step].to(torch.float64)
            wc = w[i : i + step]
            s1 += wc @ xc
            if second:
                s2 += wc @ (xc * xc)
        return s1, s2

    def to_dense(self) -> torch.Tensor:
        return self.x.to(self.dtype)
