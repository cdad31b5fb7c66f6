"""Classifiers: ``from sparkml.classification import LogisticRegression, LinearSVC`` (and their models)."""
from sparkml.linear_svc import LinearSVC, LinearSVCModel
from sparkml.logistic_regression import LogisticRegression, LogisticRegressionModel

__all__ = ["LogisticRegression", "LogisticRegressionModel", "LinearSVC", "LinearSVCModel"]
