"""``TrainValidationSplit``: pyspark's, with the validation split scored for the whole grid in one pass."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.ml import tuning as stock
from pyspark.sql import functions as F

from sparkml.runtime.cancellation import cancellable
from sparkml.tuning import persistence
from sparkml.tuning.convert_once import draw_column, random_fold_ids
from sparkml.tuning.grid import check_param_maps, check_search_params
from sparkml.tuning.plan import plan_search
from sparkml.tuning.validator import best_index

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


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
        ratio = self.getOrDefault(self.trainRatio)
        draws = random_fold_ids(dataset, self.uid, self.getOrDefault(self.seed), [(ratio, 2.0)])  # rand() < 1
        plan = plan_search(est, epm, eva, dataset, draws, draw_column(self.uid))
        if plan is None:
            return super()._fit(dataset)
        try:
            [(train, validation)] = plan.splits(1, lambda: [self._split(dataset)])
            metrics, models = plan.search_split(0, train, validation, self.getParallelism())
            best = plan.refit(epm[best_index(metrics, eva)])
        finally:
            plan.release()
        sub_models = models if self.getCollectSubModels() else None
        return self._copyValues(stock.TrainValidationSplitModel(best, metrics, sub_models))

    def write(self) -> Any:
        """pyspark's writer; its Python writer records pyspark's class (``sparkml.tuning.persistence``)."""
        return persistence.writer(self, super().write())

    @classmethod
    def read(cls) -> Any:
        """pyspark's reader, returning this class."""
        return persistence.reader(cls, super().read())
