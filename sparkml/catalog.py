"""The public estimators and their models: one row each, read by persistence, the facades' tests and the jobs.

A row names where each class is defined and where users import it from, so the public name of a class
(``sparkml.classification.LogisticRegression``, written into saved estimators) is known without importing
the facades, and the jobs find an estimator by its config name and a saved model by its metadata ``class``.
This module imports nothing of the library: every floor may read it.

Adding an estimator: its own module (estimator and model), one row here, and its names in the facade's
imports (``sparkml/classification.py`` or ``sparkml/regression.py``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    """One public estimator and its model.

    Attributes:
        name: the estimator's class name, also its name in job configs (``LogisticRegression``).
        facade: the module users import it from (``sparkml.classification``).
        package: the package whose modules define the estimator and the model classes.
        task: ``classification`` or ``regression`` (which metrics the jobs compute).
        saved_class: the ``class`` a saved model's metadata holds: MLlib's JVM class for the models MLlib has,
            this library's public name otherwise.
        stock_model: ``module:Class`` of pyspark.ml's model that reads the same files, or None.
    """

    name: str
    facade: str
    package: str
    task: str
    saved_class: str
    stock_model: str | None

    @property
    def model_name(self) -> str:
        return self.name + "Model"

    def estimator_path(self) -> str:
        """``module:Class`` of the estimator, as users import it."""
        return f"{self.facade}:{self.name}"

    def model_path(self) -> str:
        """``module:Class`` of the model, as users import it."""
        return f"{self.facade}:{self.model_name}"


ENTRIES = (
    Entry(
        "LogisticRegression",
        "sparkml.classification",
        "sparkml.linear",
        "classification",
        "org.apache.spark.ml.classification.LogisticRegressionModel",
        "pyspark.ml.classification:LogisticRegressionModel",
    ),
    Entry(
        "LinearSVC",
        "sparkml.classification",
        "sparkml.linear",
        "classification",
        "org.apache.spark.ml.classification.LinearSVCModel",
        "pyspark.ml.classification:LinearSVCModel",
    ),
    Entry(
        "KernelSVC",
        "sparkml.classification",
        "sparkml.kernel",
        "classification",
        "sparkml.classification.KernelSVCModel",
        None,
    ),
    Entry(
        "LinearRegression",
        "sparkml.regression",
        "sparkml.linear",
        "regression",
        "org.apache.spark.ml.regression.LinearRegressionModel",
        "pyspark.ml.regression:LinearRegressionModel",
    ),
    Entry(
        "GeneralizedLinearRegression",
        "sparkml.regression",
        "sparkml.glm",
        "regression",
        "org.apache.spark.ml.regression.GeneralizedLinearRegressionModel",
        "pyspark.ml.regression:GeneralizedLinearRegressionModel",
    ),
    Entry(
        "GeneralizedLinearMixedModel",
        "sparkml.regression",
        "sparkml.glm",
        "regression",
        "sparkml.regression.GeneralizedLinearMixedModelModel",
        None,
    ),
)


def by_name() -> dict[str, Entry]:
    """The rows by estimator name (read at each call: the table is the one place a row is added)."""
    return {e.name: e for e in ENTRIES}


def by_saved_class() -> dict[str, Entry]:
    """The rows by the ``class`` their saved models' metadata holds."""
    return {e.saved_class: e for e in ENTRIES}


def public_class_name(cls: type) -> str:
    """``<facade>.<name>`` for a public estimator or model class (looked up by its name and defining package,
    so a user's subclass elsewhere keeps its own name); ``<module>.<name>`` for any other class."""
    for entry in ENTRIES:
        if cls.__name__ in (entry.name, entry.model_name) and cls.__module__.startswith(entry.package + "."):
            return f"{entry.facade}.{cls.__name__}"
    return f"{cls.__module__}.{cls.__name__}"


def import_path(path: str) -> type:
    """The object at ``module:attribute``."""
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)
