"""GeneralizedLinearRegressionModel: MLlib's model files, MLlib's transform and MLlib's summaries.

``transform`` adds ``predictionCol`` (the mean g^-1(x . beta + b + o)) and, when ``linkPredictionCol`` is set,
the linear predictor eta = x . beta + b + o, with o the ``offsetCol`` value: the stock model's own scoring in
the JVM, with these coefficients and Params (``ConvertsToStock``). ``evaluate(dataset)`` is MLlib's
``GeneralizedLinearRegressionSummary`` (deviance, nullDeviance, dispersion, aic, residuals of each type,
degrees of freedom, rank). The training ``summary`` is MLlib's ``GeneralizedLinearRegressionTrainingSummary``
built in the JVM over the training DataFrame from this fit's diag((A^T W A)^-1) (the last weighted
least-squares step's), so the standard errors, t and p values are computed by MLlib's code:
se_j = sqrt(dispersion D_j), t_j = estimate_j / se_j, p_j two-sided from the normal distribution (binomial,
poisson) or Student's t with residualDegreeOfFreedom (the others).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from pyspark.ml.linalg import DenseVector, VectorUDT
from pyspark.ml.param.shared import HasElasticNetParam
from pyspark.ml.regression import GeneralizedLinearRegressionModel as _StockModel
from pyspark.ml.regression import (
    GeneralizedLinearRegressionTrainingSummary,
    PredictionModel,
    _GeneralizedLinearRegressionParams,
)
from pyspark.sql.types import DoubleType, StructField, StructType

from sparkml.base.model import ConvertsToStock, HasCoefficientVector, KeepsTrainingSummary, ModelIO
from sparkml.base.params import HasTrainingParams, declares
from sparkml.gpu.glm import family_of, link_of
from sparkml.params.estimators import GENERALIZED_LINEAR_REGRESSION

if TYPE_CHECKING:
    from pyspark.ml.linalg import Vector


@declares(*GENERALIZED_LINEAR_REGRESSION)
class _Params(_GeneralizedLinearRegressionParams, HasTrainingParams, HasElasticNetParam):
    """MLlib's Params, the training Params of this library, and ``elasticNetParam`` (not MLlib's: its files keep
    it beside MLlib's Params, so that stock MLlib reads them)."""

    _own_param_names = ("elasticNetParam",)


def family_link_params(params):
    """(family, variance power, link or None, link power or None): the Params that name the family and the link
    (unset link Params None), as ``sparkml.gpu.glm.family_of`` and ``link_of`` take them."""
    link = params.getLink() if params.isSet("link") else None
    link_power = params.getLinkPower() if params.isSet("linkPower") else None
    return params.getFamily(), params.getVariancePower(), link, link_power


def family_and_link(params):
    """(``sparkml.gpu.glm.Family``, ``Link``) of an estimator's or model's Params, as MLlib's ``FamilyAndLink``."""
    family, variance_power, link, link_power = family_link_params(params)
    return family_of(family, variance_power), link_of(family, link, link_power, variance_power)


