"""A design matrix kept as two factors, X = A R: Nystroem features without forming them.

Nystroem features are Phi = K(X, L) K_LL^{-1/2}: an (n, m) kernel block times an (m, m) projection.
Forming Phi costs n m^2 flops, more than all the Newton passes of a fit at m in the thousands;
every product a loss needs goes through the factors instead, at the cost of one (m, m) product
per call:

    X v = A (R v)        X^T r = R^T (A^T r)        X^T diag(h) X = R^T (A^T diag(h) A) R

so a pass over the rows costs what a pass over Phi costs. The factors must be well conditioned for
float32 products (X^T is then the transpose of X to float32 accuracy): ``sparkml.gpu.nystroem``'s ``rcond``
map bounds the projection's entries; K_LL^{-1/2} itself (entries up to 1e6) does not.
``weighted_moments``' second moment
(the diagonal of R^T A^T diag(w) A R) is the exception: it forms the Gram matrix, n m^2 flops;
the Newton-CG of ``sparkml.optim.newton`` does not ask for it when it preconditions with the landmarks'
spectrum.
"""

from __future__ import annotations

import copy

import torch

from .blocks import DenseBlock, _Block, transposed_product

__all__ = ["FactoredBlock"]

# ``for_products`` forms the features when the rows are at most this many per product column: forming costs what
# n / (4 columns) products pay for R, so it is paid back within 10 products (a Newton round's CG asks tens; ten-class
# one-vs-one fits of 1,257 and 3,000 rows: 35 a round)
_FORM_ROWS_PER_COLUMN = 40


class FactoredBlock(_Block):
    """X = left @ right: ``left`` a row block (n, m), ``right`` an (m, p) tensor. The row products run
    in left's dtype; the (m, p) ones in float64 (m p flops per call, and no second rounding)."""

    def __init__(self, left: _Block, right: torch.Tensor):
        right = torch.as_tensor(right)
        if right.dim() != 2 or right.shape[0] != left.n_features:
            raise ValueError(f"the right factor must be ({left.n_features}, p); got {tuple(right.shape)}")
        self.left = left
        self.right = right.to(device=left.device, dtype=left.dtype)
        self._right64 = self.right.to(torch.float64)
        self.n_rows, self.n_features = left.n_rows, int(right.shape[1])
        self._formed: DenseBlock | None = None  # ``for_products``' A R, formed once

    @property
    def computed_per_pass(self) -> bool:
        return self.left.computed_per_pass

    @property
    def storage_dtype(self) -> torch.dtype:
        return self.left.storage_dtype

    @property
    def dtype(self) -> torch.dtype:
        return self.left.dtype

    @property
    def device(self) -> torch.device:
        return self.left.device

    def to(self, device) -> FactoredBlock:
        return FactoredBlock(self.left.to(device), self.right.to(device))

    def matmul(self, v: torch.Tensor) -> torch.Tensor:
        return self.left.matmul(self._right64 @ self._vec(v, torch.float64))

    def rmatmul(self, r: torch.Tensor) -> torch.Tensor:
        """X^T r; float64 where left's is (a float32 block's chunked sums, ``sparkml.gpu.blocks``)."""
        out = self.left.rmatmul(r)
        return transposed_product(self._right64, out.to(torch.float64)).to(out.dtype)

    def margin_pass(self, v: torch.Tensor, fn) -> torch.Tensor:
        """X^T fn(X v) as R^T (A^T fn(A (R v))): the left block's own pass (a kernel block computed per pass
        computes each chunk once for both products)."""
        out = self.left.margin_pass(self._right64 @ self._vec(v, torch.float64), fn)
        return transposed_product(self._right64, out.to(torch.float64)).to(out.dtype)

    def take(self, index) -> FactoredBlock:
        """The rows ``index``, sharing this block's right factor and its float64 copy: a Newton
        round's active rows are taken once per round, and casting an (m, p) factor costs as much as
        copying thousands of rows of the block."""
        taken = copy.copy(self)
        taken.left, taken._formed = self.left.take(index), None
        taken.n_rows = taken.left.n_rows
        return taken

    def slice(self, start: int, stop: int) -> FactoredBlock:
        """The rows start..stop of the left factor (a view where it allows), sharing the right factor."""
        sliced = copy.copy(self)
        sliced.left, sliced._formed = self.left.slice(start, stop), None
        sliced.n_rows = sliced.left.n_rows
        return sliced

    def rows(self, start: int, stop: int) -> torch.Tensor:
        return self.left.rows(start, stop) @ self.right

    def weighted_gram(self, h: torch.Tensor) -> torch.Tensor:
        """R^T (A^T diag(h) A) R over the rows with h != 0, or, when they are fewer than 2m, the Gram
        matrix of their features (A_h R): n_h m p + n_h p^2 flops against n_h m^2 + 2 m^2 p, the
        two (m, m) x (m, p) products that a one-vs-rest Newton round would otherwise pay per problem
        and partition even when only a handful of rows is in a smoothed hinge's band."""
        h = self._vec(h)
        rows = torch.nonzero(h, as_tuple=True)[0]
        if len(rows) >= 2 * self.left.n_features:
            return self.right.T @ self.left.weighted_gram(h) @ self.right
        features = self.left.take(rows).to_dense() @ self.right
        return DenseBlock(features).weighted_gram(h.index_select(0, rows))

    def _moments(self, w, second):
        right = self._right64
        s1 = right.T @ self.left.column_sums(w)
        if not second:
            return s1, None
        gram = self.left.weighted_gram(self._vec(w)).to(torch.float64)  # n m^2: see the module docstring
        return s1, ((gram @ right) * right).sum(0)

    def to_dense(self) -> torch.Tensor:
        return self.left.to_dense() @ self.right

    def for_products(self, columns: int) -> _Block:
        """A dense block of the features A R when its rows are few against the products' columns, else this one.

        Every product applies R to its ``columns`` vectors (2 m p flops each, twice: R v and R^T u), whatever
        the rows; forming A R costs n m p once, what R costs n / (4 columns) products. A Newton
        round's CG asks tens of products: with many problems and few rows (a ten-class one-vs-one fit of a
        thousand rows: 90 columns a product across its class runs) R's products are most of each pass, and
        forming the rows' features pays within ten. The formed block is kept for the later passes (it holds n p
        values, about the left factor's n m). A block computed per pass keeps its budget's form."""
        if self.computed_per_pass or self.n_rows > _FORM_ROWS_PER_COLUMN * columns:
            return self
        if self._formed is None:
            self._formed = DenseBlock(self.to_dense())
        return self._formed
