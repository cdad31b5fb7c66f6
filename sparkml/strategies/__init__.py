"""How the data term of a fit is distributed.

* ``auto`` (the default): ``allreduce`` where Spark can run it, else ``sync`` (``auto_strategy``).
* ``sync``: one Spark job per evaluation, the optimizer on the driver.
* ``allreduce``: one barrier stage for the whole fit, the optimizer on every task.
* ``averaging``: model averaging, one Spark job per round of local solves.
* ``allreduce-averaging``: the same rounds inside one barrier stage.
* ``ssp``: a parameter server with bounded staleness inside one barrier stage (``strategies.ssp``).
* ``gossip``: decentralized gradient tracking between neighbours inside one barrier stage (``strategies.gossip``).
"""
from sparkml.base.params import STRATEGIES
from sparkml.base.session_kind import conf_value, is_connect, task_slots
from sparkml.strategies.allreduce import AllReduceAveragingStrategy, AllReduceStrategy
from sparkml.strategies.averaging import AveragingStrategy
from sparkml.strategies.gossip import GossipStrategy
from sparkml.strategies.ssp import SSPStrategy
from sparkml.strategies.sync import SyncStrategy

__all__ = ["AllReduceAveragingStrategy", "AllReduceStrategy", "AveragingStrategy", "BARRIER_STRATEGIES",
           "FIRST_ORDER_STRATEGIES", "GossipStrategy", "SSPStrategy", "SyncStrategy", "auto_strategy",
           "block_partitions", "make_strategy"]
BARRIER_STRATEGIES = ("allreduce", "allreduce-averaging", "ssp", "gossip")  # one barrier stage per fit
FIRST_ORDER_STRATEGIES = ("ssp", "gossip")  # the linear models' smooth + proximal objectives only


def auto_strategy(spark, checkpointing=False):
    """(strategy, why): what ``strategy="auto"`` runs in ``spark``'s session.

    ``allreduce`` keeps the blocks and the optimizer in one barrier stage for the whole fit: no Spark
    job per iteration, so it is the faster of the exact strategies at every size measured (notebook
    data most of all, where a job's fixed cost is most of an iteration). It needs what a barrier stage
    needs, and otherwise ``sync`` runs:

    * the cluster's task slots are known (a Spark Connect client reads them from the master URL or the
      executor settings; without them it cannot size the stage);
    * dynamic allocation is off (Spark refuses barrier stages under it);
    * ``checkpointing`` is False: ``allreduce`` writes checkpoints from an executor, into a directory the
      driver must share; ``sync`` writes them on the driver.

    A barrier stage cannot rebuild blocks lost with an executor; the estimator then fits again with
    ``sync`` (``TorchEstimator._fit``), which can.
    """
    if checkpointing:
        return "sync", "checkpointDir is set"
    if str(conf_value(spark, "spark.dynamicAllocation.enabled")).lower() == "true":
        return "sync", "dynamic allocation is on"
    slots = task_slots(spark)
    if slots is None:
        return "sync", "the cluster's task slots are unknown" + (" to this Spark Connect client" if is_connect(spark)
                                                                  else "")
    return "allreduce", f"{slots} task slots"


def block_partitions(name, spark, num_workers=0):
    """At most how many blocks a fit with strategy ``name`` converts its input into, or None (as many
    as the input has partitions).

    ``sync`` and ``allreduce`` sum exact passes, whatever the partitioning: one block per task slot
    (``allreduce``: per ``numWorkers`` when set), so the conversion runs in one wave and each
    barrier task reads one block; ``ssp`` and ``gossip`` likewise (a rank's share is its blocks). Model
    averaging keeps the input's partitions: they are its local problems.
    """
    one_per_slot = ("allreduce", *FIRST_ORDER_STRATEGIES)  # barrier stages sized by numWorkers
    if name in one_per_slot and num_workers > 0:
        return num_workers
    return task_slots(spark) if name in ("sync", *one_per_slot) else None


def make_strategy(name, data, loss, device, aggregation_depth=2, num_workers=0, local_iter=10, staleness=3,
                  topology="ring"):
    if name == "sync":
        return SyncStrategy(data, loss, device, aggregation_depth)
    if name == "allreduce":
        return AllReduceStrategy(data, loss, device, aggregation_depth, num_workers)
    if name == "averaging":
        return AveragingStrategy(data, loss, device, aggregation_depth, local_iter)
    if name == "allreduce-averaging":
        return AllReduceAveragingStrategy(data, loss, device, aggregation_depth, num_workers, local_iter)
    if name == "ssp":
        return SSPStrategy(data, loss, device, aggregation_depth, num_workers, staleness)
    if name == "gossip":
        return GossipStrategy(data, loss, device, aggregation_depth, num_workers, topology)
    raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}; got {name!r}")
