"""A toy estimator package, as a user or the next contributor would add one: ``ridge.py`` (the estimator and its
model) plus this facade; ``tests/test_catalog.py`` adds its one ``sparkml.catalog`` row."""

from support.toy_estimators.ridge import ToyRidge, ToyRidgeModel

__all__ = ["ToyRidge", "ToyRidgeModel"]
