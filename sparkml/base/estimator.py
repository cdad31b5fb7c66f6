"""The fit every estimator of this library runs, written once.

    fit(df)   check the Params (``base.validation``), before any data is touched
              convert df once into executor-resident blocks (``data.TrainingData``), or reuse the
              conversion an earlier fit kept for the same cached df (``data.reuse``)
              train: the estimator's ``_train(data, last_pass)`` picks the strategy
                     (``_make_strategy``), runs its solver with the fit's ``Progress`` (one event
                     per iteration: ``optim.iterations``) and builds the model
              release the blocks, also when training fails
              (``strategy="auto"``: a barrier stage that lost an executor is fitted again with
              ``sync``, from a new conversion)
    fitMultiple(df, maps)   the same, with one conversion shared by the maps that convert alike, and
                            the maps that differ only in the penalty and the stopping rule solved on one
                            warm-started regularization path (``base.fit_multiple``, ``base.regularization_path``)

An estimator supplies ``_train`` and, where it differs, ``_compute_dtype``; its Params are declared in
``sparkml.params`` (their rules included). The linear models supply less still (``linear.estimator.LinearEstimator``).
The fitted model keeps the estimator's uid and Params (``_fitted``), as MLlib's models do.

An estimator saves as pyspark.ml's Python estimators do (``DefaultParamsWriter``'s layout: its Params as
JSON under ``path/metadata``, the class recorded by its public name, e.g.
``sparkml.classification.LogisticRegression``), so a ``Pipeline`` or a ``CrossValidator`` holding
one saves and loads back with it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from pyspark import keyword_only
from pyspark.ml.util import DefaultParamsReadable, MLWritable

from sparkml.base.fit_multiple import SharedConversionFits
from sparkml.base.persistence import EstimatorReader, EstimatorWriter
from sparkml.base.search_support import NOT_SUPPORTED, SearchSupport
from sparkml.base.validation import check_finite_model, check_params
from sparkml.catalog import public_class_name
from sparkml.data import class_weight as class_weights
from sparkml.data import lent_conversions
from sparkml.data.training_data import TrainingData
from sparkml.optim.checkpoint import Checkpoint, data_fingerprint, fingerprint
from sparkml.optim.checkpoint import check_params as check_checkpoint_params
from sparkml.optim.iterations import Iteration, Progress
from sparkml.progress import ProgressBar, progress_shown
from sparkml.runtime.cancellation import cancellable
from sparkml.runtime.compat import require_connect_ml
from sparkml.runtime.session_kind import estimated_bytes

logger = logging.getLogger("sparkml")

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.ml.param import ParamMap
    from pyspark.ml.param.shared import HasFeaturesCol, HasLabelCol
    from pyspark.sql import DataFrame
    from typing_extensions import Self

    from sparkml.base.params import HasTrainingParams

    class _WritableParams(MLWritable, HasLabelCol, HasFeaturesCol, HasTrainingParams):
        """``MLWritable`` and the Params of every estimator that mixes in ``TorchEstimator``."""

else:
    # the Params come from the estimator's other bases (``TorchEstimator``'s docstring)
    _WritableParams = MLWritable


class TorchEstimator(DefaultParamsReadable, _WritableParams):
    """``_fit`` and ``fitMultiple`` of an estimator trained on ``TrainingData`` (module docstring).

    Mixed in before pyspark's ``Estimator`` subclass, with ``base.params.HasTorchTrainingParams``.
    """

    _compute_dtype: ClassVar[str | None] = "float64"  # the linear models compute in float64 over float32 storage
    _input_kwargs: dict[str, Any]  # the keyword arguments of a ``keyword_only`` method's call

    @keyword_only
    def __init__(self, **kwargs: Any) -> None:
        """Sets the named Params (keyword arguments only; the estimator's signature lists them:
        ``base.params.declared_estimator``)."""
        super().__init__()
        self.setParams(**self._input_kwargs)

    @keyword_only
    def setParams(self, **kwargs: Any) -> Self:
        """Sets the named Params (keyword arguments only, as pyspark.ml's ``setParams``)."""
        return self._set(**kwargs)

    def _check_params(self):
        check_params(self)
        check_checkpoint_params(
            self._checkpoint_dir(),
            self.getOrDefault("checkpointInterval"),
            self._checkpoint_refusal() if self._checkpoint_dir() else None,
        )

    def _checkpoint_dir(self):
        """``checkpointDir``, or None when unset or empty."""
        return (self.getOrDefault("checkpointDir") if self.isDefined("checkpointDir") else None) or None

    def _checkpoint_refusal(self):
        """Why this fit cannot honour ``checkpointDir`` (``optim.checkpoint``), or None when it can: the hook every
        estimator overrides to say which of its fits checkpoint."""
        return f"{type(self).__name__} writes no checkpoints"

    def _checkpoint(self, summary, theta0=None):
        """The fit's ``optim.checkpoint.Checkpoint`` with the state it resumes from loaded, or None without
        ``checkpointDir``; ``summary``: the conversion's ``DatasetSummary``, ``theta0``: the start (None: a
        fit that always starts at zero). ValueError when the directory holds another fit's checkpoint."""
        return self._checkpoint_of(data_fingerprint(summary), theta0)

    def _checkpoint_of(self, data, theta0=None):
        """``_checkpoint`` with the data's part of the fingerprint given (``data``: name -> number)."""
        directory = self._checkpoint_dir()
        if directory is None:
            return None
        params = {p.name: v for p, v in self.extractParamMap().items()}
        record = fingerprint(f"{type(self).__module__}.{type(self).__name__}", params, data, theta0)
        checkpoint = Checkpoint(directory, self.getCheckpointInterval(), record, type(self).__name__)
        checkpoint.load()
        return checkpoint

    def _minimize(self, strategy, summary, objective, theta0, *, max_iter, owlqn, last_pass, bounds=None):
        """(theta, TrainingSummary): the strategy's quasi-Newton run over ``objective`` from ``theta0`` (L-BFGS;
        OWL-QN with ``owlqn``; L-BFGS-B within ``bounds``, a (lower, upper) pair over theta), stopping at
        ``tol``, checkpointed where ``checkpointDir`` asks: the files are removed once the fit succeeds, as
        MLlib removes its own. ``summary``: the conversion's ``DatasetSummary``, which the checkpoint records."""
        checkpoint = self._checkpoint(summary, theta0)
        theta, record = strategy.minimize(
            objective,
            theta0,
            max_iter=max_iter,
            tol=self.getOrDefault("tol"),
            name=type(self).__name__,
            owlqn=owlqn,
            last_pass=last_pass,
            progress=self._progress(),
            bounds=bounds,
            checkpoint=checkpoint,
        )
        if checkpoint is not None:
            checkpoint.remove()
        return theta, record

    def _train(self, data, last_pass):
        """The fitted model from ``data``. ``last_pass``: no later fit reads ``data``'s blocks, so a
        strategy may delete them as it finishes."""
        raise NotImplementedError

    def _path_params(self, strategy):
        """The Params a regularization path over this estimator's maps may vary when ``strategy`` runs it
        (``base.regularization_path``), or None: every map is fitted alone (the default)."""
        return None

    def _train_path(self, estimators, data, last_pass):
        """The fitted models of ``estimators`` (this one first: copies of one estimator that differ only in
        ``_path_params``), in their order, solved on one regularization path over ``data``
        (``base.regularization_path``)."""
        raise NotImplementedError

    def write(self) -> EstimatorWriter:
        return EstimatorWriter(self, public_class_name(type(self)))

    @classmethod
    def read(cls) -> EstimatorReader:
        return EstimatorReader(cls)

    def _fitted(self, model, summaries, dataset):
        """``model`` with the optimizer's ``summaries`` (its training summary evaluates ``dataset``),
        this estimator's uid and its Params."""
        model._set_summaries(summaries, dataset)
        return self._copyValues(model)._resetUid(self.uid)

    def _weight_col(self):
        """The weight column's name, or None when unset or empty (every row weighs 1)."""
        return (self.getOrDefault("weightCol") if self.isDefined("weightCol") else None) or None

    def _class_weight(self):
        """The ``classWeight`` setting, or None: unset, or an estimator without it (the regressors)."""
        if not self.hasParam("classWeight") or not self.isDefined("classWeight"):
            return None
        return self.getOrDefault("classWeight")

    def _strategy_name(self, spark):
        """The strategy a fit in ``spark``'s session runs: the ``strategy`` Param, or for ``auto`` the choice of
        ``strategies.auto_strategy``."""
        name = self.getStrategy()
        if name != "auto":
            return name
        from sparkml.strategies import auto_strategy

        name, why = auto_strategy(spark, checkpointing=self._checkpoint_dir() is not None)
        logger.info("%s: strategy 'auto' runs %r (%s)", type(self).__name__, name, why)
        return name

    def _conversion(self, dataset, strategy=None):
        """``TrainingData.prepare``'s arguments for this estimator's Params and ``strategy`` (default: the
        one ``_strategy_name`` picks, the one decision of the fit): at most how many blocks
        (``strategies.block_partitions``), whether a barrier stage reads the handles, and the strategy itself,
        which the converted data carries to ``_make_strategy``."""
        from sparkml.strategies import SMALL_INPUT_BYTES, block_partitions, table

        strategy = strategy or self._strategy_name(dataset.sparkSession)
        # an explicit barrier strategy keeps its task slots (a parameter server or gossip of one worker is none)
        size = estimated_bytes(dataset) if self.getStrategy() == "auto" or not table.get(strategy).barrier else None
        small = size is not None and size < SMALL_INPUT_BYTES
        return {
            "features_col": self.getFeaturesCol(),
            "label_col": self.getLabelCol(),
            "weight_col": self._weight_col(),
            "dtype": self.getDtype(),
            "compute_dtype": self._compute_dtype,
            "max_partitions": block_partitions(strategy, dataset.sparkSession, self.getNumWorkers(), small),
            "barrier": table.get(strategy).barrier,
            "strategy": strategy,
            "class_weight": class_weights.conversion_key(self._class_weight()),
        }

    def _make_strategy(self, data, loss):
        """The strategy over ``data`` for the ``sparkml.gpu`` loss ``loss``: the one ``data`` was converted for
        (``_conversion``)."""
        from sparkml.strategies import StrategyOptions, make_strategy, table

        mapping = table.option_params()  # option -> Param; an option whose Param the estimator lacks keeps its default
        options = StrategyOptions(**{k: self.getOrDefault(p) for k, p in mapping.items() if self.hasParam(p)})
        return make_strategy(data.strategy, data, loss, options)

    def addIterationCallback(self, callback: Callable[[Iteration], None]) -> Self:
        """Call ``callback(event)`` on the driver at the end of every iteration of this estimator's fits, as it
        ends, whatever the strategy: ``event`` is a ``sparkml.progress.Iteration`` (``name``, ``kind``,
        ``iteration``, ``objective``, ``gradient_norm``, ``seconds``, ``detail``, and the iterate ``x`` up to
        10,000 values). A barrier stage's iterations reach the driver within about a second (in Spark Connect,
        when the stage returns). A callback that raises is logged and the fit goes on. Not a Param: not saved."""
        self._listeners = [*getattr(self, "_listeners", ()), callback]
        return self

    def clearIterationCallbacks(self) -> Self:
        """Remove the callbacks ``addIterationCallback`` added."""
        self._listeners = []
        return self

    def _add_iteration_callback(self, callback):
        """Call ``callback(iteration)`` (an ``optim.iterations.Iteration``) at the end of every iteration of
        this estimator's fits, in the optimizer's loop, where the optimizer runs (an executor for a barrier
        stage): the library's own seam, which can slow or hold a fit."""
        self._callbacks = [*getattr(self, "_callbacks", ()), callback]
        return self

    def _progress(self):
        """The ``Progress`` a fit hands its optimizer: the log line, the loop's callbacks, then on the driver the
        iteration callbacks and, where shown (``sparkml.progress``), a progress bar."""
        listeners = list(getattr(self, "_listeners", ()))
        if progress_shown():
            listeners.append(ProgressBar(self.getOrDefault("maxIter") if self.hasParam("maxIter") else None))
        return Progress(getattr(self, "_callbacks", ()), listeners)

    def _fit(self, dataset):
        require_connect_ml(dataset.sparkSession)
        self._check_params()
        with cancellable(dataset.sparkSession, f"{type(self).__name__} fit"):
            model = self._fit_falling_back(
                dataset, lambda conversion: self._fit_converted(dataset, conversion), self._conversion(dataset)
            )
        return check_finite_model(self, model)

    def _fit_converted(self, dataset, conversion, train=None):
        """The model trained on ``dataset`` converted with ``conversion``: the conversion a caller lent for it
        (``data.lent_conversions``), a conversion kept for the cached
        ``dataset`` by an earlier fit when there is one (``data.reuse``), converted again when its blocks
        turned out to be gone; else a fresh conversion, released when the fit ends. ``train(data, last_pass)``:
        what trains (default ``_train``; a regularization path's models, ``base.fit_multiple``)."""
        from sparkml.data import background_release, reuse
        from sparkml.strategies.barrier_task import blocks_lost

        train = train or self._train
        data = lent_conversions.borrowed(dataset, conversion)
        if data is not None:  # the caller's, released by the caller
            return train(data, last_pass=False)
        data, entry, reused = reuse.acquire(dataset, conversion, lambda: TrainingData.prepare(dataset, **conversion))
        if entry is None:
            try:
                model = train(data, last_pass=True)
            except BaseException:
                data.release()
                raise
            background_release.release_after_fit(data)  # the model needs none of it: not on the fit's time
            return model
        try:
            model = train(data, last_pass=False)
        except Exception as e:
            lost = blocks_lost(e)
            reuse.done(entry, broken=lost)
            if not (lost and reused):
                raise
            logger.warning(
                "%s: the conversion kept for this DataFrame lost blocks since it was made (%s); converting it again",
                type(self).__name__,
                str(e).strip().splitlines()[0][:300],
            )
            return self._fit_converted(dataset, conversion, train)
        reuse.done(entry)
        return model

    def _fit_falling_back(self, dataset, fit, conversion):
        """``fit(conversion)``; with ``strategy="auto"``, when its barrier stage lost an executor (and with it
        blocks no barrier stage can rebuild), ``fit`` again on a ``sync`` conversion, which Spark can recompute."""
        try:
            return fit(conversion)
        except Exception as e:
            from sparkml.strategies.barrier_task import ExecutorLost

            if not isinstance(e, ExecutorLost) or self.getStrategy() != "auto":
                raise
            logger.warning(
                "%s: strategy 'auto' lost an executor in its barrier stage (%s); fitting again with strategy 'sync'",
                type(self).__name__,
                str(e).splitlines()[0],
            )
            return fit(self._conversion(dataset, "sync"))

    def searchSupport(self, dataset: DataFrame, paramMaps: Sequence[ParamMap]) -> SearchSupport:
        """What a search of ``paramMaps`` on ``dataset`` may do beyond ``fitMultiple`` (``SearchSupport``, the
        protocol ``sparkml.tuning``'s validators plan from): nothing here; the linear estimators say more."""
        return NOT_SUPPORTED

    def fitMultiple(self, dataset: DataFrame, paramMaps: Sequence[ParamMap]) -> SharedConversionFits:
        """A thread-safe iterator of (index, model), one per param map, as pyspark's; the maps that
        convert the data alike share one conversion, and those that differ only in the penalty and the
        stopping rule are solved on one regularization path (``base.fit_multiple``)."""
        return SharedConversionFits(self, dataset, paramMaps)
