"""A ``Pipeline`` in the search: the stages before the estimator fitted and applied once per split.

pyspark's validators call ``Pipeline.fitMultiple``, which is ``Estimator``'s: one ``Pipeline.fit`` per param
map, so every map fits the stages before the estimator again and hands the estimator a new, uncached DataFrame
(which it converts again). When the grid sets Params of the last stage only, those stages fit the same model
for every map: here they are fitted once on the split's training rows, the split's training and validation
rows are transformed once, and the last stage runs the grid as a bare estimator would (one conversion, the
regularization path, the one scoring pass). Each map's model is pyspark's ``PipelineModel`` of the fitted
stages and that map's model, as ``Pipeline.fit(train, paramMap)`` returns it.

When every stage before the estimator is a ``Transformer`` (a ``VectorAssembler``, a fitted model: nothing is
fitted per split), their output is the same for every split: the dataset, with each row's fold draw already
drawn, is transformed once and the search runs on it as on a bare estimator's (``transformed_search``), so it
is converted once for every split and the refit (``sparkml.tuning.convert_once``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.ml import Estimator, PipelineModel
    from pyspark.sql import Column, DataFrame

    from sparkml.tuning.convert_once import ConvertedOnce


def last_stage_search(estimator: Estimator, param_maps: Sequence[dict]) -> tuple[list[Any], Any] | None:
    """(the stages before the last, the last stage) of a pyspark ``Pipeline`` whose grid sets the last stage's
    Params only; None for anything else (another estimator, an empty pipeline, a map over an earlier stage)."""
    from pyspark.ml import Pipeline

    if type(estimator) is not Pipeline or not estimator.isDefined(estimator.stages):
        return None
    stages = list(estimator.getStages())
    if not stages:
        return None
    last = stages[-1]
    if any(stage.uid == last.uid for stage in stages[:-1]):
        return None
    if any(getattr(param, "parent", None) != last.uid for param_map in param_maps for param in param_map):
        return None
    return stages[:-1], last


def fit_prefix(stages: Sequence[Any], train: DataFrame) -> PipelineModel:
    """The stages before the estimator, fitted on ``train`` as ``Pipeline.fit`` fits them."""
    from pyspark.ml import Pipeline, PipelineModel

    if not stages:
        return PipelineModel([])
    return Pipeline(stages=list(stages)).fit(train)


def with_prefix(prefix: PipelineModel, model: Any) -> PipelineModel:
    """The map's fitted pipeline: the fitted stages before the estimator, then the map's model."""
    from pyspark.ml import PipelineModel

    return PipelineModel([*prefix.stages, model])


@dataclasses.dataclass
class TransformedSearch:
    """A search of a ``Pipeline`` of Transformers then one of this library's estimators, run on the dataset
    transformed once: ``frame`` (the transformed rows with their fold draws), each row's ``fold`` id, the
    ``last`` stage searched as a bare estimator, converted ``once``, and the fitted ``prefix`` each model is put
    behind."""

    prefix: PipelineModel
    last: Any
    frame: DataFrame
    fold: Column
    once: ConvertedOnce


def transformed_search(last_stage: tuple[list[Any], Any], param_maps: Sequence[dict], draws, drawn: str):
    """The ``TransformedSearch`` of a ``Pipeline`` whose grid sets its last stage's Params only (``last_stage``:
    ``last_stage_search``'s answer) and whose earlier stages are all Transformers, on ``draws`` = (the dataset
    with its fold draws, each row's fold id: ``convert_once.random_fold_ids``, ``convert_once.column_fold_ids``),
    whose fold ids are read from the column ``drawn``; or None where it does not apply: a stage that is fitted, a
    stage that drops ``drawn``, or a dataset that cannot be converted once."""
    from pyspark.ml import Estimator as StockEstimator
    from pyspark.ml import PipelineModel as StockPipelineModel

    from sparkml.base.search_support import search_support
    from sparkml.tuning.convert_once import convert_once

    stages, last = last_stage
    if draws is None or any(isinstance(stage, StockEstimator) for stage in stages):
        return None
    df, fold = draws
    prefix = StockPipelineModel(list(stages))
    frame = prefix.transform(df)
    if drawn not in frame.columns:
        return None
    once = convert_once(search_support(last, frame, param_maps).conversion, frame, (frame, fold))
    if once is None:
        return None
    return TransformedSearch(prefix, last, frame, fold, once)
