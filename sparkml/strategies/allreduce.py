"""The ``allreduce`` strategy: the whole optimization inside one barrier stage.

The stage has ``n`` barrier tasks (at most the cluster's free task slots: a barrier stage runs all
its tasks at once). The tasks meet at a ``torch.distributed`` key-value store (hosted by the driver in a classic
session, by rank 0 in Spark Connect: ``_rendezvous``), exchange where they run and split the
resident blocks among the tasks that can read them (``assign_blocks``). Each task opens its blocks
once, joins a process group (gloo on CPU, NCCL on CUDA) over that store and runs the same
driver-free L-BFGS / OWL-QN as ``sync``.
The stage is a ``mapInArrow(..., barrier=True)``, so classic and Spark Connect sessions run it
alike. The conversion coalesced the input to one block per task slot (or per ``numWorkers``:
``strategies.block_partitions``), so by default the stage runs over the fit's cached handles, one
task per block, and each task prefers the executor whose cache (and blocks) holds its partition:
Spark's scheduler then puts a task on every executor that holds blocks
(``TrainingData.barrier_handles``). With more blocks than tasks (model averaging keeps the input's
partitions) it runs over ``spark.range(n)`` (Spark does not allow a coalesce inside a barrier
stage) and relies on the tasks taking every slot; ``assign_blocks`` names the executor a task is
missing from otherwise.
Every evaluation sums the tasks' partial (loss, gradient) with a reduce to rank 0 followed by a
broadcast from it, so every rank sees bit-identical values, takes identical steps and stops at the
same iteration: no rank can wait on a collective the others never enter. Rank 0 returns the
result. One Spark job for the whole fit instead of one per evaluation.

One-off passes (the normal equations' Gram matrix) run as ``sync`` jobs.
"""
import json
import socket
import time
from datetime import timedelta

import numpy as np

from sparkml.data.convert import STATS_SCHEMA
from sparkml.newton import newton_warm_started
from sparkml.session_kind import is_connect, task_slots
from sparkml.strategies.averaging import local_solve, run_rounds
from sparkml.strategies.partition_sums import PartitionSums
from sparkml.strategies.sync import SyncStrategy
from sparkml.strategies.transport import split
from sparkml.training import TrainingSummary, run_optimizer

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
            f"slot(s) (cores / spark.task.cpus). Set numWorkers <= {slots}, or use strategy='sync'.")
    return max(1, min(n, n_partitions))


def assign_blocks(blocks, task_stores):
    """Give each task the partitions whose blocks live where it runs, balancing rows.

    ``blocks``: (partition, rows, store) of every non-empty partition; ``task_stores``: the store
    key of each rank. Deterministic, so every rank computes the same assignment (and, when some
    blocks are where no task runs, raises the same error before any rank waits on a collective).
    """
    tasks = {}
    for rank, store in enumerate(task_stores):
        tasks.setdefault(store, []).append(rank)
    mine = [[] for _ in task_stores]
    load = [0] * len(task_stores)
    for partition, rows, store in sorted(blocks, key=lambda b: (-b[1], b[0])):
        ranks = tasks.get(store)
        if not ranks:
            raise RuntimeError(
                f"the training blocks of partition {partition} are on {store}, where no barrier task of "
                f"strategy='allreduce' runs (tasks run on: {', '.join(sorted(tasks))}); use strategy='sync' "
                f"or give every executor that holds data a task slot")
        rank = min(ranks, key=lambda r: (load[r], r))
        mine[rank].append((partition, rows))
        load[rank] += rows
    return mine


def _store(address, world, is_master):
    from torch.distributed import TCPStore

    host, port = address
    return TCPStore(host, port, world if not is_master else None, is_master, _RENDEZVOUS_TIMEOUT,
                    wait_for_workers=False)


def _rendezvous(ctx, rank, world, driver_store):
    """A key-value store every rank of this stage attempt reaches, without a barrier call where possible.

    Spark's ``allGather``/``barrier`` answer on a one-second poll (measured: 1.0 s per call here), so in a
    classic session the driver hosts the store and passes its address in the task closure; a
    Spark Connect client may not be reachable from the executors, so there rank 0 hosts it and
    shares the port through one ``allGather``.
    """
    from torch.distributed import PrefixStore

    if driver_store is None:  # a fresh store per stage attempt
        host = ctx.getTaskInfos()[0].address.rsplit(":", 1)[0] or "127.0.0.1"
        store = _store((host, 0), world, True) if rank == 0 else None
        port = int(ctx.allGather(str(store.port if rank == 0 else 0))[0])
        return PrefixStore("fit", store or _store((host, port), world, False))
    # The driver's store outlives a failed stage attempt: a retry must not read the keys of the failed
    # one, so each attempt's keys live under the count of tasks that arrived before it. (Spark does
    # not tell Python tasks their stage attempt; an executor lost before its task arrived here would
    # shift the count, and the retry then fails at this rendezvous after _RENDEZVOUS_TIMEOUT.)
    store = _store(driver_store, world, False)
    return PrefixStore(f"epoch-{(store.add('arrivals', 1) - 1) // world}", store)


