"""What the models share: MLlib-format persistence, the training summary, conversion to the stock
pyspark.ml model, and (on the estimators) the warm start from a previous model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

import numpy as np
from pyspark.ml.util import MLReadable, MLWritable

from sparkml.base.params import own_param_names
from sparkml.base.persistence import MLlibModelReader, MLlibModelWriter
from sparkml.runtime.compat import require_connect_ml
from sparkml.saved.classes import SAVED

if TYPE_CHECKING:
    from pyspark.ml.linalg import DenseVector
    from pyspark.ml.param import Param
    from pyspark.ml.util import MLWriter
    from pyspark.ml.wrapper import JavaModel, JavaWrapper
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType
    from typing_extensions import Self

    from sparkml.optim.iterations import TrainingSummary

    class _StockModelClass(Protocol):
        """A pyspark.ml model class over a JVM model (``pyspark.ml.classification.LogisticRegressionModel``, ...)."""

        def __call__(self, java_model: Any = None) -> JavaModel: ...

        def load(self, path: str) -> JavaModel: ...

    class _Evaluates(Protocol):
        """A stock pyspark.ml model: its ``evaluate`` returns pyspark.ml's summary (a ``JavaWrapper``)."""

        def evaluate(self, dataset: DataFrame) -> JavaWrapper: ...


class ModelIO(MLWritable, MLReadable):
    """MLlib-format ``save``/``load``/``write``/``read`` (``base.persistence``).

    Subclasses set ``_java_class`` (the class name recorded in the metadata) and ``_data_schema`` (the
    columns of the saved row), and implement ``_data_frame(spark)``, ``_from_data(row)`` and
    ``_data_shapes(row)``; a model with more than one row of numbers adds ``_save_beside`` and
    ``_load_beside``. Loading checks the files first (``base.persistence.ModelFiles``).
    """

    _java_class: ClassVar[str | None] = None
    _data_schema: ClassVar[StructType | None] = None  # StructType of the one saved row

    @classmethod
    def _data_shapes(cls, row):
        """{column: shape} of the row's vectors (``(n,)``) and matrices (``(rows, cols)``), computed from
        its other columns; an entry that is a string names a size that must be the same wherever it
        appears. Listed columns must be non-null. ValueError when the row's values make no model. This
        library's classes state theirs in ``sparkml.saved.classes`` (which loading checks), read here."""
        saved = SAVED.get(cls._java_class or "")
        return {} if saved is None else saved.shapes(row.asDict())

    def _save_beside(self, spark, path, mode) -> None:
        """Writes what the model keeps outside its data row (a model whose numbers do not fit one row)."""

    def _load_beside(self, spark, path) -> None:
        """Reads what ``_save_beside`` wrote, after the metadata and the data row are checked and set."""

    def _read_fully(self) -> None:
        """Reads now whatever ``_load_beside`` left to read lazily, so the model's files may be deleted."""

    def write(self) -> MLlibModelWriter:
        return MLlibModelWriter(self, self._java_class)

    @classmethod
    def read(cls) -> MLlibModelReader:
        return MLlibModelReader(cls, cls._java_class)


class KeepsTrainingSummary:
    """``summary`` and ``hasSummary`` of a fitted model, kept in Python (pyspark's ``HasTrainingSummary`` reads
    them from a JVM model, which ours are not). ``_summaries`` holds the optimizer's record
    (``optim.iterations.TrainingSummary``) of each problem (KernelSVC: one per one-vs-rest class);
    ``summary`` is built from the first on first use by the model's ``_training_summary(record,
    dataset)`` (the linear models: pyspark.ml's own summary class, ``base.summary``)."""

    _summaries: list[TrainingSummary] | None = None
    _summary_dataset: DataFrame | None = None
    _summary: Any = None  # the model's ``_training_summary``

    def _set_summaries(self, summaries, dataset=None):
        self._summaries, self._summary_dataset, self._summary = list(summaries), dataset, None
        return self

    @property
    def hasSummary(self) -> bool:
        return self._summaries is not None

    @property
    def summary(self) -> Any:
        if self._summaries is None:
            raise RuntimeError(f"No training summary available for this {type(self).__name__}")
        if self._summary is None:
            self._summary = self._training_summary(self._summaries[0], self._summary_dataset)
        return self._summary

    def _training_summary(self, record, dataset):
        return record


class HasCoefficientVector:
    """``coefficients`` (a DenseVector), ``intercept`` and ``numFeatures`` of a one-output linear
    model, whose margin is x.beta + b."""

    _coefficients: DenseVector
    _intercept: float

    @property
    def coefficients(self) -> DenseVector:
        return self._coefficients

    @property
    def intercept(self) -> float:
        return self._intercept

    @property
    def numFeatures(self) -> int:
        return self._coefficients.size

    def _margin(self, value):
        return float(self._coefficients.dot(value) + self._intercept)

    def _estimates(self):
        """The coefficients, then the intercept when one is fitted: the order of MLlib's summaries' standard
        errors, t and p values."""
        estimate = self._coefficients.toArray()
        fits_intercept = self.getFitIntercept()  # type: ignore[attr-defined]  # the models' fitIntercept Param
        return np.append(estimate, self._intercept) if fits_intercept else estimate


