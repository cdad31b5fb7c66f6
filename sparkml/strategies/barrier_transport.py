"""The ``barrier`` transport: the whole solve inside one barrier stage.

Each task of the stage (``strategies.barrier_task``: rendezvous, blocks, process group) runs the same solver
(``strategies.table``'s row: L-BFGS / OWL-QN, Newton, the rounds of model averaging, a parameter server,
gossip), its ``BarrierTask`` the communicator the solver sums through: every pass's partial sums are added
across the tasks by the process group. The conversion coalesced the input to one block per task slot (or per
``numWorkers``: ``strategies.block_partitions``), so by default the stage runs over the fit's cached handles,
one task per block, each on the executor that holds its block.

Every sum is a reduce to rank 0 followed by a broadcast from it, so every rank sees bit-identical values,
takes identical steps and stops at the same iteration: no rank can wait on a collective the others never
enter. Rank 0 reports the iterations (``Progress``), relayed to the driver as they end
(``strategies.iteration_relay``), and returns the result. One Spark job for the whole fit
instead of one per evaluation.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from sparkml.optim.iterations import Progress, TrainingSummary, from_record
from sparkml.runtime import worker_socket
from sparkml.runtime.session_kind import task_slots
from sparkml.strategies.barrier_task import BarrierTask, plan_workers, run_barrier_stage
from sparkml.strategies.iteration_relay import DriverListener, TaskRelay

logger = logging.getLogger("sparkml")
_RESULT_SCHEMA = "theta binary, summary string"


def _summary_record(s):
    return {
        "history": s.objectiveHistory,
        "iterations": s.totalIterations,
        "converged": s.converged,
        "message": s.message,
        "iteration_seconds": s.iterationSeconds,
    }


def _stage_task(blocks, dataset_id, loss, device, dtype, last_pass, solve, progress, checkpoint):
    """The barrier stage's function: this rank runs ``solve(task, progress, checkpoint)`` -> (theta, a
    TrainingSummary or a list of them); rank 0 yields the result as one Arrow row, with the lines its
    ``progress`` (one object in the task's closure) logged. The other ranks report to a silent ``Progress``
    and write no checkpoints (``Checkpoint.on_rank``)."""

    def task(batches, meeting):
        import pyarrow as pa

        worker_socket.acknowledge_promptly()
        for _ in batches:  # drain the input (a range id, or this partition's handle row)
            pass
        with BarrierTask(blocks, dataset_id, loss, device, dtype, meeting, last_pass) as me:
            mine = progress if me.rank == 0 else Progress()
            if me.rank == 0 and me.progress_store is not None:
                mine.relay = TaskRelay(me.progress_store)  # each iteration to the driver as it ends
            theta, summaries = solve(me, mine, checkpoint and checkpoint.on_rank(me.rank))
        if me.rank == 0:
            theta = np.asarray(theta, dtype=np.float64)
            single = isinstance(summaries, TrainingSummary)
            record = {
                "shape": list(theta.shape),
                "single": single,
                "summaries": [_summary_record(s) for s in ([summaries] if single else summaries)],
                "log": progress.lines,
                "events": progress.records,  # kept where no relay reached the driver
                "devices": me.placements,
            }
            yield pa.RecordBatch.from_pydict({"theta": [theta.tobytes()], "summary": [json.dumps(record)]})

    return task


class BarrierStage:
    """One barrier stage runs the solver on every task; ``torch.distributed`` adds the sums (module docstring)."""

    name = "barrier"

    def __init__(self, data, loss, options, strategy):
        self.data, self.loss, self.device, self.strategy = data, loss, options.device, strategy
        num_workers = options.num_workers
        slots = task_slots(data.spark)
        # by default one task per partition, placed where the partition's blocks are (module docstring)
        self.on_handles = num_workers in (0, data.n_partitions) and (slots is None or data.n_partitions <= slots)
        self.n_workers = (
            data.n_partitions if self.on_handles else plan_workers(num_workers, max(1, len(data.blocks)), slots)
        )

    def run(self, solve: Callable[..., Any], *, last_pass: bool, progress, checkpoint) -> Any:
        """``solve(task, progress, checkpoint)`` on every barrier task (``task``: its ``BarrierTask``, the
        communicator); rank 0's (theta, summary or summaries). ``last_pass``: the fit reads the blocks no more,
        so each task deletes its own when done. ``checkpoint``: loaded on the driver, written by rank 0.

        The summaries' seconds are the stage's wall time: task launch, rendezvous and block loading included.
        The iteration lines rank 0's ``progress`` logged on its executor are logged again here, on the driver.
        """
        progress = progress or Progress()
        start = time.perf_counter()
        task = _stage_task(
            self.data.blocks,
            self.data.dataset_id,
            self.loss,
            self.device,
            self.data.compute_dtype,
            last_pass,
            solve,
            progress.for_tasks(),
            checkpoint,
        )
        listeners: list[DriverListener] = []

        def listen(store_for):
            listeners.append(DriverListener(store_for, progress))
            return listeners[-1]

        out = run_barrier_stage(
            self.data, self.n_workers, self.on_handles, task, _RESULT_SCHEMA, self.strategy, listen=listen
        )
        if last_pass:
            self.data.dropped_by_tasks = True
        record = json.loads(out[0]["summary"])
        for rank, (host, _, device, why) in enumerate(record["devices"]):
            logger.info("strategy %r: rank %d on %s computed on %s (%s)", self.strategy, rank, host, device, why)
        if not listeners or not listeners[-1].read:  # no live relay (Spark Connect): the lines and events now
            for line in record["log"]:
                logger.info("%s", line)
            progress.lines.extend(record["log"])
            for event in record["events"]:
                progress.tell(from_record(event))
        theta = np.frombuffer(out[0]["theta"], dtype=np.float64).reshape(record["shape"]).copy()
        seconds = time.perf_counter() - start
        summaries = [
            TrainingSummary(
                r["history"], r["iterations"], r["converged"], r["message"], seconds, r["iteration_seconds"]
            )
            for r in record["summaries"]
        ]
        return theta, (summaries[0] if record["single"] else summaries)