class GeneralizedLinearRegressionModel(
    HasCoefficientVector, PredictionModel, _Params, ModelIO, KeepsTrainingSummary, ConvertsToStock
):
    """A fitted GeneralizedLinearRegression: ``coefficients``, ``intercept`` (module docstring)."""

    _java_class = "org.apache.spark.ml.regression.GeneralizedLinearRegressionModel"
    _stock_class = _StockModel
    _diag_inv_atwa: np.ndarray | None = None  # the last IRLS step's diag((A^T W A)^-1), for the summary

    def __init__(self, coefficients=None, intercept=0.0) -> None:
        super().__init__()
        self._coefficients, self._intercept = coefficients, float(intercept)

    def __repr__(self) -> str:
        """MLlib's ``toString`` (the link in effect where ``link`` is unset)."""
        link = self.getLink() if self.isSet("link") else family_and_link(self)[1].name
        n = self.numFeatures if self._coefficients is not None else 0
        return (
            f"GeneralizedLinearRegressionModel: uid={self.uid}, family={self.getFamily()}, link={link}, numFeatures={n}"
        )

    def setLinkPredictionCol(self, value: str) -> GeneralizedLinearRegressionModel:
        """Sets the value of :py:attr:`linkPredictionCol`."""
        return self._set(linkPredictionCol=value)

    def predict(self, value: Vector) -> float:
        """The mean g^-1(x . beta + b) of one feature vector (no offset), as MLlib's ``predict``."""
        import torch

        family, link = family_and_link(self)
        eta = torch.tensor([self._margin(value)], dtype=torch.float64)
        return float(family.project(link.unlink(eta))[0])

    def _transform(self, dataset):
        def unavailable():
            raise RuntimeError(
                "GeneralizedLinearRegressionModel.transform scores in the JVM: the Spark Connect server could "
                "not load the model; set SPARKML_TEMP_DFS_PATH to a directory the server can read"
            )

        return self._stock_transform(dataset, unavailable)

    _data_schema = StructType([StructField("intercept", DoubleType()), StructField("coefficients", VectorUDT())])

    def _data_frame(self, spark):
        return spark.createDataFrame([(self._intercept, self._coefficients)], self._data_schema)

    @classmethod
    def _from_data(cls, row):
        return cls(DenseVector(row.coefficients.toArray()), row.intercept)

    def _java_args(self):
        return [self._coefficients, self._intercept]

    def _stock_in_jvm(self):
        """The stock model with a stock estimator of the same Params as its parent: MLlib's summaries fit the
        intercept-only model through ``parent`` for the null deviance of a model with an offset and an intercept."""
        from pyspark.ml.regression import GeneralizedLinearRegression as StockEstimator

        stock = super()._stock_in_jvm()
        estimator = StockEstimator()
        # the parent's uid is the model's, as MLlib's: the summary hands it the model's Params
        estimator._java_obj = estimator._new_java_obj(
            "org.apache.spark.ml.regression.GeneralizedLinearRegression", self.uid
        )
        estimator._resetUid(self.uid)
        params = {p.name: v for p, v in stock._paramMap.items() if estimator.hasParam(p.name)}
        estimator._set(**params)
        estimator._transfer_params_to_java()
        stock._java_obj.setParent(estimator._java_obj)
        return stock

    def _training_summary(self, record, dataset):
        from pyspark import SparkContext

        sc: Any = SparkContext._active_spark_context
        if sc is None or not hasattr(dataset, "_jdf"):  # Spark Connect
            return self._summary_from_evaluation(record, dataset)
        stock = self.toSpark()
        diag = self._diag_inv_atwa if self._diag_inv_atwa is not None else np.zeros(1)
        array = sc._gateway.new_array(sc._jvm.double, len(diag))
        for i, value in enumerate(diag):
            array[i] = float(value)
        jvm_class = sc._jvm.org.apache.spark.ml.regression.GeneralizedLinearRegressionTrainingSummary
        java = jvm_class(dataset._jdf, stock._java_obj, array, int(record.totalIterations), self.getSolver())
        summary: Any = GeneralizedLinearRegressionTrainingSummary(java)
        summary.__source_transformer__ = stock  # keeps a Spark Connect server's model alive with the summary
        return summary

    def _summary_from_evaluation(self, record, dataset):
        """The training summary as MLlib's evaluation of the stock model on the training rows plus this fit's
        iterations, solver and standard errors (``sparkml.base.summary``): where the JVM's training summary
        class cannot be reached (Spark Connect)."""
        from sparkml.base.summary import GeneralizedLinearRegressionTrainingSummary, training_summary

        return training_summary(
            GeneralizedLinearRegressionTrainingSummary,
            self.toSpark(),
            dataset,
            record,
            _numIterations=int(record.totalIterations),
            _solver=self.getSolver(),
            _diag_inv_atwa=self._diag_inv_atwa,
            _estimate=self._estimates(),
            _family_name=self.getFamily().lower(),
        )
