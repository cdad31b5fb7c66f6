"""The Params every estimator shares: MLlib's (their rules and saved-file converters; pyspark gives their
descriptions and defaults) and this library's training Params (where and how a fit runs), declared once.

``DEFAULTS`` and ``RULES`` are read off these declarations: the strategies' options start from ``DEFAULTS``
(``strategies.table.StrategyOptions``); ``RULES`` are the rules every estimator starts from (an estimator's own
declarations add to or replace them: ``sparkml.params.estimators``).
"""

from __future__ import annotations

from sparkml.params import converters as c
from sparkml.params.declared import Declared, by_name, defaults, rules
from sparkml.params.rules import Rule, at_least

# the ``strategy`` values: ``auto`` and one per row of the strategy table (``sparkml.strategies.table``), which sits on
# a floor above and hands its reader down as it loads (``provide_strategy_names``), so a new row is a new value;
# until it loads (a saved model read without the estimators), these, which a test keeps equal to the table's rows
STRATEGIES = ("auto", "sync", "allreduce", "averaging", "allreduce-averaging", "ssp", "gossip")
_strategy_source = None  # the strategy table's ``names`` once it has loaded


def provide_strategy_names(names) -> None:
    """Install ``names()`` (the strategy table's reader) as the source of the ``strategy`` values."""
    global _strategy_source
    _strategy_source = names


def strategy_names() -> tuple:
    """The ``strategy`` values: the strategy table's, read at each call (``STRATEGIES`` until it loads)."""
    return STRATEGIES if _strategy_source is None else _strategy_source()


DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("float32", "float64")
TOPOLOGIES = ("ring", "complete")


def _local_path(directory):
    return "://" not in directory or directory.startswith("file:")


# ---- MLlib's own (pyspark.ml's description and default; MLlib's ParamValidators as rules) ----------------------
def _mllib(name, converter, type_, rule=None):
    return Declared(name, converter, type_, rule=rule)


FEATURES_COL = _mllib("featuresCol", c.to_string, "str")
LABEL_COL = _mllib("labelCol", c.to_string, "str")
PREDICTION_COL = _mllib("predictionCol", c.to_string, "str")
RAW_PREDICTION_COL = _mllib("rawPredictionCol", c.to_string, "str")
PROBABILITY_COL = _mllib("probabilityCol", c.to_string, "str")
WEIGHT_COL = _mllib("weightCol", c.to_string, "str")
MAX_ITER = _mllib("maxIter", c.to_int, "int", at_least(0))
TOL = _mllib("tol", c.to_float, "float", at_least(0))
REG_PARAM = _mllib("regParam", c.to_float, "float", at_least(0, finite=True))  # MLlib takes inf
ELASTIC_NET_PARAM = _mllib("elasticNetParam", c.to_float, "float", Rule(lambda v: 0 <= v <= 1, "must be in [0, 1]"))
FIT_INTERCEPT = _mllib("fitIntercept", c.to_boolean, "bool")
STANDARDIZATION = _mllib("standardization", c.to_boolean, "bool")
THRESHOLD = _mllib("threshold", c.to_float, "float")
AGGREGATION_DEPTH = _mllib("aggregationDepth", c.to_int, "int", at_least(2))
MAX_BLOCK_SIZE_IN_MB = _mllib("maxBlockSizeInMB", c.to_float, "float")
SEED = _mllib("seed", c.to_int, "int")
CHECKPOINT_INTERVAL = Declared(  # MLlib's name, this library's meaning and default (pyspark's mixin has none)
    "checkpointInterval",
    c.to_int,
    "int",
    "Iterations (Newton rounds, averaging rounds) between the checkpoints a fit writes when checkpointDir is set "
    "(>= 1).",
    default=10,
    rule=Rule(lambda v: v >= 1, "must be >= 1 when checkpointDir is set", only_with="checkpointDir"),
)

