"""A search's plan, decided once: how ``CrossValidator`` and ``TrainValidationSplit`` search a grid.

``plan_search`` reads the estimator, the grid, the evaluator and the dataset once, before any Spark job of the
search, and returns None (pyspark's own ``_fit`` runs the search) or a ``SearchPlan`` that the validator follows
split by split. The estimator searched is the estimator itself, or the last stage of a ``Pipeline`` whose grid
sets that stage's Params only (``sparkml.tuning.pipeline``); it must say its grid's models are scored together
(``sparkml.base.search_support``), the evaluator must be exactly one of pyspark's three (``scores.KINDS``) and
the session a classic one. The routes:

======================  ==============================================================================
``converted once``      the dataset converted once with each row's fold id, each split's fits lent their
                        rows of it, each validation split scored from the stored rows, the refit on the
                        whole conversion (``sparkml.tuning.convert_once``)
``transformed once``    a ``Pipeline`` of Transformers, then the estimator: the dataset transformed once and
                        then searched as above (``pipeline.transformed_search``)
``stages per split``    a ``Pipeline`` whose earlier stages are fitted: they are fitted and applied once per
                        split, the last stage's grid fitted on what they output
``each split``          each split's fits convert its own (cached) training rows: the folds cannot be read
                        as ids (a fractional ``foldCol``), or the maps' fits convert differently
======================  ==============================================================================

Whatever the route, a split's grid is fitted with one ``fitMultiple`` and scored in one pass
(``validator.fit_and_score``), and each model is what ``estimator.fit(train, paramMap)`` returns.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sparkml.base.search_support import search_support
from sparkml.runtime.session_kind import is_connect
from sparkml.tuning.convert_once import convert_once, fold_training, whole_dataset
from sparkml.tuning.pipeline import fit_prefix, last_stage_search, transformed_search, with_prefix
from sparkml.tuning.scores import KINDS
from sparkml.tuning.validator import cached, fit_and_score

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pyspark.ml import PipelineModel
    from pyspark.ml.evaluation import Evaluator
    from pyspark.sql import Column, DataFrame

    from sparkml.tuning.convert_once import ConvertedOnce

    Split = tuple[DataFrame, DataFrame]


@dataclass
class SearchPlan:
    """How a search runs (module docstring). ``estimator``: what the best map is refitted with; ``searched``:
    what each split's grid is fitted with (the estimator, or its ``Pipeline``'s last stage); ``data``: the rows
    the search splits and refits (the dataset, or its transformed rows); ``once``: their one conversion;
    ``prefix``: the fitted Transformers every model is put behind; ``stages``: the stages fitted per split;
    ``fold``: each row's fold id in ``data`` where the splits are read from it."""

    route: str
    estimator: Any
    searched: Any
    param_maps: Sequence[dict]
    evaluator: Evaluator
    data: DataFrame
    once: ConvertedOnce | None = None
    prefix: PipelineModel | None = None
    stages: list[Any] | None = None
    fold: Column | None = None

    def splits(self, count: int, stock: Callable[[], Sequence[Split]]) -> Sequence[Split]:
        """The (training, validation) rows of each of the ``count`` splits: the validator's own (``stock``:
        pyspark's filters of the dataset), or, when the search runs on transformed rows, those rows by fold id."""
        if self.fold is None:
            return stock()
        return [(self.data.filter(self.fold != i), self.data.filter(self.fold == i)) for i in range(count)]

    def search_split(self, index: int, train: DataFrame, validation: DataFrame, parallelism: int):
        """(metric of each map on ``validation``, its model fitted on ``train``) of split ``index``. Rows the
        split's fits convert themselves are cached first, and the validation rows too unless they filter a
        cached ``data``, as pyspark caches them."""
        kept = cached(train, self.data) if self.once is None else contextlib.nullcontext(train)
        with kept as train, cached(validation, self.data) as validation:
            with fold_training(self.once, index, train) as blocks:
                if self.stages is None:
                    metrics, models = fit_and_score(
                        self.searched, self.param_maps, self.evaluator, train, validation, parallelism, blocks
                    )
                    return metrics, [self.wrap(m) for m in models]
                prefix = fit_prefix(self.stages, train)
                metrics, models = fit_and_score(
                    self.searched,
                    self.param_maps,
                    self.evaluator,
                    prefix.transform(train),
                    prefix.transform(validation),
                    parallelism,
                )
                return metrics, [with_prefix(prefix, m) for m in models]

    def refit(self, param_map: dict) -> Any:
        """The model of ``param_map`` fitted on the whole dataset (lent the search's conversion, if any)."""
        with whole_dataset(self.once, self.data):
            return self.wrap(self.estimator.fit(self.data, param_map))

    def wrap(self, model: Any) -> Any:
        """A model of the searched estimator as the search returns it: behind the fitted Transformers, if any."""
        return model if self.prefix is None else with_prefix(self.prefix, model)

    def release(self) -> None:
        """Releases the search's conversion, if any."""
        if self.once is not None:
            self.once.release()


def plan_search(
    estimator: Any,
    param_maps: Sequence[dict],
    evaluator: Evaluator,
    dataset: DataFrame,
    draws: tuple[DataFrame, Column] | None,
    drawn: str,
) -> SearchPlan | None:
    """The search's plan, or None where pyspark's own ``_fit`` runs it (module docstring). ``draws``: (the dataset
    with the validator's fold draws, each row's fold id), or None where the folds cannot be read as ids;
    ``drawn``: the column the fold ids are read from."""
    if type(evaluator) not in KINDS or is_connect(dataset):
        return None
    last_stage = last_stage_search(estimator, param_maps)
    searched = estimator if last_stage is None else last_stage[1]
    support = search_support(searched, dataset, param_maps)
    if not support.scored_together:
        return None
    common = dict(estimator=estimator, searched=searched, param_maps=param_maps, evaluator=evaluator, data=dataset)
    if last_stage is None:
        once = convert_once(support.conversion, dataset, draws)
        return SearchPlan("converted once" if once is not None else "each split", **common, once=once)
    staged = transformed_search(last_stage, param_maps, draws, drawn)
    if staged is not None:
        common.update(estimator=staged.last, data=staged.frame)
        return SearchPlan("transformed once", **common, once=staged.once, prefix=staged.prefix, fold=staged.fold)
    return SearchPlan("stages per split", **common, stages=last_stage[0])
