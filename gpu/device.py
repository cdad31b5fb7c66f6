"""Device and dtype resolution for the PyTorch kernels.

Everything here imports and runs on a machine without a GPU; asking for CUDA
where torch sees none is a clear ``RuntimeError``, not a crash deep in a kernel.
"""

from __future__ import annotations

import torch

__all__ = ["resolve_device", "resolve_dtype", "ALLOWED_DEVICES", "ALLOWED_DTYPES"]

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
    if isinstance(name, torch.device):
        name = str(name)
    if not isinstance(name, str):
        raise ValueError(f"device must be a string, one of {', '.join(ALLOWED_DEVICES)}; got {name!r}")
    key = name.strip().lower()
    if key == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if key == "cpu":
        return torch.device("cpu")
    if key == "cuda" or key.startswith("cuda:"):
        index = None
        if key != "cuda":
            suffix = key[len("cuda:") :]
            if not suffix.isdigit():
                raise ValueError(
                    f"device={name!r} is not valid; allowed values are "
                    f"{', '.join(ALLOWED_DEVICES)} (N a non-negative integer)"
                )
            index = int(suffix)
        if not torch.cuda.is_available():
            raise RuntimeError(
                f"device={name!r} was requested but torch sees no CUDA device; use device='auto' or 'cpu'"
            )
        if index is not None and index >= torch.cuda.device_count():
            raise RuntimeError(
                f"device={name!r} was requested but torch sees only "
                f"{torch.cuda.device_count()} CUDA device(s); use device='cuda' or 'auto'"
            )
        return torch.device("cuda", index) if index is not None else torch.device("cuda")
    raise ValueError(f"device={name!r} is not valid; allowed values are {', '.join(ALLOWED_DEVICES)}")


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
