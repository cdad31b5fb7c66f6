"""The strategies: one row each, read by Param validation, ``auto``, the conversion, the fit and the docs.

A strategy is a transport crossed with a solver:

* transport ``jobs``: a Spark job per evaluation (or per round), the solver's state on the driver;
  ``barrier``: one barrier stage for the whole fit, the tasks meeting in a ``torch.distributed`` group;
* solver ``quasi-newton``: L-BFGS, OWL-QN or L-BFGS-B on the exact objective (KernelSVC: Newton), every
  pass an exact sum over all rows; ``dane``: rounds of local solves averaged by rows; ``piag``: a
  parameter server's proximal incremental aggregated gradient; ``gossip``: gradient tracking between
  neighbours.

Each row says once what its pair supports. The transports are ``strategies.job_transport`` and
``strategies.barrier_transport``; a solver is a plain function of the transport's communicator
(``strategies.solver_protocols``). Adding a strategy: its solver in its own module and one row here. This module
imports nothing of the library but the Params' table (``sparkml.params.training``: the options' defaults), and no
pyspark or torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from sparkml.params import training
from sparkml.params.training import DEFAULTS


@dataclass(frozen=True)
class Strategy:
    """One ``strategy`` value.

    Attributes:
        name: the Param value.
        transport: ``jobs`` or ``barrier`` (module docstring).
        solver: ``quasi-newton``, ``dane``, ``piag`` or ``gossip`` (module docstring).
        minimize: ``module:function`` of the solver of the linear models' objective
            (``strategies.solver_protocols.Minimizer``).
        newton: ``module:function`` of the solver of KernelSVC's Newton problems
            (``strategies.solver_protocols.NewtonSolver``), or None: KernelSVC cannot use the strategy.
        block_per_slot: the input is converted into one block per task slot (the passes are exact sums
            whatever the partitioning); otherwise the input's partitions stay (the local problems).
        checkpoints: writes checkpoints (``checkpointDir``) of unconstrained fits.
        bounded_checkpoints: writes checkpoints of bound-constrained fits (L-BFGS-B: bounds, huber).
        first_order: a first-order method on the smooth part with a proximal step (the linear models'
            objectives only; each model says what it cannot do, ``_first_order_refusal``).
        summary: what it does, for the docs and the Param's description.
        use_when: when to choose it, for the docs.
    """

    name: str
    transport: str
    solver: str
    minimize: str
    newton: str | None
    block_per_slot: bool
    checkpoints: bool
    bounded_checkpoints: bool
    first_order: bool
    summary: str
    use_when: str

    @property
    def barrier(self) -> bool:
        return self.transport == "barrier"

    @property
    def kernel_svc(self) -> bool:
        """KernelSVC's Newton passes can run on it."""
        return self.newton is not None

    def minimizer(self) -> Callable:
        """The function at ``minimize``."""
        return _load(self.minimize)

    def newton_solver(self) -> Callable | None:
        """The function at ``newton``, or None."""
        return None if self.newton is None else _load(self.newton)


def _load(path: str) -> Callable:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def _option(param: str) -> Any:
    """A ``StrategyOptions`` field set from the Param ``param``, with that Param's default."""
    return field(default=DEFAULTS[param], metadata={"param": param})


@dataclass(frozen=True)
class StrategyOptions:
    """The estimator's settings a strategy is built with; each transport and solver reads the ones it uses.

    Each field is one Param's value (``option_params``: the mapping ``TorchEstimator._make_strategy`` reads),
    its default that Param's (``sparkml.params.training.DEFAULTS``).
    """

    device: str = _option("device")
    aggregation_depth: int = _option("aggregationDepth")
    num_workers: int = _option("numWorkers")
    local_iter: int = _option("localIter")
    staleness: int = _option("staleness")
    topology: str = _option("topology")


def option_params() -> dict[str, str]:
    """``StrategyOptions`` field -> the Param it is set from."""
    return {f.name: f.metadata["param"] for f in fields(StrategyOptions)}


AUTO = "auto"

