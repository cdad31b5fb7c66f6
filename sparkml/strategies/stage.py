"""The ``allreduce`` strategies: the whole optimization inside one barrier stage.

Each task of the stage (``strategies.barrier``: rendezvous, blocks, process group) runs the same
driver-free optimizer as ``sync`` (L-BFGS / OWL-QN, Newton) or the rounds of model averaging, and
every pass's partial sums are added across the tasks by the process group. The conversion
coalesced the input to one block per task slot (or per ``numWorkers``:
``strategies.block_partitions``), so by default the stage runs over the fit's cached handles, one
task per block, each on the executor that holds its block.

Every evaluation sums the tasks' partial (loss, gradient) with a reduce to rank 0 followed by a
broadcast from it, so every rank sees bit-identical values, takes identical steps and stops at the
same iteration: no rank can wait on a collective the others never enter. Rank 0 reports the
iterations (``Progress``) and returns the result. One Spark job for the whole fit instead of one
per evaluation.

One-off passes (the normal equations' Gram matrix) run as ``sync`` jobs.
"""

import json
import logging
import time

import numpy as np

from sparkml.optim.newton import newton_warm_started
from sparkml.optim.progress import Progress, TrainingSummary, run_optimizer
from sparkml.session_kind import task_slots
from sparkml.strategies.averaging import clip, local_solve, run_rounds
from sparkml.strategies.barrier import BarrierTask, plan_workers, run_barrier_stage
from sparkml.strategies.sync import SyncStrategy
from sparkml.strategies.transport import split

logger = logging.getLogger("sparkml")
_RESULT_SCHEMA = "theta binary, summary string"
# what each PartitionSums method returns, for k problems of p coefficients
_NEWTON_SHAPES = {
    "loss_gradient": lambda k, p: [(k,), (k, p)],
    "loss_gradient_hessian": lambda k, p: [(k,), (k, p), (k, p, p)],
    "loss_gradient_diagonal": lambda k, p: [(k,), (k, p), (k, p)],
    "loss_gradient_curvature": lambda k, p: [(k,), (k, p), (k,)],
    "hessp": lambda k, p: [(k, p)],
}


def _optimizer_body(objective, theta0, options, local_iter, progress, checkpoint=None):
    """L-BFGS / OWL-QN / L-BFGS-B (``local_iter`` None) or averaging rounds, the data sums all-reduced.
    Every rank runs the same deterministic solver (scipy's L-BFGS-B too) on bit-identical sums; with a
    ``checkpoint`` (optimizer or rounds) every rank resumes from the state the driver loaded and rank 0
    writes the new ones."""
    size = int(np.prod(loss_shape(objective)))

    def body(task):
        sums, group = task.sums, task.group

        def data_sum(coef):
            t = group.add(sums.loss_gradient(coef), 1 + size)
            return t[0], t[1:]

        distributed = objective.with_data_sum(data_sum)
        report = progress if task.rank == 0 else Progress()
        if local_iter is None:
            theta, summary = run_optimizer(
                distributed, theta0, progress=report, **options, checkpoint=checkpoint and checkpoint.on_rank(task.rank)
            )
            return theta, [summary]
        method = "owlqn" if options["owlqn"] else "auto"

        def average_round(theta, global_grad):
            t = group.add(
                local_solve(sums, objective, theta, global_grad, local_iter, method, options["bounds"]), theta.size + 1
            )
            return clip(t[:-1] / t[-1], options["bounds"])

        theta, summary = run_rounds(
            distributed,
            average_round,
            theta0,
            max_iter=options["max_iter"],
            tol=options["tol"],
            name=options["name"],
            progress=report,
            checkpoint=checkpoint and checkpoint.on_rank(task.rank),
        )
        return theta, [summary]

    return body


def _newton_body(make_problems, theta0, options, progress):
    """``optim.newton.newton_warm_started`` (the warm start too in this stage), each pass's sums all-reduced;
    with a ``checkpoint`` every rank resumes from the state the driver loaded and rank 0 writes the new ones."""
    options = dict(options)
    checkpoint = options.pop("checkpoint", None)

    def body(task):
        def evaluate_for(problems):
            def evaluate(theta, idx, kind):
                shapes = _NEWTON_SHAPES[kind](len(idx), theta.shape[-1])
                part = getattr(task.sums, kind)(theta, problems(idx))
                return split(task.group.add(part, sum(int(np.prod(s)) for s in shapes)), shapes)

            return evaluate

        report = progress if task.rank == 0 else Progress()
        return newton_warm_started(
            evaluate_for,
            make_problems,
            theta0,
            progress=report,
            checkpoint=checkpoint and checkpoint.on_rank(task.rank),
            **options,
        )

    return body