def _all_gather(store, rank, world, name, value):
    store.set(f"{name}/{rank}", value)
    return [store.get(f"{name}/{r}").decode() for r in range(world)]


class _ProcessGroup:
    """A torch.distributed group over the tasks of the current barrier stage."""

    def __init__(self, device, rank, world, store):
        import torch
        import torch.distributed as dist

        self.torch, self.dist, self.rank, self.device = torch, dist, rank, device
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", store=store, rank=rank,
                                world_size=world, timeout=_TIMEOUT)

    def sum(self, tensor):
        """Sum over ranks; every rank receives rank 0's bits."""
        self.dist.reduce(tensor, dst=0)
        self.dist.broadcast(tensor, src=0)
        return tensor

    def add(self, part, size):
        """The ranks' tuples of floats / arrays added element by element, as ``size`` float64s
        (``part`` None: this rank holds no rows and adds zeros)."""
        flat = np.zeros(size) if part is None else np.concatenate(
            [np.ravel(np.asarray(x, dtype=np.float64)) for x in part])
        return self.sum(self.torch.from_numpy(flat).to(self.device)).cpu().numpy()

    def close(self):
        self.dist.destroy_process_group()


def _barrier_task(batches, blocks, dataset_id, loss, device, dtype, driver_store, last_pass, body):
    """One rank: meet the others, open this rank's blocks, run ``body(sums, group)`` -> (theta,
    [TrainingSummary]); rank 0 yields the result."""
    import pyarrow as pa
    from pyspark import BarrierTaskContext

    for _ in batches:  # drain the input (a range id, or this partition's handle row)
        pass
    from sparkml import block_store

    ctx = BarrierTaskContext.get()
    rank, world = ctx.partitionId(), len(ctx.getTaskInfos())
    store = _rendezvous(ctx, rank, world, driver_store)
    mine = assign_blocks(blocks, _all_gather(store, rank, world, "where", block_store.store_key()))[rank]
    sums = PartitionSums(mine, dataset_id, loss, device, dtype)
    group = _ProcessGroup(sums.device, rank, world, store)
    try:
        theta, summaries = body(sums, group)
    finally:
        group.close()
    if last_pass:  # the fit's last pass over these blocks: no separate job to delete them
        block_store.drop_partitions(dataset_id, [p for p, _ in mine])
    if rank == 0:
        theta = np.asarray(theta, dtype=np.float64)
        record = {"shape": list(theta.shape), "summaries": [
            {"history": s.objectiveHistory, "iterations": s.totalIterations, "converged": s.converged,
             "message": s.message, "iteration_seconds": s.iterationSeconds} for s in summaries]}
        yield pa.RecordBatch.from_pydict({"theta": [theta.tobytes()], "summary": [json.dumps(record)]})


def _optimizer_body(objective, theta0, options, local_iter):
    """L-BFGS / OWL-QN (``local_iter`` None) or averaging rounds, the data sums all-reduced."""
    size = int(np.prod(loss_shape(objective)))

    def body(sums, group):
        def data_sum(coef):
            t = group.add(sums.loss_gradient(coef), 1 + size)
            return t[0], t[1:]

        distributed = objective.with_data_sum(data_sum)
        if local_iter is None:
            theta, summary = run_optimizer(distributed, theta0, **options)
            return theta, [summary]
        method = "owlqn" if options["owlqn"] else "auto"

        def average_round(theta, global_grad):
            t = group.add(local_solve(sums, objective, theta, global_grad, local_iter, method), theta.size + 1)
            return t[:-1] / t[-1]

        theta, summary = run_rounds(distributed, average_round, theta0, max_iter=options["max_iter"],
                                    tol=options["tol"], name=options["name"])
        return theta, [summary]

    return body


def _newton_body(make_problems, theta0, options):
    """``sparkml.newton.newton_warm_started`` (the warm start too in this stage), each pass's sums all-reduced."""
    def body(sums, group):
        def evaluate_for(problems):
            def evaluate(theta, idx, kind):
                k, p = len(idx), theta.shape[-1]
                shapes = {"loss_gradient": [(k,), (k, p)], "loss_gradient_hessian": [(k,), (k, p), (k, p, p)],
                          "loss_gradient_diagonal": [(k,), (k, p), (k, p)],
                          "loss_gradient_curvature": [(k,), (k, p), (k,)], "hessp": [(k, p)]}[kind]
                part = getattr(sums, kind)(theta, problems(idx))
                return split(group.add(part, sum(int(np.prod(s)) for s in shapes)), shapes)

            return evaluate

        return newton_warm_started(evaluate_for, make_problems, theta0, **options)

    return body


