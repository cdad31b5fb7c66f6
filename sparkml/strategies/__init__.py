"""How the data term of a fit is distributed: the strategies of ``strategies.table``, and ``auto``.

* ``auto`` (the default): ``allreduce`` where Spark can run it, else ``sync`` (``auto_strategy``).
* every other value is one row of ``strategies.table`` (a transport crossed with a solver), built by
  ``make_strategy``: the transports are ``strategies.job_transport`` and ``strategies.barrier_transport``, the
  solvers plain functions of their communicator (``strategies.solver_protocols``).
"""

from sparkml.runtime.session_kind import conf_value, is_connect, task_slots
from sparkml.strategies import table
from sparkml.strategies.table import StrategyOptions

__all__ = ["SMALL_INPUT_BYTES", "StrategyOptions", "auto_strategy", "block_partitions", "make_strategy"]


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
        return "sync", "the cluster's task slots are unknown" + (
            " to this Spark Connect client" if is_connect(spark) else ""
        )
    return "allreduce", f"{slots} task slots"


# an input Spark estimates below this many bytes is one block under strategy="auto" and "sync": its passes take
# milliseconds, a barrier stage of one task starts no process group (about 0.4 s of a small fit), and a sync pass of
# one task skips a second task's launch and result
SMALL_INPUT_BYTES = 8 << 20


def block_partitions(name, spark, num_workers=0, small=False):
    """At most how many blocks a fit with strategy ``name`` converts its input into, or None (as many
    as the input has partitions).

    The strategies whose passes are exact sums whatever the partitioning (``Strategy.block_per_slot``) take
    one block per task slot, so the conversion runs in one wave and each barrier task reads one block; a
    barrier stage sized by ``numWorkers`` takes that many, and a ``small`` input one (Spark estimates it below
    ``SMALL_INPUT_BYTES``, and ``strategy="auto"`` chose the strategy or it is ``sync``: a pass over it is one
    task of milliseconds, where a second task costs the job more than it saves). Model averaging keeps the
    input's partitions: they are its local problems.
    """
    row = table.get(name)
    if not row.block_per_slot:
        return None
    if row.barrier and num_workers > 0:
        return num_workers
    if small:
        return 1
    return task_slots(spark)


def make_strategy(name, data, loss, options):
    """The strategy of row ``name`` over ``data`` for the ``sparkml.gpu`` loss ``loss`` (None: KernelSVC's
    Newton problems), built with ``options`` (a ``StrategyOptions``): its transport running its solver
    (``strategies.composed``)."""
    from sparkml.strategies.composed import ComposedStrategy

    return ComposedStrategy(table.get(name), data, loss, options)
