"""How the data term of a fit is distributed.

* ``sync``: one Spark job per evaluation, the optimizer on the driver.
* ``allreduce``: one barrier stage for the whole fit, the optimizer on every task.
* ``averaging``: model averaging, one Spark job per round of local solves.
* ``allreduce-averaging``: the same rounds inside one barrier stage.
"""
from sparkml.base.params import STRATEGIES
from sparkml.base.session_kind import task_slots
from sparkml.strategies.allreduce import AllReduceAveragingStrategy, AllReduceStrategy
from sparkml.strategies.averaging import AveragingStrategy
from sparkml.strategies.sync import SyncStrategy

__all__ = ["AllReduceAveragingStrategy", "AllReduceStrategy", "AveragingStrategy", "SyncStrategy", "block_partitions",
           "make_strategy"]


def block_partitions(name, spark, num_workers=0):
    """At most how many blocks a fit with strategy ``name`` converts its input into, or None (as many
    as the input has partitions).

    ``sync`` and ``allreduce`` sum exact passes, whatever the partitioning: one block per task slot
    (``allreduce``: per ``numWorkers`` when set), so the conversion runs in one wave and each
    barrier task reads one block. Model averaging keeps the input's partitions: they are its local
    problems.
    """
    if name == "allreduce" and num_workers > 0:
        return num_workers
    return task_slots(spark) if name in ("sync", "allreduce") else None


def make_strategy(name, data, loss, device, aggregation_depth=2, num_workers=0, local_iter=10):
    if name == "sync":
        return SyncStrategy(data, loss, device, aggregation_depth)
    if name == "allreduce":
        return AllReduceStrategy(data, loss, device, aggregation_depth, num_workers)
    if name == "averaging":
        return AveragingStrategy(data, loss, device, aggregation_depth, local_iter)
    if name == "allreduce-averaging":
        return AllReduceAveragingStrategy(data, loss, device, aggregation_depth, num_workers, local_iter)
    raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}; got {name!r}")