def _stage_task(blocks, dataset_id, loss, device, dtype, last_pass, body, progress):
    """The barrier stage's function: this rank runs ``body(task)`` -> (theta, [TrainingSummary]);
    rank 0 yields the result as one Arrow row, with the lines its ``progress`` (the one ``body`` reports
    to: one object in the task's closure) logged."""

    def task(batches, meeting):
        import pyarrow as pa

        for _ in batches:  # drain the input (a range id, or this partition's handle row)
            pass
        with BarrierTask(blocks, dataset_id, loss, device, dtype, meeting, last_pass) as me:
            theta, summaries = body(me)
        if me.rank == 0:
            theta = np.asarray(theta, dtype=np.float64)
            record = {
                "shape": list(theta.shape),
                "summaries": [
                    {
                        "history": s.objectiveHistory,
                        "iterations": s.totalIterations,
                        "converged": s.converged,
                        "message": s.message,
                        "iteration_seconds": s.iterationSeconds,
                    }
                    for s in summaries
                ],
                "log": progress.lines,
            }
            yield pa.RecordBatch.from_pydict({"theta": [theta.tobytes()], "summary": [json.dumps(record)]})

    return task


def loss_shape(objective):
    """Shape of the ``sparkml.gpu`` loss coefficients the objective evaluates."""
    return np.shape(objective.loss_coef(np.zeros(objective.size)))


class AllReduceStrategy(SyncStrategy):
    """One barrier stage runs the optimizer on every task; ``torch.distributed`` adds the sums."""

    name = "allreduce"
    local_iter = None  # exact optimization; model averaging in ``AllReduceAveragingStrategy``

    def __init__(self, data, loss, options):
        super().__init__(data, loss, options)
        num_workers = options.num_workers
        slots = task_slots(data.spark)
        # by default one task per partition, placed where the partition's blocks are (module docstring)
        self.on_handles = num_workers in (0, data.n_partitions) and (slots is None or data.n_partitions <= slots)
        self.n_workers = (
            data.n_partitions if self.on_handles else plan_workers(num_workers, max(1, len(data.blocks)), slots)
        )

    def minimize(
        self,
        objective,
        theta0,
        *,
        max_iter,
        tol,
        name,
        owlqn=False,
        last_pass=False,
        progress=None,
        bounds=None,
        checkpoint=None,
    ):
        """``last_pass``: the fit reads the blocks no more, so each task deletes its own when done.
        ``progress`` runs in rank 0's task. ``bounds``: (lower, upper) over theta, or None (``sync``).
        ``checkpoint``: loaded on the driver, written by rank 0 (``optim.checkpoint``)."""
        if bounds is not None and (owlqn or objective.l1_weights() is not None):
            raise ValueError(f"strategy {self.name!r}: bound constraints need a smooth objective (no L1 term)")
        options = dict(max_iter=max_iter, tol=tol, name=name, owlqn=owlqn, bounds=bounds)
        progress = progress or Progress()
        body = _optimizer_body(
            objective.with_data_sum(None),
            np.asarray(theta0, dtype=np.float64),
            options,
            self.local_iter,
            progress,
            checkpoint,
        )
        theta, (summary,) = self._run_stage(body, last_pass, progress)
        return theta, summary

    def newton(self, make_problems, theta0, *, last_pass=False, progress=None, **options):
        """``optim.newton.newton`` inside one barrier stage (see ``SyncStrategy.newton``)."""
        progress = progress or Progress()
        return self._run_stage(
            _newton_body(make_problems, np.asarray(theta0, dtype=np.float64), options, progress), last_pass, progress
        )

    def _run_stage(self, body, last_pass, progress):
        """Run ``body`` on every barrier task; rank 0's (theta, [TrainingSummary]). The summaries'
        seconds are the stage's wall time: task launch, rendezvous and block loading included. The
        iteration lines rank 0's ``progress`` logged on its executor are logged again here, on the driver."""
        start = time.perf_counter()
        task = _stage_task(
            self.data.blocks,
            self.data.dataset_id,
            self.loss,
            self.device,
            self.data.compute_dtype,
            last_pass,
            body,
            progress,
        )
        out = run_barrier_stage(self.data, self.n_workers, self.on_handles, task, _RESULT_SCHEMA, self.name)
        if last_pass:
            self.data.dropped_by_tasks = True
        record = json.loads(out[0]["summary"])
        for line in record["log"]:
            logger.info("%s", line)
        theta = np.frombuffer(out[0]["theta"], dtype=np.float64).reshape(record["shape"]).copy()
        seconds = time.perf_counter() - start
        return theta, [
            TrainingSummary(
                r["history"], r["iterations"], r["converged"], r["message"], seconds, r["iteration_seconds"]
            )
            for r in record["summaries"]
        ]


class AllReduceAveragingStrategy(AllReduceStrategy):
    """Model averaging (``averaging``'s corrected rounds) inside one barrier stage.

    Each round every task solves the corrected local problem over all the blocks it holds (its
    share: one local problem per task, not per partition), and one all-reduce averages the
    solutions weighted by the tasks' weight sums; the global objective and gradient that correct
    the next round are one more all-reduce. No Spark job per round.
    """

    name = "allreduce-averaging"

    def __init__(self, data, loss, options):
        super().__init__(data, loss, options)
        self.local_iter = int(options.local_iter)
