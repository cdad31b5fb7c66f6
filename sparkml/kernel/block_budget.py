"""How much of each executor KernelSVC's kernel blocks K(X, L) may hold (``kernelBlocks``, ``kernelBlockMemory``).

A stored Nystroem block costs m values a row (rows x m x the dtype's bytes: 16 GB for 1M rows and 4000
landmarks in float32), so what the cluster can hold, not the number of landmarks, is bounded: each executor keeps
the kernel blocks of its partitions up to its budget, and the rows beyond it keep only themselves, their kernel
computed by every pass (``sparkml.data.derive``, ``sparkml.gpu.kernel_block``).

The budget per executor, ``kernelBlockMemory="auto"``: on a CPU ``CPU_SHARE`` of the memory Spark gives the
executor's Python workers, ``spark.executor.pyspark.memory`` when it is set, else of the executor's
``spark.executor.memory`` (``spark.driver.memory`` under a ``local`` master, whose one executor is the driver);
on a GPU ``derive.GPU_SHARE`` of the device's memory. A size (Spark's memory strings: ``"512m"``, ``"8g"``)
sets it for either.
"""

from __future__ import annotations

import re

from sparkml.data.derive import KernelPlan
from sparkml.params.converters import memory_bytes

CPU_SHARE = 0.5  # of the executor's memory setting: the rest for the JVM, the raw rows and the passes' temporaries
_LOCAL = re.compile(r"local(\[.*\])?")


def executor_memory(get) -> int:
    """The bytes Spark gives an executor's Python side: ``spark.executor.pyspark.memory`` when set, else the
    executor's memory (the driver's under a ``local`` master). ``get``: conf key -> value or None."""
    pyspark = get("spark.executor.pyspark.memory")
    if pyspark:
        return memory_bytes(pyspark)
    local = _LOCAL.fullmatch(get("spark.master") or "")
    return memory_bytes(get("spark.driver.memory" if local else "spark.executor.memory") or "1g")


def cpu_budget(get, setting="auto") -> int:
    """The kernel-block bytes per CPU executor: ``setting`` ("auto" or a memory size)."""
    if setting != "auto":
        return memory_bytes(setting)
    return int(CPU_SHARE * executor_memory(get))


def kernel_plan(spec, mode, setting, get) -> KernelPlan:
    """The ``KernelPlan`` of a Nystroem ``spec`` (``sparkml.gpu.feature_maps.NystroemSpec``) for the Params
    ``kernelBlocks`` (``mode``) and ``kernelBlockMemory`` (``setting``), the cluster's settings read by ``get``."""
    explicit = None if setting == "auto" else memory_bytes(setting)
    return KernelPlan(
        spec.kernel,
        spec.landmarks,
        spec.gamma,
        spec.degree,
        spec.coef0,
        mode=mode,
        budget_bytes=explicit,
        cpu_budget_bytes=cpu_budget(get, setting),
    )
