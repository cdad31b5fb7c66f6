"""What ``CrossValidator`` and ``TrainValidationSplit`` share: fitting a split's grid and scoring it.

pyspark's validators run, per split, ``parallelism`` threads that each take the next (index, model) of
``estimator.fitMultiple(train, maps)`` and score it at once with ``evaluator.evaluate(model.transform(...))``.
Here the threads only fit (``fit_grid``: the same iterator pulled from as many threads, so ``fitMultiple`` shares
each conversion of the fold and solves the grid as it does under pyspark); once every map of the split is fitted,
``sparkml.tuning.scores.fold_metrics`` scores all of them in one pass, or, where that pass does not apply, each
model is evaluated as pyspark evaluates it (``evaluate_each``), from as many threads. Which estimator a split
fits, on which rows, is the search's plan (``sparkml.tuning.plan``).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import numpy as np

from sparkml.tuning.scores import fold_metrics
from sparkml.tuning.threads import in_threads

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from pyspark.ml import Estimator
    from pyspark.ml.evaluation import Evaluator
    from pyspark.sql import DataFrame


def is_persisted(df: DataFrame) -> bool:
    """Whether ``df``'s rows are held by Spark's cache (``cache()``/``persist()`` of this plan)."""
    try:
        level = df.storageLevel
    except Exception:  # a session that cannot say: treat as not held
        return False
    return bool(level.useMemory or level.useDisk)


@contextlib.contextmanager
def cached(df: DataFrame, source: DataFrame | None = None) -> Iterator[DataFrame]:
    """``df`` cached while the block runs, as the running pyspark caches a validator's splits (its
    ``_cache_spark_dataset`` where it has one, else ``cache()``), unpersisted after. A split of a ``source``
    that is itself cached is a filter over Spark's cache, and is read once per path group and once to score:
    it is used as it is, not copied into the cache a second time (a pass over the split and a copy of it, for
    nothing the cached source does not already give)."""
    import pyspark.ml.util as ml_util

    if source is not None and is_persisted(source):
        yield df
        return

    cache_dataset = getattr(ml_util, "_cache_spark_dataset", None)  # newer pyspark lines (not 3.5 or 4.0)
    if cache_dataset is not None:
        with cache_dataset(df) as kept:
            yield kept
        return
    df.cache()
    try:
        yield df
    finally:
        df.unpersist()


def fit_grid(estimator: Estimator, train: DataFrame, param_maps: Sequence[dict], parallelism: int) -> list[Any]:
    """The models of every map, by index: ``estimator.fitMultiple``'s iterator pulled from ``parallelism``
    threads, as pyspark's validators pull it."""
    fits = estimator.fitMultiple(train, param_maps)
    models: list[Any] = [None] * len(param_maps)
    for index, model in in_threads(train.sparkSession, lambda: next(fits), len(param_maps), parallelism):
        models[index] = model
    return models


def evaluate_each(models, param_maps, evaluator, validation, parallelism) -> list[float]:
    """pyspark's scoring: ``evaluator.evaluate(model.transform(validation, paramMap))`` per model."""
    remaining = iter(range(len(models)))

    def one():
        j = next(remaining)
        return j, evaluator.evaluate(models[j].transform(validation, param_maps[j]))

    metrics = [0.0] * len(models)
    for j, metric in in_threads(validation.sparkSession, one, len(models), parallelism):
        metrics[j] = metric
    return metrics


def fit_and_score(
    estimator, param_maps, evaluator, train, validation, parallelism, validation_blocks=None
) -> tuple[list[float], list[Any]]:
    """(metric of each map on ``validation``, its model fitted on ``train``), by index: the grid fitted
    (``fit_grid``), then scored in one pass where it applies, else model by model. ``validation_blocks``:
    ``validation``'s rows as the search's conversion stored them (``sparkml.tuning.convert_once.ValidationBlocks``),
    or None."""
    models = fit_grid(estimator, train, param_maps, parallelism)
    metrics = fold_metrics(models, param_maps, evaluator, validation, parallelism, validation_blocks)
    if metrics is None:
        metrics = evaluate_each(models, param_maps, evaluator, validation, parallelism)
    return metrics, models


def best_index(metrics: Sequence[float], evaluator: Evaluator) -> int:
    """The map whose metric is best: the first largest, or smallest when the evaluator says smaller is better."""
    return int(np.argmax(metrics) if evaluator.isLargerBetter() else np.argmin(metrics))
