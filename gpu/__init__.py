"""PyTorch math for the linear models: devices, row blocks, losses.

Plain tensors in, tensors out; nothing here imports pyspark, sparkml or jobs.
"""
from .blocks import CsrBlock, DenseBlock, make_block
from .device import resolve_device, resolve_dtype
from .losses import (
    HingeLoss,
    LinearLoss,
    LogisticLoss,
    SoftmaxLoss,
    SquaredHingeLoss,
    SquaredLoss,
)

__all__ = [
    "resolve_device",
    "resolve_dtype",
    "DenseBlock",
    "CsrBlock",
    "make_block",
    "LinearLoss",
    "LogisticLoss",
    "SoftmaxLoss",
    "SquaredLoss",
    "HingeLoss",
    "SquaredHingeLoss",
]
