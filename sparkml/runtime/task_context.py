"""The Spark task that executor code runs in: its partition, its cores, its barrier stage.

Task-side code (the conversion, the partition sums, the barrier tasks) asks here instead of importing pyspark,
so the same code runs where there is no Spark: a harness installs a stand-in with ``use`` (for instance a test
of the executor path on a GPU machine without Spark). This module is the only door from that code to pyspark,
which it imports inside a running task only.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_stand_in: Any = None
_frozen_at = 0  # how many modules this process had imported when freeze_imports last froze its objects
logger = logging.getLogger("sparkml")


def current() -> Any:
    """The running task's context (pyspark's ``TaskContext``; None outside a task), or the stand-in."""
    if _stand_in is not None:
        return _stand_in
    from pyspark import TaskContext

    return TaskContext.get()


def barrier() -> Any:
    """The running barrier task's context (pyspark's ``BarrierTaskContext``), or the stand-in."""
    if _stand_in is not None:
        return _stand_in
    from pyspark import BarrierTaskContext

    return BarrierTaskContext.get()


@contextmanager
def use(stand_in: Any) -> Iterator[Any]:
    """Run task code with ``stand_in`` as its context: an object with ``partitionId()``, ``cpus()`` and, for
    barrier tasks, ``getTaskInfos()`` (items with an ``address``) and ``allGather(message)``."""
    global _stand_in
    previous, _stand_in = _stand_in, stand_in
    try:
        yield stand_in
    finally:
        _stand_in = previous


def gpu_addresses(ctx: Any = None) -> list[str]:
    """The GPU addresses Spark assigned to the running task (``spark.task.resource.gpu.amount``); empty
    outside a task, without GPU scheduling, or under a stand-in without ``resources()``."""
    if ctx is None:
        try:
            ctx = current()
        except ImportError:  # no pyspark: a harness without Spark and without a stand-in
            return []
    resources = getattr(ctx, "resources", None)
    if resources is None:
        return []
    gpu = resources().get("gpu")
    return [str(a) for a in gpu.addresses] if gpu is not None else []


def device(setting: str, local_rank: int | None = None) -> Any:
    """The task's ``sparkml.gpu.DeviceChoice`` for the ``device`` Param's ``setting``: the GPU Spark assigned to
    the task, else (``local_rank``: a barrier task's rank among its executor's) one per local rank, as
    ``sparkml.gpu.choose_device`` decides from what this process sees (``CUDA_VISIBLE_DEVICES`` included).
    Every kind of task (conversion, partition sums, barrier stages, KernelSVC, scoring) asks here."""
    import torch

    from sparkml.gpu import choose_device

    freeze_imports()
    visible = _visible_devices()
    choice = choose_device(
        setting,
        gpu_addresses=gpu_addresses(),
        local_rank=local_rank,
        cuda_count=torch.cuda.device_count() if torch.cuda.is_available() else 0,
        visible=visible or None,
    )
    logger.debug("task device %s (%s)", choice.device, choice.why)
    return choice


def physical_gpu(device: str) -> str:
    """Which GPU of the host ``device`` (``cuda:N``) is, across processes: CUDA_VISIBLE_DEVICES' N-th entry
    when set (two executors' ``cuda:0`` may be different GPUs), else N; ``device`` itself for the CPU."""
    if not device.startswith("cuda"):
        return device
    index = int(device.partition(":")[2] or 0)
    visible = _visible_devices()
    return f"cuda:{visible[index]}" if index < len(visible) else device


def _visible_devices() -> list[str]:
    """The entries of ``CUDA_VISIBLE_DEVICES`` (empty when unset)."""
    return [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]


def freeze_imports() -> None:
    """Put the objects this worker's imports created beyond the cyclic garbage collector's reach (``gc.freeze``),
    again whenever modules were imported since; only inside a task (or under a stand-in), never on the driver.

    Why: pyspark's worker daemon runs a full collection (``gc.collect()``) after every task of a reused worker, and
    a worker that has imported torch and this library tracks about 235,000 objects: 170 ms of CPU per task on a
    2-core machine, more than a small task's own work, paid by every partition of every Spark job of a fit (each
    pass of ``strategy="sync"``, each conversion and scoring task). Frozen objects are still freed by reference
    counting; only reference cycles among the objects alive at the freeze are never collected, and modules' objects
    live as long as the worker does."""
    global _frozen_at
    imported = len(sys.modules)
    if imported == _frozen_at:
        return
    try:
        in_task = current() is not None
    except ImportError:  # no pyspark and no stand-in: not a task
        in_task = False
    if in_task:
        gc.freeze()
        _frozen_at = imported
