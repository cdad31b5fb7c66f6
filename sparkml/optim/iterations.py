"""What a fit reports as it runs: one event per iteration, and the record it ends with.

Every optimizer loop of the library (L-BFGS / OWL-QN / L-BFGS-B in ``optim.minimize.run_optimizer``, the model-averaging
rounds of ``strategies.averaging``, the Newton rounds of ``optim.newton``) ends each iteration by
calling its ``Progress`` with an ``Iteration``: that call is the one place where a per-iteration
hook runs. ``Progress`` logs one INFO line on the ``sparkml`` logger and then calls two kinds of hooks:

* ``callbacks`` run in the optimizer's loop, where it runs: on the driver with ``sync`` and ``averaging``,
  inside rank 0's barrier task with ``allreduce`` (the library's own seams: tests slow or hold a fit there);
* ``listeners`` run on the driver, the user's process: directly where the optimizer runs there, and for a
  barrier stage as rank 0 relays each event to the driver (``strategies.barrier_transport``), within about a second.
  ``TorchEstimator.addIterationCallback`` adds one; the progress bar (``sparkml.progress``) is one.

After it the L-BFGS / OWL-QN loop hands its state to the fit's checkpoint, when ``checkpointDir`` is set
(``optim.checkpoint``).
"""

import logging
from dataclasses import dataclass

import numpy as np

logger = logging.getLogger("sparkml")


@dataclass(frozen=True)
class Iteration:
    """The end of one iteration of a fit's optimizer: what an iteration callback receives."""

    name: str  # what is being fitted: "LogisticRegression", "KernelSVC class 2", ...
    kind: str  # "iteration" (L-BFGS / OWL-QN), "round" (model averaging) or "Newton round"
    iteration: int  # 1, 2, ...
    objective: float
    x: np.ndarray | None  # the iterate, in the optimizer's parametrization (None when relayed and large)
    seconds: float  # this iteration's wall time
    detail: str = ""  # the optimizer's own measure: gradient norm, relative change, step

    @property
    def gradient_norm(self) -> float | None:
        """The (projected) gradient norm the detail reports, for the L-BFGS / OWL-QN iterations; else None."""
        words = self.detail.split()
        return float(words[-1]) if "gradient norm" in self.detail and words else None


# a relayed event carries its iterate up to this many values (a million-feature model's would not travel)
RELAYED_X_MAX = 10_000


def event_record(event: Iteration) -> dict:
    """``event`` as JSON-able data (``from_record`` reads it back); the iterate only up to RELAYED_X_MAX values."""
    record = {k: getattr(event, k) for k in ("name", "kind", "iteration", "objective", "seconds", "detail")}
    x = None if event.x is None else np.asarray(event.x, dtype=np.float64)
    record["x"] = x.tolist() if x is not None and x.size <= RELAYED_X_MAX else None
    record["shape"] = list(x.shape) if x is not None else None
    return record


def from_record(record: dict) -> Iteration:
    x = record.get("x")
    fields = {k: record[k] for k in ("name", "kind", "iteration", "objective", "seconds", "detail")}
    return Iteration(x=None if x is None else np.asarray(x, dtype=np.float64).reshape(record["shape"]), **fields)


class Progress:
    """Logs each ``Iteration`` and keeps its line (``lines``); passes the event to ``callbacks`` (in the
    optimizer's loop) and to ``listeners`` (on the driver), functions of one ``Iteration`` (module docstring).

    ``relay``: set on rank 0 of a barrier stage, an object whose ``send(line, record)`` takes each line and
    event record to the driver, where the listeners are. ``records`` (``for_tasks``' copies only): the events,
    kept for the driver where no relay reached it (a Spark Connect stage): it replays them when the stage
    returns."""

    def __init__(self, callbacks=(), listeners=(), keep_records=False):
        self.callbacks = list(callbacks)
        self.listeners = list(listeners)
        self.lines: list[str] = []
        self.records: list[dict] | None = [] if keep_records else None  # a barrier task's copy only
        self.relay = None

    def __call__(self, event):
        line = (
            f"{event.name} {event.kind} {event.iteration}: objective {event.objective:.10g}"
            f"{', ' + event.detail if event.detail else ''}, {event.seconds:.3f} s"
        )
        self.note(line, event)
        for callback in self.callbacks:
            callback(event)

    def note(self, line, event=None):
        """Log ``line`` (INFO, ``sparkml`` logger) and keep it in ``lines``: a line about the fit's progress;
        ``event``: the ``Iteration`` it reports, for the listeners."""
        self.lines.append(line)
        logger.info("%s", line)
        if self.relay is not None:
            self.relay.send(line, None if event is None else event_record(event))
        elif event is not None:
            if self.records is not None:
                self.records.append(event_record(event))
            self.tell(event)

    def tell(self, event):
        """Pass ``event`` to the listeners; one that raises is logged and the fit goes on."""
        for listener in self.listeners:
            try:
                listener(event)
            except Exception:
                logger.exception("an iteration callback failed on %s %s %d", event.name, event.kind, event.iteration)

    def for_tasks(self):
        """The ``Progress`` a barrier stage's closure carries: the callbacks, not the listeners (the driver's)."""
        return Progress(self.callbacks, keep_records=True)


class TrainingSummary:
    """The optimizer's record of a fit, as MLlib's training summaries expose it."""

    def __init__(
        self, objective_history, total_iterations, converged=True, message="", seconds=0.0, iteration_seconds=()
    ):
        self.objectiveHistory = list(objective_history)
        # seconds from the optimizer's start to the end of each iteration (objectiveHistory[1:])
        self.iterationSeconds = list(iteration_seconds)
        self.totalIterations = int(total_iterations)
        self.converged = converged
        self.message = message
        self.seconds = seconds

    def __call__(self):
        """pyspark's ``LinearSVCModel.summary`` is a method, the other models' a property: both work."""
        return self

    def __repr__(self):
        return (
            f"TrainingSummary(totalIterations={self.totalIterations}, "
            f"objective={self.objectiveHistory[-1] if self.objectiveHistory else None})"
        )