# ---- this library's ---------------------------------------------------------------------------------------
STRATEGY = Declared(
    "strategy",
    c.OneOf("strategy", strategy_names),
    "str",
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
    default="auto",
)
DEVICE = Declared(
    "device",
    c.OneOf("device", DEVICES),
    "str",
    "Device the partition kernels (and a KernelSVC model's transform) run on: 'auto' (CUDA when the "
    "executor's torch sees a GPU, else CPU), 'cpu', 'cuda' or 'cuda:N'.",
    default="auto",
)
DTYPE = Declared(
    "dtype",
    c.OneOf("dtype", DTYPES),
    "str",
    "Precision the training copy of the features is stored in: 'float32' (default: half the memory) "
    "or 'float64'. The linear models compute in float64 either way (exact arithmetic on the stored "
    "values, optimizer state float64), so float32 differs from float64 only by the rounding of the "
    "input features to float32 (relative 6e-8). KernelSVC computes its features and Newton passes "
    "in this dtype.",
    default="float32",
)
NUM_WORKERS = Declared(
    "numWorkers",
    c.to_int,
    "int",
    "Barrier tasks of the 'allreduce' strategies (0 = as many as there are partitions, capped at the "
    "cluster's free task slots). The partitions' blocks are split among that many tasks.",
    default=0,
    rule=at_least(0),
)
CHECKPOINT_DIR = Declared(
    "checkpointDir",
    c.to_string,
    "str",
    "Directory (a local or mounted path; with 'allreduce' one the driver and the executors share) where the "
    "fit writes its optimizer's state every checkpointInterval iterations, and from which a later fit of the "
    "same data and Params resumes; removed when the fit succeeds. Unset: no checkpoints. The linear models' "
    "L-BFGS / OWL-QN fits and averaging rounds, and KernelSVC's feature map and Newton rounds; the others "
    "(L-BFGS-B, the normal solver) refuse it.",
    rule=Rule(
        _local_path,
        "must be a local or mounted path (shared by the driver and the executors with strategy 'allreduce')",
        only_with="checkpointDir",
    ),
)
LOCAL_ITER = Declared(
    "localIter",
    c.to_int,
    "int",
    "Local L-BFGS / OWL-QN iterations per local problem and round of the averaging strategies (>= 1).",
    default=10,
    rule=at_least(1),
)
STALENESS = Declared(
    "staleness",
    c.to_int,
    "int",
    "strategy='ssp': how many clocks (pushed gradients) a worker may run ahead of the slowest one "
    "(>= 0; 0 is bulk synchronous).",
    default=3,
    rule=at_least(0),
)
TOPOLOGY = Declared(
    "topology",
    c.OneOf("topology", TOPOLOGIES),
    "str",
    "strategy='gossip': the graph the tasks exchange over: 'ring' (default: each task with its two "
    "neighbours) or 'complete' (every task with every other).",
    default="ring",
)
CLASS_WEIGHT = Declared(
    "classWeight",
    c.to_class_weight,
    "str | dict[float, float]",
    "Per-class weights, as scikit-learn's class_weight: 'balanced' (class c weighs n / (k * n_c), n rows, "
    "k classes, n_c rows of class c) or a mapping {label: weight} (a class left out weighs 1). Each row's "
    "weight is its weightCol value (1 without one) times its class's weight. Unset: every class weighs 1. "
    "Keys must be labels of the data, weights finite and >= 0, with at least two classes left with weight.",
)

# every estimator's: where it runs, in what precision, on how many barrier tasks, with what checkpoints
TRAINING = (STRATEGY, DEVICE, DTYPE, NUM_WORKERS, CHECKPOINT_DIR, CHECKPOINT_INTERVAL)
# the linear models', which run every strategy: the averaging, parameter-server and gossip Params too
SOLVER_OPTIONS = (LOCAL_ITER, STALENESS, TOPOLOGY)

_SHARED = by_name(
    (
        MAX_ITER,
        TOL,
        REG_PARAM,
        ELASTIC_NET_PARAM,
        AGGREGATION_DEPTH.with_default(2),  # MLlib's default, which a strategy reads
        *TRAINING,
        *SOLVER_OPTIONS,
    )
)
DEFAULTS = defaults(_SHARED.values())
RULES = rules(_SHARED.values())
