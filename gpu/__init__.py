"""PyTorch math for the linear and kernel models: devices, row blocks, losses, kernels.

Plain tensors in, tensors out; nothing here imports pyspark, sparkml or jobs.
"""

from .blocks import DenseBlock
from .csr import CsrBlock
from .device import DeviceChoice, check_distinct_devices, choose_device, resolve_device, resolve_dtype
from .huber import HuberLoss
from .kernels import KERNELS, kernel_diagonal, kernel_matrix
from .loss_protocol import BlockLoss, Loss, NewtonCGProblems
from .losses import (
    HingeLoss,
    LinearLoss,
    LogisticLoss,
    SmoothedHingeLoss,
    SoftmaxLoss,
    SquaredHingeLoss,
    SquaredLoss,
)
from .make import make_block
from .platt_problems import PlattProblems
from .problems import GridProblems, OneVsOneProblems, OneVsRestProblems

__all__ = [
    "KERNELS",
    "kernel_matrix",
    "kernel_diagonal",
    "resolve_device",
    "resolve_dtype",
    "DeviceChoice",
    "choose_device",
    "check_distinct_devices",
    "DenseBlock",
    "CsrBlock",
    "make_block",
    "Loss",
    "BlockLoss",
    "NewtonCGProblems",
    "LinearLoss",
    "GridProblems",
    "LogisticLoss",
    "SoftmaxLoss",
    "OneVsOneProblems",
    "OneVsRestProblems",
    "PlattProblems",
    "SquaredLoss",
    "HingeLoss",
    "SquaredHingeLoss",
    "SmoothedHingeLoss",
    "HuberLoss",
]
