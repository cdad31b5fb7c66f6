"""The one scoring pass of a validation fold: every model of a param grid scored together, each model's metric
computed as ``evaluator.evaluate(model.transform(validation, paramMap))`` would.

pyspark's ``CrossValidator`` runs one Spark job per model to score the fold (its ``transform``) and one or more
per metric. When every model of the fold is a linear model of this library (its ``ScoringSpec`` has no feature
map) and the evaluator is exactly one of pyspark's ``RegressionEvaluator``, ``MulticlassClassificationEvaluator``
or ``BinaryClassificationEvaluator`` (a subclass may compute anything, so it is not), one ``mapInArrow`` over
the fold's features, label and weight scores all k models in one product per batch
(``sparkml.tuning.batches``):

* regression and multiclass: each task returns the sufficient statistics of its rows (label moments and error
  sums; weighted confusion entries and log-loss sums), the driver adds them and computes every metric with
  Spark's formulas (``sparkml.tuning.metrics``): one job for the whole grid;
* binary: the pass returns each row's label, weight and k scores. Up to ``DRIVER_VALUES`` numbers in all
  (about a 10-million-row fold for a dozen models), they come to the driver as one Arrow table and each
  model's area under the ROC or PR curve is computed there with Spark's formulas (``sparkml.tuning.curves``):
  one job for the grid, where the stock evaluator sorts the fold once per model. Spark down-samples the curve
  (``numBins``) per partition of its sorted scores, whose range boundaries come from a sample seeded by the
  RDD's id, so once a fold has 2 numBins distinct scores not even two runs of the stock evaluator agree to the
  last digits; the driver's curve is down-sampled as one partition, which is Spark's result when its sort has
  one partition and otherwise differs by the points at its partition boundaries (about 1e-7 relative at
  numBins 1000). Larger folds: the pass writes a cached frame of (label, weight, score_1..score_k), partitioned
  as the fold, and the stock evaluator runs on each model's score column: exactly its computation on the same
  scores, k jobs on a narrow cached frame instead of k scorings of the fold.

Where the search converted its dataset once (``sparkml.tuning.convert_once``), the fold's validation rows are already
stored on the executors beside their fold id: the pass reads them there (``TrainingData.map_folds``) instead of
from the JVM, when they hold the evaluator's columns (its label the fit's, its weight the fit's or none). The
stored features are rounded to the estimator's ``dtype`` (float32 by default, relative 6e-8), so each metric
is pyspark's to about 1e-7 relative (float64: to the rounding of the sums).

Anything else (another evaluator, a metric it does not know, a kernel model, columns that do not line up with
the models' outputs, a Spark Connect session) returns None and the caller evaluates model by model, as pyspark
does; so does a fold whose rows the stock path would treat otherwise (``batches``: null labels, refused
weights, irregular feature vectors), so that fold's result or error is the stock one.
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
from pyspark.ml.evaluation import BinaryClassificationEvaluator, MulticlassClassificationEvaluator, RegressionEvaluator
from pyspark.ml.functions import vector_to_array
from pyspark.ml.linalg import VectorUDT
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, DoubleType, NumericType, StructField, StructType

from sparkml.base.search_support import ScoredTogether
from sparkml.data.first_vector import UnreadableVector, first_vector, is_sparse
from sparkml.runtime.compat import to_arrow
from sparkml.runtime.session_kind import is_connect
from sparkml.scoring.kinds import OUTPUTS
from sparkml.scoring.stack import ModelStack
from sparkml.tuning import curves
from sparkml.tuning.batches import (
    BAD_COLUMN,
    SCORE_PREFIX,
    STATS_SCHEMA,
    PassPlan,
    block_scores,
    block_statistics,
    scores_partition,
    stats_partition,
)
from sparkml.tuning.metrics import (
    MULTICLASS_METRICS,
    REGRESSION_METRICS,
    REGRESSION_SUMS,
    Confusion,
    LabelMoments,
    MetricUndefined,
    multiclass_metric,
    regression_metric,
)
from sparkml.tuning.threads import in_threads

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.ml.evaluation import Evaluator
    from pyspark.sql import DataFrame

logger = logging.getLogger("sparkml")
DENSE_FEATURES = 1024  # up to this many features, every batch is read dense (a row costs at most 8 KiB)
DRIVER_VALUES = 128_000_000  # rows x (models + 2) of a binary fold computed on the driver (1 GiB of doubles)

KINDS = {RegressionEvaluator: "regression", MulticlassClassificationEvaluator: "multiclass"}
KINDS[BinaryClassificationEvaluator] = "binary"
BINARY_METRICS = ("areaUnderROC", "areaUnderPR")


class NotOnePass(Exception):
    """Why the one pass does not apply (the caller evaluates model by model)."""


def _optional_column(evaluator, name):
    """The evaluator's optional column Param ``name`` (weightCol), or None when unset or empty."""
    if not evaluator.hasParam(name) or not evaluator.isDefined(name):
        return None
    return evaluator.getOrDefault(name) or None


