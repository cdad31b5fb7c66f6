"""Pieces shared by the three linear models: persistence, ``toSpark``, summary, warm start."""
import numpy as np
from pyspark.ml.util import MLReadable, MLWritable

from sparkml.params import TORCH_PARAM_NAMES
from sparkml.persistence import MLlibModelReader, MLlibModelWriter


class ModelIO(MLWritable, MLReadable):
    """MLlib-format ``save``/``load``/``write``/``read`` (``sparkml.persistence``).

    Subclasses set ``_java_class`` (the class name recorded in the metadata) and implement
    ``_data_frame(spark)`` and ``_from_data(row)``.
    """

    _java_class = None

    def write(self):
        return MLlibModelWriter(self, self._java_class)

    @classmethod
    def read(cls):
        return MLlibModelReader(cls, cls._java_class)


class LinearModelIO(ModelIO):
    """``ModelIO`` plus the training summary and conversion to the stock pyspark.ml model.

    Subclasses also set ``_stock_class`` (the pyspark.ml wrapper) and implement ``_java_args(sc)``.
    """

    _stock_class = None
    _summary = None

    @property
    def hasSummary(self):
        return self._summary is not None

    @property
    def summary(self):
        if self._summary is None:
            raise RuntimeError(f"No training summary available for this {type(self).__name__}")
        return self._summary

    def toSpark(self):
        """The same model as the stock pyspark.ml class (a JVM model), with the same Params and uid."""
        from pyspark import SparkContext
        from pyspark.ml.common import _py2java

        sc = SparkContext._active_spark_context
        if sc is None:
            raise RuntimeError("toSpark() needs an active classic SparkSession")
        jvm_class = sc._jvm
        for part in self._java_class.split("."):
            jvm_class = getattr(jvm_class, part)
        java_model = jvm_class(self.uid, *[_py2java(sc, a) for a in self._java_args()])
        stock = self._stock_class(java_model)
        stock._resetUid(self.uid)
        params = {p.name: v for p, v in self._paramMap.items() if p.name not in TORCH_PARAM_NAMES}
        if params:
            stock._set(**params)
        stock._transfer_params_to_java()
        return stock


def initial_coefficients(model, n_features, n_outputs):
    """(beta (K, d), b (K,)) from a warm-start model; ValueError when its shape does not fit."""
    if model is None:
        return None
    beta = np.atleast_2d(np.asarray(getattr(model, "coefficientMatrix", None).toArray()
                                    if hasattr(model, "coefficientMatrix") else model.coefficients.toArray()))
    b = np.atleast_1d(np.asarray(model.interceptVector.toArray() if hasattr(model, "interceptVector")
                                 else model.intercept, dtype=np.float64))
    if beta.shape != (n_outputs, n_features):
        raise ValueError(
            f"initial model has coefficients of shape {beta.shape}, but this fit needs "
            f"{(n_outputs, n_features)} ({n_features} features, {n_outputs} output(s))"
        )
    return beta, b
