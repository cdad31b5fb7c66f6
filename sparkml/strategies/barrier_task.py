"""The communication of a barrier stage: who runs, where the blocks are, and a process group.

A barrier stage runs all its tasks at once (at most the cluster's free task slots:
``plan_workers``). ``BarrierTask`` is one task's side, a context manager: the task meets the
others at a ``torch.distributed`` key-value store (hosted by the driver in a classic session, by
rank 0 in Spark Connect: ``_rendezvous``; sealed with a per-stage secret that only the task closure
carries, so no other process can join: ``strategies.rendezvous``), they exchange where they run and split the resident
blocks among the tasks that can read them (``assign_blocks``), the task opens its blocks once
(``PartitionSums``) and joins a process group (gloo on CPU, NCCL on CUDA) over that store. On
exit it leaves the group and, on the fit's last pass over the blocks, deletes its own.

``run_barrier_stage`` is the driver's side: it hosts the store (classic sessions), picks the
stage's input (``TrainingData.barrier_handles``: one task per block, placed where the block is; or
``spark.range(n)`` when there are more blocks than tasks) and collects the tasks' output rows. The
stage is a ``mapInArrow(..., barrier=True)``, so classic and Spark Connect sessions run it alike.
"""

import functools
import json
import logging
import socket
from datetime import timedelta
from typing import NamedTuple

import numpy as np

from sparkml.data import block_store
from sparkml.data.convert import STATS_SCHEMA
from sparkml.runtime import task_context
from sparkml.runtime.cancellation import as_cancelled
from sparkml.strategies import rendezvous
from sparkml.strategies.partition_sums import PartitionSums
from sparkml.strategies.transport import split

logger = logging.getLogger("sparkml")
_TIMEOUT = timedelta(minutes=30)  # a collective (one evaluation) may take this long
_RENDEZVOUS_TIMEOUT = timedelta(minutes=5)  # every task of the stage runs at once: they meet quickly


def plan_workers(requested, n_partitions, slots):
    """How many barrier tasks to run; a clear error when the cluster cannot run them at once.
    ``slots`` None (unknown): trust ``requested``, else one task per partition, and let Spark's
    own barrier check speak."""
    if requested < 0:
        raise ValueError(f"numWorkers must be >= 0; got {requested}")
    n = requested or (n_partitions if slots is None else min(n_partitions, slots))
    if slots is not None and n > slots:
        raise ValueError(
            f"strategy='allreduce' runs {n} barrier tasks at once but the cluster has {slots} free task "
            f"slot(s) (cores / spark.task.cpus). Set numWorkers <= {slots}, or use strategy='sync'."
        )
    return max(1, min(n, n_partitions))


def assign_blocks(blocks, task_stores):
    """Give each task the partitions whose blocks live where it runs, balancing rows.

    ``blocks``: (partition, rows, store) of every non-empty partition; ``task_stores``: the store
    key of each rank. Deterministic, so every rank computes the same assignment (and, when some
    blocks are where no task runs, raises the same error before any rank waits on a collective).
    """
    tasks: dict[str, list[int]] = {}
    for rank, store in enumerate(task_stores):
        tasks.setdefault(store, []).append(rank)
    mine: list[list[tuple[int, int]]] = [[] for _ in task_stores]
    load = [0] * len(task_stores)
    for partition, rows, store in sorted(blocks, key=lambda b: (-b[1], b[0])):
        ranks = tasks.get(store)
        if not ranks:
            raise RuntimeError(
                f"the training blocks of partition {partition} are on {store}, where no barrier task of "
                f"strategy='allreduce' runs (tasks run on: {', '.join(sorted(tasks))}); use strategy='sync' "
                f"or give every executor that holds data a task slot"
            )
        rank = min(ranks, key=lambda r: (load[r], r))
        mine[rank].append((partition, rows))
        load[rank] += rows
    return mine