def _driver_host(spark):
    """The address executors reach the driver at (what Spark itself gives them)."""
    return spark.sparkContext.getConf().get("spark.driver.host", None) or socket.gethostname()


def loss_shape(objective):
    """Shape of the ``gpu`` loss coefficients the objective evaluates."""
    return np.shape(objective.loss_coef(np.zeros(objective.size)))


class AllReduceStrategy(SyncStrategy):
    """One barrier stage runs the optimizer on every task; ``torch.distributed`` adds the sums."""

    name = "allreduce"
    local_iter = None  # exact optimization; model averaging in ``AllReduceAveragingStrategy``

    def __init__(self, data, loss, device, aggregation_depth=2, num_workers=0):
        super().__init__(data, loss, device, aggregation_depth)
        slots = task_slots(data.spark)
        # by default one task per partition, placed where the partition's blocks are (module docstring)
        self.on_handles = num_workers in (0, data.n_partitions) and (slots is None or data.n_partitions <= slots)
        self.n_workers = (data.n_partitions if self.on_handles
                          else plan_workers(num_workers, max(1, len(data.blocks)), slots))

    def minimize(self, objective, theta0, *, max_iter, tol, name, owlqn=False, last_pass=False):
        """``last_pass``: the fit reads the blocks no more, so each task deletes its own when done."""
        options = dict(max_iter=max_iter, tol=tol, name=name, owlqn=owlqn)
        body = _optimizer_body(objective.with_data_sum(None), np.asarray(theta0, dtype=np.float64), options,
                               self.local_iter)
        theta, (summary,) = self._run_stage(body, last_pass)
        return theta, summary

    def newton(self, make_problems, theta0, *, last_pass=False, **options):
        """``sparkml.newton.newton`` inside one barrier stage (see ``SyncStrategy.newton``)."""
        theta, summaries = self._run_stage(_newton_body(make_problems, np.asarray(theta0, dtype=np.float64),
                                                        options), last_pass)
        return theta, summaries

    def _run_stage(self, body, last_pass):
        """Run ``body`` on every barrier task; rank 0's (theta, [TrainingSummary]). The summaries'
        seconds are the stage's wall time: task launch, rendezvous and block loading included."""
        dataset_id, loss, device, dtype = self.data.dataset_id, self.loss, self.device, self.data.compute_dtype
        start = time.perf_counter()
        blocks, n = self.data.blocks, self.n_workers
        master = None if self.data.connect else _store((_driver_host(self.data.spark), 0), n, True)
        driver_store = None if master is None else (_driver_host(self.data.spark), master.port)
        if not self.on_handles:
            tasks = self.data.spark.range(0, n, 1, n)
        elif self.data.connect:
            tasks = self.data.barrier_handles()
        else:
            tasks = self.data.spark.createDataFrame(self.data.barrier_handles(), STATS_SCHEMA)
        try:
            out = (tasks
                   .mapInArrow(lambda batches: _barrier_task(batches, blocks, dataset_id, loss, device, dtype,
                                                             driver_store, last_pass, body),
                               "theta binary, summary string", barrier=True)
                   .collect())
        finally:
            del master  # stops the driver's store
        if last_pass:
            self.data.dropped_by_tasks = True
        record = json.loads(out[0]["summary"])
        theta = np.frombuffer(out[0]["theta"], dtype=np.float64).reshape(record["shape"]).copy()
        seconds = time.perf_counter() - start
        return theta, [TrainingSummary(r["history"], r["iterations"], r["converged"], r["message"], seconds,
                                       r["iteration_seconds"]) for r in record["summaries"]]


class AllReduceAveragingStrategy(AllReduceStrategy):
    """Model averaging (``averaging``'s corrected rounds) inside one barrier stage.

    Each round every task solves the corrected local problem over all the blocks it holds (its
    share: one local problem per task, not per partition), and one all-reduce averages the
    solutions weighted by the tasks' weight sums; the global objective and gradient that correct
    the next round are one more all-reduce. No Spark job per round.
    """

    name = "allreduce-averaging"

    def __init__(self, data, loss, device, aggregation_depth=2, num_workers=0, local_iter=10):
        super().__init__(data, loss, device, aggregation_depth, num_workers)
        if local_iter < 1:
            raise ValueError(f"localIter must be >= 1; got {local_iter}")
        self.local_iter = int(local_iter)