def _output_columns(model, spec) -> dict[str, str]:
    """{column name: output key} of what ``model.transform`` adds (an output named "" is not added)."""
    columns = {}
    for key in spec.outputs:
        param = OUTPUTS[key].param
        name = model.getOrDefault(param) if model.hasParam(param) else OUTPUTS[key].column
        if name:
            columns[name] = key
    return columns


def _scored(model, param_map):
    """The model ``transform(dataset, param_map)`` scores with: a copy carrying the map's values."""
    return model.copy(param_map) if param_map else model


def plan_pass(models: Sequence[Any], param_maps: Sequence[dict], evaluator: Evaluator, validation: DataFrame):
    """(``PassPlan``, features column, label column, weight column) of the one pass over ``validation`` for
    ``models`` (fitted with ``param_maps``); ``NotOnePass`` naming why it does not apply."""
    kind = KINDS.get(type(evaluator))
    if kind is None:
        raise NotOnePass(f"the evaluator is a {type(evaluator).__name__}")
    if is_connect(validation):
        raise NotOnePass("a Spark Connect session")
    metric = evaluator.getOrDefault("metricName")
    known = {"regression": REGRESSION_METRICS, "multiclass": MULTICLASS_METRICS, "binary": BINARY_METRICS}[kind]
    if metric not in known:
        raise NotOnePass(f"metric {metric!r}")
    scored = [_scored(m, p) for m, p in zip(models, param_maps)]
    if not scored or not all(isinstance(m, ScoredTogether) for m in scored):
        raise NotOnePass("a model that does not say what it scores with (scoringSpec)")
    specs = [m.scoringSpec() for m in scored]
    if any(s.feature_map is not None for s in specs):
        raise NotOnePass("a kernel model")
    if len({s.n_features for s in specs}) != 1 or len({m.getFeaturesCol() for m in scored}) != 1:
        raise NotOnePass("models of different features")
    outputs = [_output_columns(m, s) for m, s in zip(scored, specs)]
    if any(o != outputs[0] for o in outputs):
        raise NotOnePass("models whose output columns differ")
    columns, schema = outputs[0], validation.schema
    features, label = scored[0].getFeaturesCol(), evaluator.getOrDefault("labelCol")
    weight = _optional_column(evaluator, "weightCol")
    present = set(validation.columns)
    if present & set(columns):
        raise NotOnePass("an output column the validation data already has")
    if features not in present or not isinstance(schema[features].dataType, VectorUDT):
        raise NotOnePass(f"features column {features!r}")
    for name in (label, weight):
        if name is not None and (name not in present or not isinstance(schema[name].dataType, NumericType)):
            raise NotOnePass(f"column {name!r}")

    def output_key(param, vector):
        key = columns.get(evaluator.getOrDefault(param))
        if key is None or (vector is not None and OUTPUTS[key].vector != vector):
            raise NotOnePass(f"the evaluator's {param} is not a model output it can read")
        return key

    fields: dict[str, Any] = {}
    if kind == "binary":
        key = output_key("rawPredictionCol", None)
        if OUTPUTS[key].vector and any(len(s.intercepts) > 2 for s in specs):
            raise NotOnePass("score vectors of more than 2 classes")  # Spark 4 refuses them, 3.5 reads entry 1
        fields = {"score": key, "score_vector": OUTPUTS[key].vector, "label_name": label, "weight_name": weight}
        reserved = {BAD_COLUMN, *(f"{SCORE_PREFIX}{j}" for j in range(len(specs)))}
        if label in reserved or weight in reserved or label == weight:
            raise NotOnePass("the label and weight columns' names")
    else:
        fields = {"prediction": output_key("predictionCol", False), "weight_name": weight}
        if metric == "logLoss":
            eps = evaluator.getOrDefault("eps")
            if not 0 < eps < 0.5:
                raise NotOnePass(f"eps {eps}")
            fields.update(probability=output_key("probabilityCol", True), log_loss=True, eps=float(eps))
    read = (fields.get("prediction"), fields.get("probability"), fields.get("score"))
    keys = tuple(dict.fromkeys(k for k in read if k))
    return PassPlan(ModelStack(tuple(specs)), kind, keys, **fields), features, label, weight


