"""``make_block``: any matrix a caller has (tensor, ndarray, scipy sparse, CSR arrays, a block) as a row block."""

from __future__ import annotations

import torch

from .blocks import DenseBlock, _Block
from .csr import CsrBlock

__all__ = ["make_block"]


def make_block(x, dtype=None, device=None):
    """Wrap ``x`` as a block: a block (moved), a 2-D tensor/ndarray (dense), a scipy
    sparse matrix, or a tuple ``(crow_indices, col_indices, values, shape)`` (CSR)."""
    if isinstance(x, _Block):
        return x.to(device) if device is not None else x
    if isinstance(x, tuple) and len(x) == 4:
        crow, col, values, shape = x
        values = torch.as_tensor(values)
        values = values.to(device=device or values.device, dtype=dtype or values.dtype)
        return CsrBlock(crow, col, values, shape)
    if hasattr(x, "tocsr") and hasattr(x, "nnz"):
        return CsrBlock.from_scipy(x, dtype or torch.float64, device or "cpu")
    t = torch.as_tensor(x)
    return DenseBlock(t.to(device=device or t.device, dtype=dtype or t.dtype))
