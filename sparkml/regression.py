"""Regressors: ``from sparkml.regression import LinearRegression, GeneralizedLinearRegression,
GeneralizedLinearMixedModel``."""

from sparkml.glm.estimator import GeneralizedLinearRegression
from sparkml.glm.mixed import GeneralizedLinearMixedModel
from sparkml.glm.mixed_model import GeneralizedLinearMixedModelModel
from sparkml.glm.model import GeneralizedLinearRegressionModel
from sparkml.linear.linear_regression import LinearRegression, LinearRegressionModel

__all__ = [
    "GeneralizedLinearMixedModel",
    "GeneralizedLinearMixedModelModel",
    "GeneralizedLinearRegression",
    "GeneralizedLinearRegressionModel",
    "LinearRegression",
    "LinearRegressionModel",
]
