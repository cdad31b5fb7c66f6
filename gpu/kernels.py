"""Kernel functions K(A, B) between blocks of rows, tiled to a memory budget, on any device.

For rows a of A (n, d) and b of B (m, d), with scikit-learn's parametrization and defaults
(``gamma=None`` means 1 / d, ``coef0=1``, ``degree=3``):

    linear:      K(a, b) = a . b
    polynomial:  K(a, b) = (gamma a . b + coef0) ** degree
    sigmoid:     K(a, b) = tanh(gamma a . b + coef0)
    rbf:         K(a, b) = exp(-gamma ||a - b||_2^2)
    laplacian:   K(a, b) = exp(-gamma ||a - b||_1)

Precision. Each tile runs in the result's dtype: float64 for float64 inputs, else float32 (the
elementwise steps, exp above all, then cost half of float64's or less). Inner products are one
matmul per tile. For rbf the squared distance is ||a - c||^2 + ||b - c||^2 - 2 (a - c).(b - c)
with c the mean of B's rows: shifting both sides leaves the distance unchanged but removes the
cancellation that a large common offset would cause; the squared norms are summed in float64 and
rounded once, so float32 inputs lose the float32 rounding of the cross term and of the sum, as
much as the float32 result's own rounding (``test_gpu_kernels.py`` bounds it against float64).
Laplacian sums |a_j - b_j| in the input dtype.

Memory. Only the returned (n, m) matrix scales with n * m: the temporaries of each tile are held
under ``budget_bytes`` (default 256 MiB) by processing A (and if needed B) in row tiles.
"""

from __future__ import annotations

import torch

__all__ = ["KERNELS", "kernel_matrix", "kernel_matmul", "kernel_diagonal"]

KERNELS = ("linear", "polynomial", "sigmoid", "rbf", "laplacian")
DEFAULT_BUDGET_BYTES = 256 * 2**20
_F64 = torch.float64
# exp(-gamma t) as exp2(-gamma log2(e) t): torch's CPU exp2 is about 2.4x faster than its exp (float32, in cache),
# and the exponentials are most of an rbf or laplacian kernel's time
_LOG2_E = 1.4426950408889634
_TILE_ELEMENTS = 1 << 20
# kernel_matmul's CPU tiles: 128k pairs (1 MiB of float64), so a tile stays in a core's L2 cache from the
# distance product through the elementwise steps to its product with C
_PRODUCT_TILE_ELEMENTS = 1 << 17


def _as_rows(x, device=None):
    x = torch.as_tensor(x)
    if device is not None:
        x = x.to(device)
    if x.dim() != 2:
        raise ValueError(f"kernel inputs must be 2-D (rows, features), got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        x = x.to(_F64)
    return x


def _check(kind, a, b, gamma, degree):
    if kind not in KERNELS:
        raise ValueError(f"kernel must be one of {', '.join(KERNELS)}; got {kind!r}")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"A has {a.shape[1]} features but B has {b.shape[1]}")
    if gamma is not None and not gamma > 0:
        raise ValueError(f"gamma must be > 0; got {gamma}")
    if kind == "polynomial" and (int(degree) != degree or degree < 1):
        raise ValueError(f"degree must be a positive integer; got {degree}")


def _pair_bytes(kind, d, itemsize):
    """Temporary bytes per (row of A, row of B) pair in one tile: the product or distance and two
    elementwise temporaries; laplacian's cdist may also hold |a - b| per pair."""
    return itemsize * 3 + (d * itemsize if kind == "laplacian" else 0)


def _squared_norms(x):
    return (x.to(_F64) ** 2).sum(1).to(x.dtype)


def _gram_tile(kind, a, b, b_sq, shift, gamma, degree, coef0, out):
    """One tile of K(a, b) in a's dtype written to ``out`` (rows, cols), each step in place there. For
    rbf, ``b`` is already shifted by ``shift`` and ``b_sq`` its squared norms."""
    if kind == "rbf":
        a_s = a - shift
        dist = torch.addmm(b_sq[None, :], a_s, b.T, alpha=-2, out=out).add_(_squared_norms(a_s)[:, None])
        return dist.clamp_(min=0).mul_(-gamma * _LOG2_E).exp2_()
    if kind == "laplacian":
        return out.copy_(torch.cdist(a, b, p=1)).mul_(-gamma * _LOG2_E).exp2_()
    dot = torch.matmul(a, b.T, out=out)
    if kind == "linear":
        return dot
    if kind == "polynomial":
        return dot.mul_(gamma).add_(coef0).pow_(int(degree))
    return dot.mul_(gamma).add_(coef0).tanh_()


def _operands(kind, A, B, gamma, degree, device):
    """(a, b, gamma) checked, in the result's dtype (float64 for float64 A, else float32), on A's device."""
    a = _as_rows(A, device)
    b = a if B is None else _as_rows(B, a.device)
    _check(kind, a, b, gamma, degree)
    gamma = 1.0 / a.shape[1] if gamma is None else float(gamma)
    out_dtype = _F64 if a.dtype == _F64 else torch.float32
    return a.to(out_dtype), b.to(out_dtype), gamma