def fold_metrics(
    models, param_maps, evaluator, validation, parallelism: int = 1, blocks: Any = None
) -> list[float] | None:
    """Each model's metric on ``validation`` from one pass (module docstring); None where the pass does not
    apply, or the fold holds rows the stock path treats otherwise: the caller evaluates model by model.
    ``parallelism``: the threads that run the binary evaluator's k jobs. ``blocks``: ``validation``'s rows as
    the search's conversion stored them (``sparkml.tuning.convert_once.ValidationBlocks``), scored there when they
    hold what the evaluator reads, or None."""
    try:
        plan, features, label, weight = plan_pass(models, param_maps, evaluator, validation)
    except NotOnePass as why:
        logger.info("the validation fold is scored model by model: %s", why)
        return None
    rows = blocks.rows if blocks is not None else None
    try:
        k = len(plan.stack.specs)
        if blocks is not None and blocks.serves(features, label, weight):
            if plan.kind != "binary" or blocks.rows * (k + 2) <= DRIVER_VALUES:
                return _metrics_from_blocks(plan, evaluator, blocks)
        if plan.kind == "binary":
            return _binary_metrics(plan, evaluator, validation, features, label, weight, parallelism, rows)
        return _metrics_from_stats(plan, evaluator, validation, features, label, weight)
    except NotOnePass as why:
        logger.info("the validation fold is scored model by model: %s", why)
    except Exception as e:  # a vector the JVM refuses to convert, ...: the stock path meets it as it would
        if "cancel" in str(e).lower():
            raise
        logger.warning(
            "the one scoring pass failed (%s); the validation fold is scored model by model",
            str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__,
        )
    return None


def _features(validation, features, n_features):
    """The pass's features column ``x``: the vectors as arrays of doubles (``vector_to_array``: converted in the
    JVM, they reach Arrow about twice as fast as the vector struct), unless there are more than
    ``DENSE_FEATURES`` of them and the first vector is sparse (then the struct, which keeps sparse rows sparse);
    a null vector stays null (the batch is irregular)."""
    column = F.col(features)
    if n_features <= DENSE_FEATURES:
        return F.when(column.isNotNull(), vector_to_array(column, "float64")).alias("x")
    try:
        v = first_vector(validation, features)
    except UnreadableVector:  # the struct, and the pass finds it irregular
        v = None
    if v is None or is_sparse(v):
        return column.alias("x")
    return F.when(column.isNotNull(), vector_to_array(column, "float64")).alias("x")


def _metrics_from_stats(plan, evaluator, validation, features, label, weight):
    w = F.col(weight).cast("double") if weight else F.lit(1.0)
    y = F.col(label).cast("double")
    selected = validation.select(_features(validation, features, plan.n_features), y.alias("y"), w.alias("w"))
    rows = selected.mapInArrow(lambda batches: stats_partition(batches, plan), STATS_SCHEMA).collect()
    return _reduce_stats(plan, evaluator, [tuple(r) for r in rows])


def _reduce_stats(plan, evaluator, rows):
    """Each model's metric from the (part, model, stats) rows of every partition (``batches.FoldStatistics``)."""
    k = len(plan.stack.specs)
    if any(part == "irregular" for part, _, _ in rows):
        raise NotOnePass("rows the evaluator refuses or vectors the models cannot score")
    metric = evaluator.getOrDefault("metricName")
    if plan.kind == "regression":
        labels, sums = LabelMoments(), np.zeros((k, REGRESSION_SUMS))
        for part, model, stats in rows:
            values = np.frombuffer(stats, dtype=np.float64)
            if part == "label":
                labels = labels.merge(LabelMoments(*values.tolist()))
            else:
                sums[model] += values
        through_origin = bool(evaluator.getOrDefault("throughOrigin"))
        return [regression_metric(metric, through_origin, labels, sums[j]) for j in range(k)]
    confusions = [Confusion({}) for _ in range(k)]
    for _, model, stats in rows:
        values = np.frombuffer(stats, dtype=np.float64)
        c = confusions[model]
        c.log_loss_sum += float(values[0])
        c.log_loss_weight += float(values[1])
        for label_value, prediction, v in values[2:].reshape(-1, 3).tolist():
            key = (label_value, prediction)
            c.entries[key] = c.entries.get(key, 0.0) + v
    try:
        return [
            multiclass_metric(metric, c, evaluator.getOrDefault("metricLabel"), evaluator.getOrDefault("beta"))
            for c in confusions
        ]
    except MetricUndefined as e:
        raise NotOnePass(str(e)) from None


