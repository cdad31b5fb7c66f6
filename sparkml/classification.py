"""Classifiers: ``from sparkml.classification import LogisticRegression, LinearSVC, KernelSVC`` (and models)."""

from sparkml.kernel.kernel_svc import KernelSVC, KernelSVCModel
from sparkml.linear.linear_svc import LinearSVC, LinearSVCModel
from sparkml.linear.logistic_regression import LogisticRegression, LogisticRegressionModel

__all__ = [
    "LogisticRegression",
    "LogisticRegressionModel",
    "LinearSVC",
    "LinearSVCModel",
    "KernelSVC",
    "KernelSVCModel",
]
