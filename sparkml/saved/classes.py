"""What each saved model class's files hold, without pyspark: the columns and types of its data row, the sizes
of its vectors and matrices, and its Params' types and bounds. ``sparkml.saved.model_files`` checks a directory
against the class its metadata names (``SAVED``); the Spark loader and ``sparkml.serving`` share them.

A class's Params are its estimator's declarations (``sparkml.params``), each read by the type converter it
declares, plus the bounds MLlib's validators set where scoring depends on them (``threshold`` of
LogisticRegression in [0, 1], ``thresholds`` non-negative). ``tests/test_saved_classes.py`` checks that the
columns are those the models write.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparkml.params import mllib_structs as structs
from sparkml.params.declared import converters
from sparkml.params.estimators import (
    GENERALIZED_LINEAR_REGRESSION,
    LINEAR_REGRESSION,
    LINEAR_SVC,
    LOGISTIC_REGRESSION,
)
from sparkml.params.kernel_svc import KERNEL_SVC, KERNELS, METHODS
from sparkml.params.mixed import GENERALIZED_LINEAR_MIXED_MODEL

# ---- bounds (MLlib's ParamValidators) and checks across the metadata and the row ---------------------------


def _unit_interval(value):
    return None if 0 <= value <= 1 else "must be in [0, 1]"


def _thresholds(values):
    if not all(v >= 0 for v in values) or sum(v == 0 for v in values) > 1:
        return "must be >= 0, at most one of them 0"
    return None


def _logistic_check(row, params):
    thresholds = params.get("thresholds")
    if thresholds is not None and len(thresholds) != row["numClasses"]:
        return "metadata", f"Param 'thresholds' has {len(thresholds)} values; the model has {row['numClasses']} classes"
    return None


def _kernel_svc_check(row, params):
    """One-vs-one pairs: each two different classes of the model, each pair once."""
    pairs = row.get("pairs")
    if pairs is None:
        return None
    seen = set()
    for a, b in structs.matrix_array(pairs).tolist():
        bad = next((c for c in (a, b) if not (c.is_integer() and 0 <= c < row["numClasses"])), None)
        if bad is not None:
            return "data", f"column 'pairs' names class {bad:g}; the model has classes 0 to {row['numClasses'] - 1}"
        if a == b:
            return "data", f"column 'pairs' pairs class {a:g} with itself"
        if frozenset((a, b)) in seen:
            return "data", f"column 'pairs' holds the pair ({a:g}, {b:g}) twice"
        seen.add(frozenset((a, b)))
    return None


def _mixed_check(row, params):
    """One width per random effect; a width of 0 exactly where the effect has no features column."""
    widths, entities = row["effectWidths"], params.get("entityCols") or []
    if len(widths) != len(entities):
        return "data", f"column 'effectWidths' has {len(widths)} values; the model has {len(entities)} random effects"
    features = params.get("entityFeaturesCols") or [""] * len(entities)
    for r, (w, z) in enumerate(zip(widths, features)):
        if w is None or w < 0 or (w == 0) != (not z):
            return "data", f"column 'effectWidths' gives random effect {r} ({z or 'intercept only'}) {w} features"
    return None


# ---- the classes -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SavedClass:
    """What one model class saves. ``columns``: (name, Spark type) of the data row, as Spark's
    ``simpleString`` names them; ``optional``: those a file may lack (added after files were written without
    them); ``shapes(row)``: {column: shape} of its vectors (``(n,)``) and matrices (``(rows, cols)``), an
    entry a string where a size must be the same wherever it appears (ValueError: the row makes no model);
    ``params``: {Param name: its type converter}; ``bounds``: {Param name: a function of the converted value
    giving what is wrong with it, or None}; ``check(row, params)``: ("metadata" or "data", what is wrong) or
    None, across the two."""

    name: str
    saved_class: str
    sparkml_class: str
    columns: tuple[tuple[str, str], ...]
    shapes: Callable[[dict], dict]
    params: dict[str, Callable[[Any], Any]]
    bounds: dict[str, Callable[[Any], str | None]] = field(default_factory=dict)
    optional: tuple[str, ...] = ()
    check: Callable[[dict, dict], tuple[str, str] | None] | None = None


def _one_output_shapes(row):
    return {"coefficients": ("numFeatures",)}


def _logistic_shapes(row):
    outputs = row["numClasses"] if row["isMultinomial"] else 1
    return {"coefficientMatrix": (outputs, row["numFeatures"]), "interceptVector": (outputs,)}


def _kernel_svc_shapes(row):
    if row["kernel"] not in KERNELS:
        raise ValueError(f"kernel is {row['kernel']!r}, expected one of {', '.join(KERNELS)}")
    if row["method"] not in METHODS:
        raise ValueError(f"method is {row['method']!r}, expected 'nystroem' or 'rff'")
    if row["numClasses"] < 2:
        raise ValueError(f"numClasses is {row['numClasses']}, expected at least 2")
    pairs = row.get("pairs")
    problems = 1 if row["numClasses"] == 2 else row["numClasses"]
    if pairs is not None:
        problems = row["numClasses"] * (row["numClasses"] - 1) // 2
    if row["method"] == "rff":  # basis: the frequencies, one row per kernel feature
        shapes: dict[str, tuple[int | str, ...]] = {
            "basis": ("kernelFeatures", "numFeatures"),
            "offsets": ("kernelFeatures",),
        }
    else:  # basis: the landmarks
        shapes = {"basis": ("landmarks", "numFeatures"), "projection": ("landmarks", "kernelFeatures")}
    shapes.update(coefficientMatrix=(problems, "kernelFeatures"), interceptVector=(problems,))
    if row["platt"] is not None:
        shapes["platt"] = (problems, 2)
    if pairs is not None:
        shapes["pairs"] = (problems, 2)
    return shapes


_LOGISTIC = SavedClass(
    "LogisticRegressionModel",
    "org.apache.spark.ml.classification.LogisticRegressionModel",
    "sparkml.linear.logistic_regression.LogisticRegressionModel",
    (
        ("numClasses", "int"),
        ("numFeatures", "int"),
        ("interceptVector", "vector"),
        ("coefficientMatrix", "matrix"),
        ("isMultinomial", "boolean"),
    ),
    _logistic_shapes,
    converters(LOGISTIC_REGRESSION),
    bounds={"threshold": _unit_interval, "thresholds": _thresholds},
    check=_logistic_check,
)
_LINEAR_SVC = SavedClass(
    "LinearSVCModel",
    "org.apache.spark.ml.classification.LinearSVCModel",
    "sparkml.linear.linear_svc.LinearSVCModel",
    (("coefficients", "vector"), ("intercept", "double")),
    _one_output_shapes,
    converters(LINEAR_SVC),
)
_LINEAR_REGRESSION = SavedClass(
    "LinearRegressionModel",
    "org.apache.spark.ml.regression.LinearRegressionModel",
    "sparkml.linear.linear_regression.LinearRegressionModel",
    (("intercept", "double"), ("coefficients", "vector"), ("scale", "double")),
    _one_output_shapes,
    converters(LINEAR_REGRESSION),
)
_KERNEL_SVC = SavedClass(
    "KernelSVCModel",
    "sparkml.classification.KernelSVCModel",
    "sparkml.kernel.model.KernelSVCModel",
    (
        ("numClasses", "int"),
        ("gamma", "double"),
        ("degree", "int"),
        ("coef0", "double"),
        ("kernel", "string"),
        ("method", "string"),
        ("basis", "matrix"),
        ("projection", "matrix"),
        ("offsets", "vector"),
        ("coefficientMatrix", "matrix"),
        ("interceptVector", "vector"),
        ("platt", "matrix"),
        ("pairs", "matrix"),  # one-vs-one: (problems, 2) class pairs; null for one-vs-rest
    ),
    _kernel_svc_shapes,
    converters(KERNEL_SVC),
    optional=("pairs",),  # models saved before one-vs-one existed are one-vs-rest
    check=_kernel_svc_check,
)

_GENERALIZED_LINEAR_REGRESSION = SavedClass(
    "GeneralizedLinearRegressionModel",
    "org.apache.spark.ml.regression.GeneralizedLinearRegressionModel",
    "sparkml.glm.model.GeneralizedLinearRegressionModel",
    (("intercept", "double"), ("coefficients", "vector")),
    _one_output_shapes,
    converters(GENERALIZED_LINEAR_REGRESSION),
)

_GENERALIZED_LINEAR_MIXED_MODEL = SavedClass(
    "GeneralizedLinearMixedModelModel",
    "sparkml.regression.GeneralizedLinearMixedModelModel",
    "sparkml.glm.mixed_model.GeneralizedLinearMixedModelModel",
    (("intercept", "double"), ("coefficients", "vector"), ("effectWidths", "array<int>")),
    _one_output_shapes,
    converters(GENERALIZED_LINEAR_MIXED_MODEL),
    check=_mixed_check,
)

SAVED = {
    c.saved_class: c
    for c in (
        _LOGISTIC,
        _LINEAR_SVC,
        _LINEAR_REGRESSION,
        _KERNEL_SVC,
        _GENERALIZED_LINEAR_REGRESSION,
        _GENERALIZED_LINEAR_MIXED_MODEL,
    )
}
