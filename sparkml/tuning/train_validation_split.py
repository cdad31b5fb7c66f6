"""``TrainValidationSplit``: pyspark's, with the validation split scored for the whole grid in one pass."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from pyspark.ml import tuning as stock
from pyspark.sql import functions as F

from sparkml.runtime.cancellation import cancellable
from sparkml.tuning import persistence
from sparkml.tuning.convert_once import convert_once, draw_column, fold_training, random_fold_ids, whole_dataset
from sparkml.tuning.grid import check_param_maps, check_search_params
from sparkml.tuning.pipeline import last_stage_search, transformed_search, unwrapped
from sparkml.tuning.validator import best_index, cached, fit_and_score, one_pass_applies

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from sparkml.tuning.convert_once import ConvertedOnce


class TrainValidationSplit(stock.TrainValidationSplit):
    """pyspark.ml's ``TrainValidationSplit`` (same Params, defaults, split and fitted
    ``TrainValidationSplitModel``) that scores the validation split once for the whole grid.

    As ``sparkml.tuning.CrossValidator`` does for each fold: with one of this library's linear estimators and
    exactly pyspark's ``RegressionEvaluator``, ``MulticlassClassificationEvaluator`` or
    ``BinaryClassificationEvaluator``, the grid is fitted with one ``estimator.fitMultiple`` and its k models
    scored in one pass over the validation rows, each metric pyspark's on ``model.transform(validation)``
    (``validationMetrics``); a ``Pipeline`` ending in such an estimator, with a grid over its last stage only,
    fits its earlier stages once. Anything else runs pyspark's own ``_fit``. Saved as pyspark's
    ``TrainValidationSplit``; ``load`` returns this class.
    """

    def _split(self, dataset: DataFrame) -> tuple[DataFrame, DataFrame]:
        """(train, validation): pyspark's split, a row in validation when its ``rand(seed)`` is at least
        ``trainRatio`` (the lines of pyspark's ``TrainValidationSplit._fit``, which keeps them inline)."""
        rand_col = draw_column(self.uid)
        df = dataset.select("*", F.rand(self.getOrDefault(self.seed)).alias(rand_col))
        condition = df[rand_col] >= self.getOrDefault(self.trainRatio)
        return df.filter(~condition), df.filter(condition)

    def _fit(self, dataset: DataFrame) -> stock.TrainValidationSplitModel:
        """The search (``_search``); a cancelled job of it, the search's own or a fit's, ends it with
        ``FitCancelled`` (``sparkml.runtime.cancellation``)."""
        with cancellable(dataset.sparkSession, f"{type(self).__name__} fit"):
            return self._search(dataset)

    def _search(self, dataset: DataFrame) -> stock.TrainValidationSplitModel:
        est = self.getOrDefault(self.estimator)
        epm = self.getOrDefault(self.estimatorParamMaps)
        eva = self.getOrDefault(self.evaluator)
        check_param_maps(est, epm, type(self).__name__)
        check_search_params(
            type(self).__name__, epm, self.getParallelism(), train_ratio=self.getOrDefault(self.trainRatio)
        )
        if not one_pass_applies(est, epm, eva, dataset):
            return super()._fit(dataset)
        ratio = self.getOrDefault(self.trainRatio)
        draws = random_fold_ids(dataset, self.uid, self.getOrDefault(self.seed), [(ratio, 2.0)])  # rand() < 1
        once: ConvertedOnce | None
        staged = transformed_search(est, epm, draws, draw_column(self.uid)) if last_stage_search(est, epm) else None
        if staged is not None:  # a Pipeline of Transformers, then the estimator: searched on the rows transformed
            searched, data, once, wrap = staged.last, staged.frame, staged.once, staged.wrap
            train, validation = staged.split(0)
        else:
            searched, data, wrap = est, dataset, unwrapped
            once = None if last_stage_search(est, epm) else convert_once(est, epm, dataset, draws)
            train, validation = self._split(dataset)
        try:
            kept = cached(train, data) if once is None else contextlib.nullcontext(train)
            with kept as train, cached(validation, data) as validation, fold_training(once, 0, train) as blocks:
                metrics, models = fit_and_score(searched, epm, eva, train, validation, self.getParallelism(), blocks)
            with whole_dataset(once, data):
                best = searched.fit(data, epm[best_index(metrics, eva)])
        finally:
            if once is not None:
                once.release()
        best, models = wrap(best), [wrap(m) for m in models]
        sub_models = models if self.getCollectSubModels() else None
        return self._copyValues(stock.TrainValidationSplitModel(best, metrics, sub_models))

    def write(self) -> Any:
        """pyspark's writer; its Python writer records pyspark's class (``sparkml.tuning.persistence``)."""
        return persistence.writer(self, super().write())

    @classmethod
    def read(cls) -> Any:
        """pyspark's reader, returning this class."""
        return persistence.reader(cls, super().read())
