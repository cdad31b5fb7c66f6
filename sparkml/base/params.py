"""Params this library adds to the pyspark.ml ones: where and how the training runs.

Everything else (regParam, elasticNetParam, maxIter, tol, the column Params, ...) comes from
pyspark.ml's own Param mixins, so names, defaults and documentation match MLlib exactly.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

from pyspark.ml.param import Param, Params, TypeConverters
from pyspark.ml.param.shared import HasCheckpointInterval

from sparkml.data.class_weight import to_class_weight
from sparkml.param_table import DEFAULTS
from sparkml.saved.classes import DEVICES, DTYPES, TOPOLOGIES
from sparkml.saved.param_converters import OneOf
from sparkml.strategies import table as strategy_table

if TYPE_CHECKING:
    from typing_extensions import Self

# the choices (and ``one_of``) live with the saved classes' Param rules (``sparkml.saved.classes``), which
# sparkml.serving checks saved models' Params with, without pyspark
STRATEGIES = strategy_table.names()
# Params that stock MLlib does not know: kept out of the MLlib-format metadata's paramMap.
TORCH_PARAM_NAMES = (
    "strategy",
    "device",
    "dtype",
    "numWorkers",
    "localIter",
    "staleness",
    "topology",
    "checkpointDir",
    "checkpointInterval",
    "classWeight",
)


def own_param_names(instance) -> tuple[str, ...]:
    """The Params of ``instance`` that stock MLlib's class lacks: ``TORCH_PARAM_NAMES`` and the class's own
    extensions (``_own_param_names``: GeneralizedLinearRegression's elasticNetParam)."""
    return TORCH_PARAM_NAMES + tuple(getattr(instance, "_own_param_names", ()))


def one_of(name, allowed):
    """A Param type converter: the value as a string, or ValueError naming the Param and the choices
    (``allowed``: a tuple, or a function returning one, read at each conversion)."""
    return OneOf(name, allowed)


def _accessors(prefix, make, doc):
    """A class decorator factory adding pyspark-style ``<prefix>X`` methods for the named Params
    (a method the class defines itself is kept)."""

    def for_params(*names):
        def decorate(cls):
            for name in names:
                method = make(name)
                method.__name__ = prefix + name[0].upper() + name[1:]
                method.__doc__ = doc.format(name)
                if method.__name__ not in cls.__dict__:
                    setattr(cls, method.__name__, method)
            return cls

        return decorate

    return for_params


with_getters = _accessors(
    "get", lambda name: lambda self: self.getOrDefault(name), "Gets the value of :py:attr:`{}` or its default."
)
with_setters = _accessors(
    "set", lambda name: lambda self, value: self._set(**{name: value}), "Sets the value of :py:attr:`{}`."
)


def with_signature_defaults(cls):
    """A class decorator: the keyword arguments of ``cls.__init__`` written ``...`` get their Params' defaults (None
    for a Param without one), so ``help()``, ``inspect.signature`` and the API docs show the values a fit uses
    while each default is written once, where its Param gets it (``_setDefault``; ``sparkml.param_table``)."""
    init = inspect.unwrap(cls.__init__)  # beneath pyspark's keyword_only
    defaults = {param.name: value for param, value in cls()._defaultParamMap.items()}
    init.__kwdefaults__ = {
        name: defaults.get(name) if value is ... else value for name, value in (init.__kwdefaults__ or {}).items()
    }
    return cls


@with_getters("strategy")
@with_setters("strategy")
class HasStrategy(Params):
    """``strategy``: how the partitions' work is combined (``strategies.table``)."""

    strategy = Param(
        Params._dummy(),
        "strategy",
        "How training is distributed. 'auto' (default): 'allreduce' where Spark can run one barrier stage "
        "for the fit (the cluster's task slots are known, dynamic allocation is off, checkpointDir is unset), "
        "else 'sync'; a fit whose barrier stage loses an executor is fitted again with 'sync'. "
        "'sync': every iteration broadcasts the coefficients, "
        "each partition computes its loss and gradient, treeAggregate sums them and a "
        "driver-side L-BFGS / OWL-QN takes the step. 'allreduce': one barrier stage for the "
        "whole fit; every task runs the same optimizer and the partition sums are added with "
        "torch.distributed (gloo on CPU, NCCL on GPU). 'averaging': model averaging, each round every "
        "partition runs localIter L-BFGS iterations on its own objective from the broadcast model "
        "and the driver averages them weighted by rows (maxIter rounds). 'allreduce-averaging': the same "
        "rounds inside one barrier stage, one local problem per task, averaged by all-reduce. "
        "'ssp': a parameter server on rank 0 of one barrier stage; workers push gradients and pull the model "
        "asynchronously, at most 'staleness' clocks apart (proximal incremental aggregated gradient). 'gossip': "
        "no server and no global reduce; each task exchanges its iterate and gradient tracker with its "
        "neighbours on 'topology' (gradient tracking). Both are first-order methods for the linear models: "
        "maxIter counts their rounds / iterations, and they need many more than L-BFGS. "
        "Supported: " + ", ".join(STRATEGIES),
        typeConverter=one_of("strategy", strategy_table.names),
    )

    if TYPE_CHECKING:  # made by with_getters and with_setters

        def getStrategy(self) -> str: ...

        def setStrategy(self, value: str) -> Self: ...

    def __init__(self, *args):
        super().__init__(*args)
        self._setDefault(strategy=DEFAULTS["strategy"])


@with_getters("device")
@with_setters("device")
class HasDevice(Params):
    """``device``: where a task's PyTorch kernels run."""

    device = Param(
        Params._dummy(),
        "device",
        "Device the partition kernels (and a KernelSVC model's transform) run on: 'auto' (CUDA when the "
        "executor's torch sees a GPU, else CPU), 'cpu', 'cuda' or 'cuda:N'.",
        typeConverter=one_of("device", DEVICES),
    )

    if TYPE_CHECKING:  # made by with_getters and with_setters

        def getDevice(self) -> str: ...

        def setDevice(self, value: str) -> Self: ...

    def __init__(self, *args):
        super().__init__(*args)
        self._setDefault(device=DEFAULTS["device"])


@with_getters("dtype")
@with_setters("dtype")
class HasDtype(Params):
    """``dtype``: the precision of the stored training copy."""

    dtype = Param(
        Params._dummy(),
        "dtype",
        "Precision the training copy of the features is stored in: 'float32' (default: half the memory) "
        "or 'float64'. The linear models compute in float64 either way (exact arithmetic on the stored "
        "values, optimizer state float64), so float32 differs from float64 only by the rounding of the "
        "input features to float32 (relative 6e-8). KernelSVC computes its features and Newton passes "
        "in this dtype.",
        typeConverter=one_of("dtype", DTYPES),
    )

    if TYPE_CHECKING:  # made by with_getters and with_setters

        def getDtype(self) -> str: ...

        def setDtype(self, value: str) -> Self: ...

    def __init__(self, *args):
        super().__init__(*args)
        self._setDefault(dtype=DEFAULTS["dtype"])


@with_getters("numWorkers")
@with_setters("numWorkers")
class HasNumWorkers(Params):
    """``numWorkers``: the tasks of a barrier stage."""

    numWorkers = Param(
        Params._dummy(),
        "numWorkers",
        "Barrier tasks of the 'allreduce' strategies (0 = as many as there are partitions, capped at the "
        "cluster's free task slots). The partitions' blocks are split among that many tasks.",
        typeConverter=TypeConverters.toInt,
    )

    if TYPE_CHECKING:  # made by with_getters and with_setters

        def getNumWorkers(self) -> int: ...

        def setNumWorkers(self, value: int) -> Self: ...

    def __init__(self, *args):
        super().__init__(*args)
        self._setDefault(numWorkers=DEFAULTS["numWorkers"])


@with_getters("localIter")
@with_setters("localIter")
class HasLocalIter(Params):
    """``localIter``: the averaging strategies' local iterations per round."""

    localIter = Param(
        Params._dummy(),
        "localIter",
        "Local L-BFGS / OWL-QN iterations per local problem and round of the averaging strategies (>= 1).",
        typeConverter=TypeConverters.toInt,
    )

    if TYPE_CHECKING:  # made by with_getters and with_setters

        def getLocalIter(self) -> int: ...

        def setLocalIter(self, value: int) -> Self: ...

    def __init__(self, *args):
        super().__init__(*args)
        self._setDefault(localIter=DEFAULTS["localIter"])


@with_getters("staleness")
@with_setters("staleness")
class HasStaleness(Params):
    """``staleness``: the parameter server's bound on how far a worker runs ahead."""

    staleness = Param(
        Params._dummy(),
        "staleness",
        "strategy='ssp': how many clocks (pushed gradients) a worker may run ahead of the slowest one "
        "(>= 0; 0 is bulk synchronous).",
        typeConverter=TypeConverters.toInt,
    )

    if TYPE_CHECKING:  # made by with_getters and with_setters

        def getStaleness(self) -> int: ...

        def setStaleness(self, value: int) -> Self: ...

    def __init__(self, *args):
        super().__init__(*args)
        self._setDefault(staleness=DEFAULTS["staleness"])


@with_getters("topology")
@with_setters("topology")
class HasTopology(Params):
    """``topology``: the graph gossip exchanges over."""

    topology = Param(
        Params._dummy(),
        "topology",
        "strategy='gossip': the graph the tasks exchange over: 'ring' (default: each task with its two "
        "neighbours) or 'complete' (every task with every other).",
        typeConverter=one_of("topology", TOPOLOGIES),
    )

    if TYPE_CHECKING:  # made by with_getters and with_setters

        def getTopology(self) -> str: ...

        def setTopology(self, value: str) -> Self: ...

    def __init__(self, *args):
        super().__init__(*args)
        self._setDefault(topology=DEFAULTS["topology"])


@with_getters("checkpointDir", "checkpointInterval")
@with_setters("checkpointDir", "checkpointInterval")
class HasCheckpointDir(HasCheckpointInterval):
    """``checkpointDir`` and MLlib's ``checkpointInterval``: where and how often a fit saves its
    optimizer's state (``optim.checkpoint``)."""

    checkpointDir = Param(
        Params._dummy(),
        "checkpointDir",
        "Directory (a local or mounted path; with 'allreduce' one the driver and the executors share) where the "
        "fit writes its optimizer's state every checkpointInterval iterations, and from which a later fit of the "
        "same data and Params resumes; removed when the fit succeeds. Unset: no checkpoints. The linear models' "
        "L-BFGS / OWL-QN fits and averaging rounds, and KernelSVC's feature map and Newton rounds; the others "
        "(L-BFGS-B, the normal solver) refuse it.",
        typeConverter=TypeConverters.toString,
    )

    if TYPE_CHECKING:  # made by with_getters and with_setters

        def getCheckpointDir(self) -> str: ...

        def setCheckpointDir(self, value: str) -> Self: ...

        def setCheckpointInterval(self, value: int) -> Self: ...

    def __init__(self, *args):
        super().__init__(*args)
        self._setDefault(checkpointInterval=DEFAULTS["checkpointInterval"])


class HasTrainingParams(HasStrategy, HasDevice, HasDtype, HasNumWorkers, HasCheckpointDir):
    """What every estimator trained by this library has: its strategy, device, storage precision, barrier
    tasks and checkpoints. The Params of one solver are mixed in only by the estimators that can use it."""


class HasTorchTrainingParams(HasTrainingParams, HasLocalIter, HasStaleness, HasTopology):
    """Every Param this library adds, for an estimator that can run every strategy (the linear models):
    ``HasTrainingParams`` plus the averaging, parameter-server and gossip Params."""


@with_setters("classWeight")
class HasClassWeight(Params):
    """``classWeight``: per-class weights, multiplied into ``weightCol`` (``data.class_weight``)."""

    classWeight = Param(
        Params._dummy(),
        "classWeight",
        "Per-class weights, as scikit-learn's class_weight: 'balanced' (class c weighs n / (k * n_c), n rows, "
        "k classes, n_c rows of class c) or a mapping {label: weight} (a class left out weighs 1). Each row's "
        "weight is its weightCol value (1 without one) times its class's weight. Unset: every class weighs 1. "
        "Keys must be labels of the data, weights finite and >= 0, with at least two classes left with weight.",
        typeConverter=to_class_weight,
    )

    if TYPE_CHECKING:  # made by with_setters

        def setClassWeight(self, value: str | dict[float, float]) -> Self: ...

    def getClassWeight(self) -> str | dict[float, float] | None:
        """Gets the value of :py:attr:`classWeight`, or None when unset."""
        return self.getOrDefault(self.classWeight) if self.isDefined(self.classWeight) else None
