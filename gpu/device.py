"""Device and dtype resolution for the PyTorch kernels.

Everything here imports and runs on a machine without a GPU; asking for CUDA
where torch sees none is a clear ``RuntimeError``, not a crash deep in a kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

__all__ = [
    "ALLOWED_DEVICES",
    "ALLOWED_DTYPES",
    "DeviceChoice",
    "check_distinct_devices",
    "choose_device",
    "resolve_device",
    "resolve_dtype",
]

ALLOWED_DEVICES = ("auto", "cpu", "cuda", "cuda:N")
ALLOWED_DTYPES = ("float32", "float64")

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def resolve_device(name: str = "auto") -> torch.device:
    """Map a user setting to a ``torch.device``.

    ``"auto"`` -> ``cuda`` when ``torch.cuda.is_available()`` else ``cpu``;
    ``"cpu"``; ``"cuda"`` or ``"cuda:N"`` (only where torch sees that CUDA device).
    A ``torch.device`` is accepted too.

    Raises:
        RuntimeError: CUDA was requested but is not available (or N is out of range).
        ValueError: ``name`` is none of the allowed values.
    """
    key = _setting(name)
    if key == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if key == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError(f"device={name!r} was requested but torch sees no CUDA device; use device='auto' or 'cpu'")
    if key == "cuda":
        return torch.device("cuda")
    index = int(key[len("cuda:") :])
    if index >= torch.cuda.device_count():
        raise RuntimeError(
            f"device={name!r} was requested but torch sees only "
            f"{torch.cuda.device_count()} CUDA device(s); use device='cuda' or 'auto'"
        )
    return torch.device("cuda", index)


def resolve_dtype(name) -> torch.dtype:
    """Map ``"float32"`` / ``"float64"`` (or the torch dtypes themselves) to a torch dtype.

    Raises:
        ValueError: anything else.
    """
    if isinstance(name, torch.dtype):
        if name in (torch.float32, torch.float64):
            return name
        raise ValueError(f"dtype={name} is not supported; allowed values are float32, float64")
    if isinstance(name, str) and name.strip().lower() in _DTYPES:
        return _DTYPES[name.strip().lower()]
    raise ValueError(f"dtype={name!r} is not supported; allowed values are float32, float64")


@dataclass(frozen=True)
class DeviceChoice:
    """The device a Spark task computes on, and why.

    Attributes:
        device: ``"cpu"`` or ``"cuda:N"``, N a torch ordinal (counted over the devices torch sees).
        gpu: the CUDA device Spark's scheduling points at (``"cuda:N"``), also where torch sees no CUDA device
            (then ``device`` is ``"cpu"``); None when nothing points at one.
        address: the GPU address Spark assigned to the task (``TaskContext.resources()["gpu"]``), or None.
        why: the rule that decided, as the logs say it.
    """

    device: str
    gpu: str | None
    address: str | None
    why: str


def _setting(name) -> str:
    """The device setting, checked (``ALLOWED_DEVICES``) and normalized: auto, cpu, cuda or cuda:N."""
    if isinstance(name, torch.device):
        name = str(name)
    if not isinstance(name, str):
        raise ValueError(f"device must be a string, one of {', '.join(ALLOWED_DEVICES)}; got {name!r}")
    key = name.strip().lower()
    if key in ("auto", "cpu", "cuda") or (key.startswith("cuda:") and key[len("cuda:") :].isdigit()):
        return key
    raise ValueError(
        f"device={name!r} is not valid; allowed values are {', '.join(ALLOWED_DEVICES)} (N a non-negative integer)"
    )


def _ordinal(address: str, visible: Sequence[str] | None, cuda_count: int) -> int:
    """The torch ordinal of the GPU Spark calls ``address``: its position in ``CUDA_VISIBLE_DEVICES`` when that
    is set (torch counts the visible devices only), the only visible device when the container sees one
    (the cluster manager isolated the task's GPU and renumbered it), else the address itself (Spark's
    discovery script reports ``nvidia-smi``'s indices)."""
    if visible:
        if address in visible:
            return list(visible).index(address)
        if len(visible) == 1:
            return 0
        raise ValueError(
            f"Spark assigned GPU {address!r} to this task but CUDA_VISIBLE_DEVICES={','.join(visible)} does not "
            f"list it: make the GPU discovery script report the addresses CUDA_VISIBLE_DEVICES uses"
        )
    if not address.isdigit():
        raise ValueError(
            f"Spark assigned GPU {address!r} to this task, which is no device index; make the GPU discovery script "
            f"report indices (nvidia-smi --query-gpu=index), or set CUDA_VISIBLE_DEVICES to the addresses"
        )
    index = int(address)
    if cuda_count and index >= cuda_count:
        raise ValueError(
            f"Spark assigned GPU {address} to this task but torch sees {cuda_count} CUDA device(s) (0 to "
            f"{cuda_count - 1}): the discovery script and the devices this process sees disagree"
        )
    return index


def choose_device(
    setting="auto",
    *,
    gpu_addresses: Sequence[str] = (),
    local_rank: int | None = None,
    cuda_count: int = 0,
    visible: Sequence[str] | None = None,
) -> DeviceChoice:
    """The device of one Spark task: a pure function of the ``device`` Param's ``setting``, the GPU addresses
    Spark assigned the task (``spark.task.resource.gpu.amount``), its local rank among the barrier tasks of
    its executor (None outside a barrier stage), the CUDA devices torch sees and ``CUDA_VISIBLE_DEVICES``
    (``visible``, as a list; None when unset).

    * ``cpu``: the CPU. ``cuda:N``: that device, as set.
    * ``auto`` and ``cuda``: the GPU Spark assigned to the task; without one, in a barrier stage, the local
      rank modulo the visible devices (each task of an executor on its own device while there are enough);
      otherwise the first visible device. ``auto`` computes on the CPU where torch sees no CUDA device (the
      choice is still made and reported, as ``gpu``); ``cuda`` then fails.

    Raises:
        ValueError: an invalid setting, or a GPU address that maps to no device this process sees.
        RuntimeError: CUDA asked for (``cuda``, ``cuda:N``) where torch sees none, or N out of range.
    """
    key = _setting(setting)
    address = str(gpu_addresses[0]) if gpu_addresses else None
    if key == "cpu":
        return DeviceChoice("cpu", None, address, "device='cpu'")
    if key.startswith("cuda:"):
        index = int(key[len("cuda:") :])
        if index >= cuda_count:
            raise RuntimeError(
                f"device={key!r} was requested but torch sees {cuda_count} CUDA device(s); use device='auto'"
            )
        return DeviceChoice(key, key, address, f"device={key!r} as set")
    if address is not None:
        gpu, why = f"cuda:{_ordinal(address, visible, cuda_count)}", f"Spark assigned GPU {address}"
    elif local_rank is not None and cuda_count:
        gpu = f"cuda:{local_rank % cuda_count}"
        why = f"barrier task {local_rank} of its executor, {cuda_count} visible device(s), no GPU assigned by Spark"
    elif cuda_count:
        gpu, why = "cuda:0", "no GPU assigned by Spark: the first visible device"
    else:
        gpu, why = None, "no GPU assigned by Spark"
    if cuda_count:
        return DeviceChoice(gpu or "cuda:0", gpu, address, why)
    if key == "cuda":
        raise RuntimeError("device='cuda' was requested but torch sees no CUDA device; use device='auto' or 'cpu'")
    return DeviceChoice("cpu", gpu, address, f"{why}; torch sees no CUDA device: the CPU")


def check_distinct_devices(placements: Sequence[tuple[str, str]]) -> None:
    """RuntimeError when two ranks of one barrier stage would compute on the same CUDA device of one host
    (``placements[rank] = (host, device)``): NCCL refuses a process group with two ranks on one device, and
    would hang or fail inside the first collective instead of saying so."""
    seen: dict[tuple[str, str], int] = {}
    for rank, (host, device) in enumerate(placements):
        if not device.startswith("cuda"):
            continue
        other = seen.setdefault((host, device), rank)
        if other != rank:
            raise RuntimeError(
                f"barrier tasks {other} and {rank} would both compute on {device} of {host}: NCCL needs one device "
                f"per task. Give every task a GPU of its own (spark.task.resource.gpu.amount=1 with "
                f"spark.executor.resource.gpu.amount equal to the executor's task slots), or set device='cpu'"
            )
