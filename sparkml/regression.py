"""Regressors: ``from sparkml.regression import LinearRegression, GeneralizedLinearRegression``."""

from sparkml.glm.estimator import GeneralizedLinearRegression
from sparkml.glm.model import GeneralizedLinearRegressionModel
from sparkml.linear.linear_regression import LinearRegression, LinearRegressionModel

__all__ = [
    "GeneralizedLinearRegression",
    "GeneralizedLinearRegressionModel",
    "LinearRegression",
    "LinearRegressionModel",
]