TABLE = [
    Strategy(
        "sync",
        "jobs",
        "quasi-newton",
        "sparkml.strategies.exact:quasi_newton",
        "sparkml.strategies.exact:newton",
        block_per_slot=True,
        checkpoints=True,
        bounded_checkpoints=False,
        first_order=False,
        summary="per evaluation: broadcast the coefficients, PyTorch loss and gradient sums per partition, "
        "`treeAggregate`, an L-BFGS / OWL-QN step on the driver",
        use_when="the cluster is shared with other jobs, or dynamic allocation is on",
    ),
    Strategy(
        "allreduce",
        "barrier",
        "quasi-newton",
        "sparkml.strategies.exact:quasi_newton",
        "sparkml.strategies.exact:newton",
        block_per_slot=True,
        checkpoints=True,
        bounded_checkpoints=False,
        first_order=False,
        summary="the whole optimization in one barrier stage: every task runs the same optimizer, sums added "
        "by `torch.distributed` (gloo on CPU, NCCL on GPU)",
        use_when="the fastest exact strategy in every benchmark",
    ),
    Strategy(
        "averaging",
        "jobs",
        "dane",
        "sparkml.strategies.averaging:dane",
        None,
        block_per_slot=False,
        checkpoints=True,
        bounded_checkpoints=True,
        first_order=False,
        summary="per round, each partition runs `localIter` iterations on its objective corrected by the "
        "global gradient (DANE); the driver averages them",
        use_when="a Spark job per evaluation is expensive but one per round is not",
    ),
    Strategy(
        "allreduce-averaging",
        "barrier",
        "dane",
        "sparkml.strategies.averaging:dane",
        None,
        block_per_slot=False,
        checkpoints=True,
        bounded_checkpoints=True,
        first_order=False,
        summary="the same rounds inside one barrier stage, averaged by all-reduce",
        use_when="as `averaging`, with the barrier stage's cheap communication",
    ),
    Strategy(
        "ssp",
        "barrier",
        "piag",
        "sparkml.strategies.ssp:piag",
        None,
        block_per_slot=True,
        checkpoints=False,
        bounded_checkpoints=False,
        first_order=True,
        summary="a parameter server on rank 0 of one barrier stage; workers push gradients and pull the "
        "model, at most `staleness` pushes apart",
        use_when="experiments with the architecture",
    ),
    Strategy(
        "gossip",
        "barrier",
        "gossip",
        "sparkml.strategies.gossip:gossip",
        None,
        block_per_slot=True,
        checkpoints=False,
        bounded_checkpoints=False,
        first_order=True,
        summary="no server and no global reduce: each task exchanges with its neighbours on `topology`",
        use_when="many workers where a global all-reduce costs more than a pass over a task's rows",
    ),
]


def names() -> tuple:
    """Every ``strategy`` value: ``auto``, then the table's."""
    return (AUTO, *(s.name for s in TABLE))


training.provide_strategy_names(names)  # the Param's choices are the rows: a new row is a new value


def get(name: str) -> Strategy:
    """The row of ``name`` (not ``auto``, which is decided per session: ``strategies.auto_strategy``)."""
    for row in TABLE:
        if row.name == name:
            return row
    raise ValueError(f"strategy must be one of {', '.join(names())}; got {name!r}")


def names_where(**capabilities) -> tuple:
    """The names of the rows whose attributes equal ``capabilities`` (e.g. ``kernel_svc=True``)."""
    return tuple(s.name for s in TABLE if all(getattr(s, k) == v for k, v in capabilities.items()))


def markdown() -> str:
    """The table as the docs show it."""
    lines = [
        "| strategy | transport | solver | what it does | use when |",
        "| --- | --- | --- | --- | --- |",
        "| `auto` (default) | | | `allreduce` where Spark can run one barrier stage for the fit, else `sync` "
        "| almost always |",
    ]
    lines += [f"| `{s.name}` | {s.transport} | {s.solver} | {s.summary} | {s.use_when} |" for s in TABLE]
    return "\n".join(lines)
