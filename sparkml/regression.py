"""Regressors: ``from sparkml.regression import LinearRegression, LinearRegressionModel``."""

from sparkml.linear.linear_regression import LinearRegression, LinearRegressionModel

__all__ = ["LinearRegression", "LinearRegressionModel"]