class ConvertsToStock:
    """``toSpark``: the stock pyspark.ml model; ``evaluate`` and ``transform`` through it. Subclasses set
    ``_java_class`` and ``_stock_class`` (the pyspark.ml wrapper) and implement ``_java_args()`` (the
    Scala constructor's arguments).

    Scoring runs in the JVM: ``transform`` is the stock model's, with this model's coefficients and
    Params, so the output columns are MLlib's (names, types, values, thresholds) and no row leaves the
    JVM for a Python worker. The stock model is built once per session and Param values and reused. In
    Spark Connect it reaches the server as files (``toSpark``); where the server cannot read them (a
    remote server and no ``$SPARKML_TEMP_DFS_PATH``) ``transform`` falls back to scoring Arrow batches
    with torch in Python workers (``sparkml.scoring``), logged once per model as a warning.
    """

    # of the pyspark.ml model with ``ModelIO`` it is mixed into
    uid: str
    _paramMap: dict[Param, Any]
    _java_class: ClassVar[str]
    _stock_class: ClassVar[_StockModelClass]
    # (session, Param values, stock model or None when it could not be loaded)
    _scoring: tuple[SparkSession, tuple[tuple[str, str], ...], JavaModel | None] | None = None

    if TYPE_CHECKING:

        def write(self) -> MLWriter: ...

    def _java_args(self) -> list[Any]:
        """The Scala model constructor's arguments after the uid."""
        raise NotImplementedError

    def _stock_transform(self, dataset, fallback):
        """``dataset`` scored by the stock model; ``fallback()`` (the Arrow path) where Connect's server
        cannot load it."""
        spark = dataset.sparkSession
        require_connect_ml(spark)
        params = tuple(sorted((p.name, repr(v)) for p, v in self._paramMap.items()))
        cached = self._scoring
        if cached is None or cached[0] is not spark or cached[1] != params:
            cached = self._scoring = (spark, params, self._stock_for(spark))
        return cached[2].transform(dataset) if cached[2] is not None else fallback()

    def _stock_for(self, spark):
        from sparkml.runtime.session_kind import is_connect

        if not is_connect(spark):
            return self._stock_in_jvm()
        try:
            return self._stock_through_files(spark)
        except Exception as e:
            import logging

            logging.getLogger("sparkml").warning(
                "%s: the Spark Connect server could not load the stock model from a temporary directory "
                "(%s); transform scores in Python workers instead. Set SPARKML_TEMP_DFS_PATH to a directory "
                "the server can read to score in the JVM",
                type(self).__name__,
                str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__,
            )
            return None

    def evaluate(self, dataset: DataFrame) -> JavaWrapper:
        """MLlib's evaluation of this model on ``dataset``: pyspark.ml's own summary
        (``BinaryLogisticRegressionSummary``, ``LinearSVCSummary``, ``LinearRegressionSummary``, ...),
        its metrics computed by Spark from the predictions of the same coefficients."""
        return cast("_Evaluates", self.toSpark()).evaluate(dataset)

    def toSpark(self) -> JavaModel:
        """The same model as the stock pyspark.ml class, with the same Params and uid.

        In a classic session it is built in the JVM directly. In Spark Connect it is saved to a
        temporary directory and loaded by the server: under ``$SPARKML_TEMP_DFS_PATH`` (pyspark's own
        setting for such files; set it to a directory the server can read when the server runs
        elsewhere), else under the local temporary directory.
        """
        from pyspark.sql import SparkSession

        from sparkml.runtime.session_kind import is_connect

        spark = SparkSession.getActiveSession()
        if spark is not None and is_connect(spark):
            return self._stock_through_files(spark)
        return self._stock_in_jvm()

    def _stock_through_files(self, spark):
        import os
        import shutil
        import tempfile
        import uuid

        shared = os.environ.get("SPARKML_TEMP_DFS_PATH")
        root = shared or tempfile.mkdtemp(prefix="sparkml-stock-")
        path = os.path.join(root, uuid.uuid4().hex)
        try:
            self.write().save(path)
            return self._stock_class.load(path)
        finally:
            if shared:
                from sparkml.runtime.compat import remove_dfs_dir

                remove_dfs_dir(path, spark)
            else:
                shutil.rmtree(root, ignore_errors=True)

    def _stock_in_jvm(self):
        from pyspark import SparkContext
        from pyspark.ml.common import _py2java

        sc = SparkContext._active_spark_context
        if sc is None:
            raise RuntimeError("toSpark() needs an active SparkSession")
        jvm_class: Any = sc._jvm  # py4j's JVM view, walked down to the class
        for part in self._java_class.split("."):
            jvm_class = getattr(jvm_class, part)
        java_model = jvm_class(self.uid, *[_py2java(sc, a) for a in self._java_args()])
        stock = self._stock_class(java_model)
        stock._resetUid(self.uid)
        ours = own_param_names(self)
        params = {p.name: v for p, v in self._paramMap.items() if p.name not in ours}
        if params:
            stock._set(**params)
        stock._transfer_params_to_java()
        return stock


class HasInitialModel:
    """``setInitialModel``: begin the optimization at a previous model's coefficients (warm start)."""

    _initial_model: Any = None  # a linear model, ours or pyspark.ml's

    def setInitialModel(self, model: Any) -> Self:
        """Warm start from ``model`` (ours or pyspark.ml's, of the same features and outputs)."""
        self._initial_model = model
        return self

    def _initial_coefficients(self, n_features, n_outputs):
        """(beta (K, d), b (K,)) of the initial model, or None; ValueError when its shape does not fit."""
        model = self._initial_model
        if model is None:
            return None
        matrix = model.coefficientMatrix if hasattr(model, "coefficientMatrix") else None
        beta = np.atleast_2d(np.asarray(matrix.toArray() if matrix is not None else model.coefficients.toArray()))
        b = np.atleast_1d(
            np.asarray(
                model.interceptVector.toArray() if hasattr(model, "interceptVector") else model.intercept,
                dtype=np.float64,
            )
        )
        if beta.shape != (n_outputs, n_features):
            raise ValueError(
                f"initial model has coefficients of shape {beta.shape}, but this fit needs "
                f"{(n_outputs, n_features)} ({n_features} features, {n_outputs} output(s))"
            )
        return beta, b