def _rendezvous(ctx, rank, world, driver_store, secret):
    """(a key-value store every rank of this stage attempt reaches, without a barrier call where possible,
    sealed with the fit's ``secret`` (``strategies.rendezvous``); the driver's store under the prefix the
    driver reads progress events from, or None where rank 0 hosts the store).

    Spark's ``allGather``/``barrier`` answer on a one-second poll (a second per call), so in a
    classic session the driver hosts the store and passes its address in the task closure; a
    Spark Connect client may not be reachable from the executors, so there rank 0 hosts it and
    shares the port through one ``allGather``.
    """
    if driver_store is None:  # a fresh store per stage attempt
        host = ctx.getTaskInfos()[0].address.rsplit(":", 1)[0] or "127.0.0.1"
        if rank == 0:
            store = rendezvous.tcp_store(host, 0, world, _RENDEZVOUS_TIMEOUT, rendezvous.listen(host))
        port = int(ctx.allGather(str(store.port if rank == 0 else 0))[0])
        if rank != 0:
            store = rendezvous.tcp_store(host, port, world, _RENDEZVOUS_TIMEOUT)
        return rendezvous.sealed(store, secret, "fit"), None
    # The driver's store outlives a failed stage attempt: a retry must not read the keys of the failed
    # one, so each attempt's keys live under the count of tasks that arrived before it. (Spark does
    # not tell Python tasks their stage attempt; an executor lost before its task arrived here would
    # shift the count, and the retry then fails at this rendezvous after _RENDEZVOUS_TIMEOUT.)
    host, port = driver_store
    store = rendezvous.tcp_store(host, port, world, _RENDEZVOUS_TIMEOUT)
    arrived = rendezvous.sealed(store, secret).add("arrivals", 1)
    epoch = f"epoch-{(arrived - 1) // world}"
    return rendezvous.sealed(store, secret, epoch), rendezvous.sealed(store, secret, f"{PROGRESS_PREFIX}-{epoch}")


def _all_gather(store, rank, world, name, value):
    store.set(f"{name}/{rank}", value)
    return [store.get(f"{name}/{r}").decode() for r in range(world)]


