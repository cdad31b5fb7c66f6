"""``CrossValidator``: pyspark's, with each validation fold scored for the whole grid in one pass."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.ml import tuning as stock

from sparkml.runtime.cancellation import cancellable
from sparkml.tuning import persistence
from sparkml.tuning.convert_once import column_fold_ids, draw_column, random_fold_ids
from sparkml.tuning.grid import check_param_maps, check_search_params
from sparkml.tuning.plan import plan_search
from sparkml.tuning.validator import best_index

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class CrossValidator(stock.CrossValidator):
    """pyspark.ml's ``CrossValidator`` (same Params, defaults, folds and fitted ``CrossValidatorModel``) that
    scores each validation fold once for the whole grid.

    pyspark scores a fold with one Spark job per param map (``evaluator.evaluate(model.transform(fold))``).
    When the estimator is one of this library's linear models (``LogisticRegression``, ``LinearSVC``,
    ``LinearRegression``) and the evaluator is exactly pyspark's ``RegressionEvaluator``,
    ``MulticlassClassificationEvaluator`` or ``BinaryClassificationEvaluator``, the k models of a fold are
    fitted with one ``estimator.fitMultiple`` (pulled from ``parallelism`` threads, as pyspark does), then
    scored together: one pass over the fold's features, label and weight computes every model's margins in
    one product, and each model's metric comes from sufficient statistics summed in that pass with Spark's own
    formulas (regression and multiclass metrics) or from the k models' scores with Spark's curve computation
    (areas under the ROC and PR curves: on the driver up to ``scores.DRIVER_VALUES``, else Spark's evaluator on a
    cached frame of the scores). The metrics are pyspark's on ``model.transform(fold)``, to the rounding of the
    sums (and, for a curve Spark down-samples, to the points at its sort's partition boundaries).

    A ``Pipeline`` whose last stage is one of these estimators, with a grid over that stage's Params only, fits
    and applies its earlier stages once per fold (pyspark refits them for every map), then runs its last stage's
    grid as above; each model is the ``PipelineModel`` ``Pipeline.fit(train, paramMap)`` would return. When the
    earlier stages are all Transformers (a ``VectorAssembler``: nothing to fit), the dataset is transformed and
    converted once for every fold and the refit.

    The folds are pyspark's (``_kFold``: ``foldCol``, or ``rand(seed)``). Any other estimator (``KernelSVC``,
    pyspark.ml's, a ``Pipeline`` with a grid over an earlier stage), evaluator (a subclass of these three
    included) or a Spark Connect session runs pyspark's own ``_fit``. A grid that sets a Param the estimator
    does not have is a ``ValueError`` before any Spark job.

    Saved as pyspark's ``CrossValidator`` (the files name pyspark's class, so pyspark loads them); ``load``
    returns this class. The fitted model is a ``CrossValidatorModel``: pyspark's, with a reader that gives
    each fold its own sub-models.
    """

    def _fit(self, dataset: DataFrame) -> CrossValidatorModel:
        """The search (``_search``); a cancelled job of it, the search's own or a fit's, ends it with
        ``FitCancelled`` (``sparkml.runtime.cancellation``)."""
        with cancellable(dataset.sparkSession, f"{type(self).__name__} fit"):
            return self._search(dataset)

    def _search(self, dataset: DataFrame) -> CrossValidatorModel:
        est = self.getOrDefault(self.estimator)
        epm = self.getOrDefault(self.estimatorParamMaps)
        eva = self.getOrDefault(self.evaluator)
        check_param_maps(est, epm, type(self).__name__)
        check_search_params(type(self).__name__, epm, self.getParallelism(), num_folds=self.getOrDefault(self.numFolds))
        drawn = self.getOrDefault(self.foldCol) or draw_column(self.uid)  # the column the fold ids are read from
        plan = plan_search(est, epm, eva, dataset, self._fold_ids(dataset), drawn)
        if plan is None:
            return CrossValidatorModel.of(super()._fit(dataset))
        n_folds = self.getOrDefault(self.numFolds)
        metrics_all: list[list[float]] = []
        sub_models: list[list[Any]] | None = [] if self.getCollectSubModels() else None
        try:
            for i, (train, validation) in enumerate(plan.splits(n_folds, lambda: self._kFold(dataset))):
                metrics, models = plan.search_split(i, train, validation, self.getParallelism())
                metrics_all.append(metrics)
                if sub_models is not None:
                    sub_models.append(models)
            assert len(metrics_all) == n_folds
            avg, std = stock.CrossValidator._gen_avg_and_std_metrics(metrics_all)
            best = plan.refit(epm[best_index(avg, eva)])
        finally:
            plan.release()
        return self._copyValues(CrossValidatorModel(best, avg, sub_models, std))

    def _fold_ids(self, dataset: DataFrame) -> tuple[DataFrame, Any] | None:
        """(dataset to convert, each row's fold id) as ``_kFold`` assigns them (``sparkml.tuning.convert_once``);
        ValueError when ``foldCol`` names no column (before any job, whichever way the search runs)."""
        n_folds, fold_col = self.getOrDefault(self.numFolds), self.getOrDefault(self.foldCol)
        if fold_col:
            if fold_col not in dataset.columns:
                raise ValueError(f"foldCol {fold_col!r} is not a column of the dataset (columns: {dataset.columns})")
            return column_fold_ids(dataset, fold_col, n_folds)
        h = 1.0 / n_folds
        bounds = [(i * h, (i + 1) * h) for i in range(n_folds)]
        return random_fold_ids(dataset, self.uid, self.getOrDefault(self.seed), bounds)

    def write(self) -> Any:
        """pyspark's writer; its Python writer records pyspark's class (``sparkml.tuning.persistence``)."""
        return persistence.writer(self, super().write())

    @classmethod
    def read(cls) -> Any:
        """pyspark's reader, returning this class."""
        return persistence.reader(cls, super().read())


class CrossValidatorModel(stock.CrossValidatorModel):
    """pyspark.ml's ``CrossValidatorModel`` (same fields, Params, files and ``transform``), whose ``load`` reads
    each fold's sub-models back as that fold's. pyspark's Python reader, which reads every model of a Python
    estimator, fills one list that all folds share (``[[None] * maps] * numFolds``), so with
    ``collectSubModels`` and ``persistSubModels`` every fold reads back as the last fold's models;
    ``pyspark.ml.tuning.CrossValidatorModel.load`` still does that on these files."""

    @classmethod
    def of(cls, model: stock.CrossValidatorModel) -> CrossValidatorModel:
        """``model`` (pyspark's class) as this class: the same uid, fields and Params."""
        return model if isinstance(model, cls) else _converted(model, cls)

    def copy(self, extra: Any = None) -> CrossValidatorModel:
        return CrossValidatorModel.of(super().copy(extra))

    def write(self) -> Any:
        """pyspark's writer of the same model as pyspark's class: the files name pyspark's class, which pyspark's
        reader requires of a Python-written directory (``sparkml.tuning.persistence``)."""
        return _converted(self, stock.CrossValidatorModel).write()

    @classmethod
    def read(cls) -> Any:
        """pyspark's reader, with each fold's sub-models its own (``sparkml.tuning.persistence``)."""
        return persistence.model_reader(cls, super().read())


def _converted(model: stock.CrossValidatorModel, cls: type) -> Any:
    converted = cls(model.bestModel, model.avgMetrics, model.subModels, model.stdMetrics)
    converted._resetUid(model.uid)
    return model._copyValues(converted)
