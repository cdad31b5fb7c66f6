"""A ``Pipeline`` in the search: the stages before the estimator fitted and applied once per split.

pyspark's validators call ``Pipeline.fitMultiple``, which is ``Estimator``'s: one ``Pipeline.fit`` per param
map, so every map fits the stages before the estimator again and hands the estimator a new, uncached DataFrame
(which it converts again). When the grid sets Params of the last stage only, those stages fit the same model
for every map: here they are fitted once on the split's training rows, the split's training and validation
rows are transformed once, and the last stage runs the grid as a bare estimator would (one conversion, the
regularization path, the one scoring pass). Each map's model is pyspark's ``PipelineModel`` of the fitted
stages and that map's model, as ``Pipeline.fit(train, paramMap)`` returns it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.ml import Estimator, PipelineModel
    from pyspark.sql import DataFrame


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