class _ProcessGroup:
    """A torch.distributed group over the tasks of the current barrier stage."""

    def __init__(self, device, rank, world, store, group=True):
        import torch
        import torch.distributed as dist

        self.torch, self.dist, self.rank, self.device = torch, dist, rank, device
        # The group keeps only the C++ half of a store written in Python (the sealed store): were the Python
        # object collected, its methods would be gone ("Not implemented"). NCCL uses the store later than
        # gloo, at the first collective, where it publishes its communicator's id.
        self._store = store
        self._p2p = None  # the default group, or a gloo group beside NCCL (``point_to_point``)
        self.alone = not group  # ``group`` False (a stage of one task): its sums are the sums, no group is started
        if self.alone:
            return
        if device.type == "cuda":
            torch.cuda.set_device(device)  # NCCL binds each rank to the current device
        dist.init_process_group(
            "nccl" if device.type == "cuda" else "gloo", store=store, rank=rank, world_size=world, timeout=_TIMEOUT
        )

    def sum(self, tensor):
        """Sum over ranks; every rank receives rank 0's bits."""
        if not self.alone:
            self.dist.reduce(tensor, dst=0)
            self.dist.broadcast(tensor, src=0)
        return tensor

    def add(self, part, size):
        """The ranks' tuples of floats / arrays added element by element, as ``size`` float64s
        (``part`` None: this rank holds no rows and adds zeros)."""
        flat = (
            np.zeros(size)
            if part is None
            else np.concatenate([np.ravel(np.asarray(x, dtype=np.float64)) for x in part])
        )
        return self.sum(self.torch.from_numpy(flat).to(self.device)).cpu().numpy()

    def maximum(self, value):
        """The largest of the ranks' floats ``value``."""
        if self.alone:
            return float(value)
        t = self.torch.tensor([float(value)], dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return float(t.item())

    def point_to_point(self):
        """Open the group the messages below travel on, on every rank at the same point: this one (gloo), or
        next to NCCL's a gloo group, as NCCL needs CUDA tensors and cannot receive from any rank."""
        if self.device.type == "cuda" and self._p2p is None and not self.alone:
            self._p2p = self.dist.new_group(backend="gloo")

    def _tensor(self, vector):
        return self.torch.from_numpy(np.ascontiguousarray(vector, dtype=np.float64))

    def exchange(self, vector, peers):
        """{peer: its vector} for this rank's ``vector`` sent to each of ``peers``, who send theirs (same length)."""
        sent = self._tensor(vector)
        got = {j: self.torch.empty_like(sent) for j in peers}
        ops = [self.dist.P2POp(self.dist.isend, sent, j, self._p2p) for j in peers] + [
            self.dist.P2POp(self.dist.irecv, got[j], j, self._p2p) for j in peers
        ]
        for work in self.dist.batch_isend_irecv(ops) if ops else ():
            work.wait()
        return {j: t.numpy() for j, t in got.items()}

    def send(self, vector, dst):
        self.dist.send(self._tensor(vector), dst, group=self._p2p)

    def isend(self, vector, dst):
        """Send without waiting; ``.wait()`` on the result (which keeps the tensor alive until then)."""
        tensor = self._tensor(vector)
        return _Sending(self.dist.isend(tensor, dst, group=self._p2p), tensor)

    def send_recv(self, vector, dst, reply):
        """Send ``vector`` to ``dst``, then receive its answer, shaped like ``reply``."""
        self.send(vector, dst)
        got = self.torch.empty(len(reply), dtype=self.torch.float64)
        self.dist.recv(got, dst, group=self._p2p)
        return got.numpy()

    def recv_any(self, size):
        """(sender, vector of ``size`` float64s) from whichever rank sends first."""
        got = self.torch.empty(size, dtype=self.torch.float64)
        source = self.dist.recv(got, group=self._p2p)
        return source, got.numpy()

    def close(self):
        if not self.alone:
            self.dist.destroy_process_group()


class _Sending:
    def __init__(self, work, tensor):
        self.work, self.tensor = work, tensor

    def wait(self):
        self.work.wait()


class BarrierTask:
    """One rank of the running barrier stage (module docstring): ``rank``, ``world``, ``sums`` over
    this rank's blocks and ``group`` to add the ranks' sums with; the communicator a solver sums through
    (``sum``, ``sum_of``: ``strategies.solver_protocols.Communicator``), and ``group``'s messages for the solvers
    that talk to single ranks (``ssp``, ``gossip``)."""

    def __init__(self, blocks, dataset_id, loss, device, dtype, meeting, last_pass):
        self.blocks, self.dataset_id, self.loss, self.device, self.dtype = blocks, dataset_id, loss, device, dtype
        self.meeting, self.last_pass = meeting, last_pass

    def __enter__(self):
        from sparkml.gpu import check_distinct_devices

        ctx = task_context.barrier()
        executors = [info.address for info in ctx.getTaskInfos()]
        self.rank, self.world = ctx.partitionId(), len(executors)
        local_rank = executors[: self.rank].count(executors[self.rank])  # among this executor's tasks
        choice = task_context.device(self.device, local_rank)
        store, self.progress_store = _rendezvous(ctx, self.rank, self.world, *self.meeting)
        where = _all_gather(store, self.rank, self.world, "where", block_store.store_key())
        self.placements = [
            json.loads(p)
            for p in _all_gather(
                store,
                self.rank,
                self.world,
                "device",
                json.dumps([socket.gethostname(), task_context.physical_gpu(choice.device), choice.device, choice.why]),
            )
        ]
        check_distinct_devices([(host, gpu) for host, gpu, _, _ in self.placements])
        self.mine = assign_blocks(self.blocks, where)[self.rank]
        self.sums = PartitionSums(self.mine, self.dataset_id, self.loss, choice.device, self.dtype)
        self.group = _ProcessGroup(self.sums.device, self.rank, self.world, store, group=self.world > 1)
        return self

    def sum_of(self, fn, shapes, *values):
        """The sum over the ranks of ``fn(sums, *values)`` (a tuple of floats / arrays, or None to add nothing;
        nothing either on a rank without rows), as one tuple of ``shapes``: every rank receives the same bits."""
        part = fn(self.sums, *values) if self.sums else None
        return split(self.group.add(part, sum(int(np.prod(s)) for s in shapes)), shapes)

    def sum(self, kind, coef, shapes, loss=None):
        """The sums of one pass of ``PartitionSums.<kind>`` at ``coef`` over every rank's rows, shaped ``shapes``."""
        return self.sum_of(lambda sums, c: getattr(sums, kind)(c, loss), shapes, coef)

    def __exit__(self, exc_type, exc, tb):
        self.group.close()
        if exc_type is None and self.last_pass:  # the fit's last pass: no separate job to delete them
            block_store.drop_partitions(self.dataset_id, [p for p, _ in self.mine])
        return False


def _driver_host(spark):
    """The address the driver's store binds to and executors reach it at: where Spark binds the
    driver itself (``spark.driver.bindAddress``, else ``spark.driver.host``)."""
    conf = spark.sparkContext._conf  # not getConf(): that copies every setting, one py4j call each
    return conf.get("spark.driver.bindAddress", None) or conf.get("spark.driver.host", None) or socket.gethostname()


PROGRESS_PREFIX = "progress"  # the driver's store's keys under which rank 0 relays its progress events


class Meeting(NamedTuple):
    """What a barrier task needs to meet the others: the (host, port) of the driver's store (None
    where rank 0 hosts one) and the stage's secret (``strategies.rendezvous``)."""

    driver_store: tuple[str, int] | None
    secret: bytes


# A barrier stage is a ResultStage (``collect``), which Spark does not retry: the stage is run again
# here when a task failed, as Spark would retry it, but not when the failure will repeat or the blocks
# are gone.
STAGE_ATTEMPTS = 4  # Spark's spark.stage.maxConsecutiveAttempts default
_BLOCKS_LOST = ("CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND", "ExecutorLostFailure", "are not on this executor")
_REPEATS = ("where no barrier task of", "RendezvousTampered", "more slots than the total number of slots")


class ExecutorLost(RuntimeError):
    """An executor died during a barrier stage, and with it the training blocks its tasks held."""


def blocks_lost(error):
    """Whether ``error`` (any fit's) says training blocks are gone: an ``ExecutorLost``, or a task that did not
    find its blocks or their handles (a lost executor, blocks deleted since)."""
    return isinstance(error, ExecutorLost) or any(marker in str(error) for marker in _BLOCKS_LOST)


def run_barrier_stage(data, n_workers, on_handles, task, schema, strategy="allreduce", listen=None):
    """The rows of one barrier stage of ``n_workers`` tasks over ``data``'s blocks, each running
    ``task(batches, meeting)`` (a ``mapInArrow`` function; ``meeting``: a ``Meeting``, shipped in the
    task closure). ``on_handles``: one task per block, on the cached handles; else over
    ``spark.range(n_workers)``. ``listen(store_for)``: called as the stage starts (a classic session only) with
    ``store_for(attempt)``, the driver's store as rank 0 of that attempt relays to; returns an object whose
    ``stop(drain=True)`` ends it (``strategies.iteration_relay``).

    A failed task fails the whole stage; it runs again (a fresh rendezvous, the blocks still in
    place, the same deterministic result) up to ``STAGE_ATTEMPTS`` times in all. A cancelled stage
    (``sparkml.runtime.cancellation``) is not a failure: it ends the fit with ``FitCancelled``, not run again. A
    lost executor ends the fit with ``ExecutorLost``: a barrier stage cannot rebuild the blocks it held.
    """
    for attempt in range(1, STAGE_ATTEMPTS + 1):
        try:
            return _one_stage(data, n_workers, on_handles, task, schema, listen)
        except Exception as e:
            cancelled = as_cancelled(e, "fit")
            if cancelled is not None:  # the user's, not a failure: never run again
                raise cancelled from None
            text = str(e)
            if any(marker in text for marker in _BLOCKS_LOST):
                raise ExecutorLost(
                    f"strategy={strategy!r}: an executor was lost during the fit, and with it the training blocks "
                    f"its barrier tasks read; a barrier stage cannot rebuild them from lineage. Fit again, or use "
                    f"strategy='sync' (or 'averaging'), whose tasks rebuild lost blocks and finish the fit"
                ) from e
            if attempt == STAGE_ATTEMPTS or any(marker in text for marker in _REPEATS):
                raise
            logger.warning(
                "strategy=%r: barrier stage attempt %d of %d failed (%s); running it again",
                strategy,
                attempt,
                STAGE_ATTEMPTS,
                text.strip().splitlines()[0][:300] if text else e,
            )


def _progress_view(store, secret, attempt):
    """The driver's ``store`` as rank 0 of stage attempt ``attempt`` relays progress to (``_rendezvous``'s epochs)."""
    return rendezvous.sealed(store, secret, f"{PROGRESS_PREFIX}-epoch-{attempt}")


def _one_stage(data, n_workers, on_handles, task, schema, listen):
    secret = rendezvous.new_secret()
    listener = None
    if data.connect:
        master, meeting = None, Meeting(None, secret)
    else:
        host = _driver_host(data.spark)
        master = rendezvous.tcp_store(host, 0, n_workers, _RENDEZVOUS_TIMEOUT, rendezvous.listen(host))
        meeting = Meeting((host, master.port), secret)
        if listen is not None:
            listener = listen(functools.partial(_progress_view, master, secret))
    if not on_handles:
        tasks = data.spark.range(0, n_workers, 1, n_workers)
    elif data.connect:
        tasks = data.barrier_handles()
    else:
        tasks = data.spark.createDataFrame(data.barrier_handles(), STATS_SCHEMA)
    try:
        rows = tasks.mapInArrow(lambda batches: task(batches, meeting), schema, barrier=True).collect()
        if listener is not None:
            listener.stop()  # the events not read yet, before the store stops
        return rows
    finally:
        if listener is not None:
            listener.stop(drain=False)
        del master  # stops the driver's store