def _binary_metrics(plan, evaluator, validation, features, label, weight, parallelism, rows=None):
    schema = validation.schema
    carried = [F.col(label).alias("y")] + ([F.col(weight).alias("w")] if weight else [])
    selected = validation.select(_features(validation, features, plan.n_features), *carried)
    fields = [StructField(BAD_COLUMN, BooleanType()), StructField(label, schema[label].dataType)]
    if weight:
        fields.append(StructField(weight, schema[weight].dataType))
    fields += [StructField(f"{SCORE_PREFIX}{j}", DoubleType()) for j in range(len(plan.stack.specs))]
    frame = selected.mapInArrow(lambda batches: scores_partition(batches, plan), StructType(fields))
    k = len(plan.stack.specs)
    if (validation.count() if rows is None else rows) * (k + 2) <= DRIVER_VALUES:
        return _binary_metrics_on_driver(to_arrow(frame), evaluator, label, weight, k)
    frame = frame.cache()
    try:
        if frame.agg(F.max(BAD_COLUMN)).first()[0]:  # also fills the cache
            raise NotOnePass("vectors the models cannot score")
        raw = evaluator.getParam("rawPredictionCol")
        remaining = iter(range(len(plan.stack.specs)))

        def one():
            j = next(remaining)
            return j, evaluator.copy({raw: f"{SCORE_PREFIX}{j}"}).evaluate(frame)

        metrics = [0.0] * len(plan.stack.specs)
        for j, metric in in_threads(validation.sparkSession, one, len(metrics), parallelism):
            metrics[j] = metric
        return metrics
    finally:
        frame.unpersist()


def _column(table, name) -> np.ndarray:
    """A numeric column of the collected pass as float64; ``NotOnePass`` where it holds a null."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column = table.column(name)
    if column.null_count:
        raise NotOnePass(f"nulls in column {name!r}")
    return np.asarray(pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)


def _binary_metrics_on_driver(table, evaluator, label, weight, k):
    """Each model's area from the collected (label, weight, scores) of the fold; ``NotOnePass`` for rows whose
    stock evaluation would differ or fail (irregular vectors, a null label, and ``_areas``'s)."""
    if table.num_rows and np.asarray(table.column(BAD_COLUMN).to_numpy(zero_copy_only=False)).any():
        raise NotOnePass("vectors the models cannot score")
    y = _column(table, label)
    w = _column(table, weight) if weight else np.ones(table.num_rows)
    return _areas(evaluator, y, w, [_column(table, f"{SCORE_PREFIX}{j}") for j in range(k)])


def _areas(evaluator, y, w, scores):
    """Each model's area under the evaluator's curve (``sparkml.tuning.curves``) from the fold's labels,
    weights and each model's scores; ``NotOnePass`` for a weight Spark refuses, or a score that is not finite
    or a signed zero beside an unsigned one (which Spark keeps as two distinct scores)."""
    if not (np.isfinite(w).all() and (w >= 0).all()):
        raise NotOnePass("weights Spark's evaluator refuses")
    metric, num_bins = evaluator.getOrDefault("metricName"), int(evaluator.getOrDefault("numBins"))
    for s in scores:
        zeros = s == 0
        if not np.isfinite(s).all() or (zeros.any() and len(set(np.signbit(s[zeros]).tolist())) > 1):
            raise NotOnePass("scores that are not finite, or zeros of both signs")
    # each area is a sort of the fold's scores: numpy sorts without the GIL, so the models' curves run side by side
    with ThreadPoolExecutor(max(1, min(len(scores), os.cpu_count() or 1))) as pool:
        return list(pool.map(lambda s: curves.area(metric, s, y, w, num_bins), scores))


def _metrics_from_blocks(plan, evaluator, blocks):
    """Each model's metric from the fold's validation rows as the search's conversion stored them
    (``blocks``: ``sparkml.tuning.convert_once.ValidationBlocks``): one job where they are, no row read from the JVM.
    Binary: each partition returns its rows' labels, weights and k scores; the others their statistics."""
    if plan.kind != "binary":
        return _reduce_stats(
            plan, evaluator, [r for rows in blocks.map(partial(block_statistics, plan=plan)) for r in rows]
        )
    parts = blocks.map(partial(block_scores, plan=plan))
    k = len(plan.stack.specs)
    y = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0)
    w = np.concatenate([p[1] for p in parts]) if parts else np.ones(0)
    scores = np.concatenate([p[2] for p in parts]) if parts else np.zeros((0, k))
    return _areas(evaluator, y, w, [np.ascontiguousarray(scores[:, j]) for j in range(k)])