def _tiles(kind, a, b, budget_bytes, cpu_elements):
    """(columns, rows) of a tile: the temporaries under ``budget_bytes``; on a CPU at most ``cpu_elements``
    pairs, so that the elementwise steps run in cache (large tiles were about 3x slower). On a GPU the tiles
    are as large as the budget allows, since each costs a few kernel launches (small tiles were about 7x
    slower; ``benchmarks/bench_kernel_torch.py``)."""
    m = b.shape[0]
    pair = _pair_bytes(kind, a.shape[1], a.element_size())
    col_tile = max(1, m) if m * pair <= budget_bytes else max(1, budget_bytes // pair)
    rows = budget_bytes // (col_tile * pair)
    if a.device.type == "cpu":
        rows = min(rows, cpu_elements // col_tile)
    return col_tile, max(1, rows)


def _column_tiles(kind, b, col_tile):
    """(start, B's rows from there, their squared norms, shift) per column tile; for rbf the rows are shifted
    by their mean (the module docstring's cancellation), else the norms and shift are None."""
    for j in range(0, b.shape[0], col_tile):
        bj, shift, b_sq = b[j : j + col_tile], None, None
        if kind == "rbf":
            shift = bj.to(_F64).mean(0).to(b.dtype)
            bj = bj - shift
            b_sq = _squared_norms(bj)
        yield j, bj, b_sq, shift


def kernel_matrix(kind, A, B=None, *, gamma=None, degree=3, coef0=1.0, budget_bytes=DEFAULT_BUDGET_BYTES, device=None):
    """K(A, B) as an (n, m) tensor on A's device (or ``device``); B defaults to A.

    float64 when A is float64, else float32. See the module docstring for the formulas.
    """
    a, b, gamma = _operands(kind, A, B, gamma, degree, device)
    n, m = a.shape[0], b.shape[0]
    out = torch.empty((n, m), dtype=a.dtype, device=a.device)
    if n == 0 or m == 0:
        return out
    col_tile, rows = _tiles(kind, a, b, budget_bytes, _TILE_ELEMENTS)
    for j, bj, b_sq, shift in _column_tiles(kind, b, col_tile):
        for i in range(0, n, rows):
            # a tile of whole rows of ``out`` is contiguous: computed in place, with no copy
            tile = (
                out[i : i + rows]
                if col_tile == m
                else torch.empty((min(rows, n - i), len(bj)), dtype=a.dtype, device=a.device)
            )
            tile = _gram_tile(kind, a[i : i + rows], bj, b_sq, shift, gamma, degree, coef0, tile)
            if col_tile < m:
                out[i : i + rows, j : j + col_tile] = tile
    return out


def kernel_matmul(kind, A, B, C, *, gamma=None, degree=3, coef0=1.0, budget_bytes=DEFAULT_BUDGET_BYTES, device=None):
    """K(A, B) @ C, (n, k), without holding K(A, B): each row tile of the kernel is multiplied by C and
    dropped. ``C`` (m, k) (or (m,), giving (n,)). Same formulas and precision as ``kernel_matrix``.

    This is scoring's product: the margins of a Nystroem model are K(X, L) (P theta^T). On a CPU the
    tiles are small enough to stay in cache, so the kernel is never written to memory and read back:
    about 4x faster than ``kernel_matrix(...) @ C`` at m = 1000 (``benchmarks/bench_kernel_torch.py``'s scoring line).
    """
    a, b, gamma = _operands(kind, A, B, gamma, degree, device)
    n, m = a.shape[0], b.shape[0]
    c = torch.as_tensor(C).to(device=a.device, dtype=a.dtype)
    if c.dim() not in (1, 2) or c.shape[0] != m:
        raise ValueError(f"C must have {m} rows (one per row of B); got shape {tuple(c.shape)}")
    c2 = c if c.dim() == 2 else c[:, None]
    out = torch.zeros((n, c2.shape[1]), dtype=a.dtype, device=a.device)
    col_tile, rows = _tiles(kind, a, b, budget_bytes, _PRODUCT_TILE_ELEMENTS)
    for j, bj, b_sq, shift in _column_tiles(kind, b, col_tile) if n else ():
        cj = c2[j : j + col_tile]
        buf = torch.empty((min(rows, n), len(bj)), dtype=a.dtype, device=a.device)  # reused by every row tile
        for i in range(0, n, rows):
            ai = a[i : i + rows]
            tile = _gram_tile(kind, ai, bj, b_sq, shift, gamma, degree, coef0, buf[: len(ai)])
            if col_tile == m:
                torch.matmul(tile, cj, out=out[i : i + rows])
            else:
                out[i : i + rows].addmm_(tile, cj)
    return out if c.dim() == 2 else out[:, 0]


def kernel_diagonal(kind, A, *, gamma=None, degree=3, coef0=1.0):
    """K(a_i, a_i) for every row, without the (n, n) matrix (1 for rbf and laplacian)."""
    a = _as_rows(A)
    _check(kind, a, a, gamma, degree)
    gamma = 1.0 / a.shape[1] if gamma is None else float(gamma)
    out_dtype = _F64 if a.dtype == _F64 else torch.float32
    if kind in ("rbf", "laplacian"):
        return torch.ones(a.shape[0], dtype=out_dtype, device=a.device)
    sq = (a.to(_F64) ** 2).sum(1)
    if kind == "linear":
        return sq.to(out_dtype)
    if kind == "polynomial":
        return ((gamma * sq + coef0) ** int(degree)).to(out_dtype)
    return torch.tanh(gamma * sq + coef0).to(out_dtype)
