"""The estimators' checks of their Params and labels, made before any iteration runs.

* Params (``check_params``): values MLlib would reject, checked before any data is touched: each Param's rule
  (its declaration's: ``sparkml.params``), then the checks across Params
  (``check_bounds_params``, ``check_huber_params``).
* The labels of each model (``classification_labels``, ``binary_labels``), from the conversion's
  statistics.
* The fitted model (``check_finite_model``): no fit returns non-finite coefficients.

The checks of the data itself (schema, null, NaN or infinite values, ragged vectors, weights) are
``sparkml.data.checks``. Each raises ``ValueError`` naming the Param or column and the problem.
"""

import numpy as np

from sparkml.data.statistics import MAX_CLASSES
from sparkml.params.declared import rules
from sparkml.params.rules import first_problem
from sparkml.params.training import RULES

BOUND_PARAMS = (
    "lowerBoundsOnCoefficients",
    "upperBoundsOnCoefficients",
    "lowerBoundsOnIntercepts",
    "upperBoundsOnIntercepts",
)


def param_rules(estimator):
    """Param name -> ``sparkml.params.rules.Rule`` of an estimator (class or instance): the shared Params' rules
    (``sparkml.params.training.RULES``), its declarations' replacing them for the same Param."""
    return {**RULES, **rules(getattr(estimator, "_declared", ()))}


def check_params(est):
    """ValueError for the first Param of ``est`` that breaks its rule (``param_rules``)."""
    values = {p.name: est.getOrDefault(p) for p in est.params if est.isDefined(p)}
    found = first_problem(param_rules(est), values)
    if found is not None:
        raise ValueError(found[1])


def check_bounds_params(est):
    """MLlib's rules for LogisticRegression's bound Params that need no data (its
    ``validateAndTransformSchema``): with any bound set, elasticNetParam must be 0 (L-BFGS-B has no L1
    term); intercept bounds need fitIntercept. The shapes are checked by ``linear.bounds``."""
    bounded = [name for name in BOUND_PARAMS if est.hasParam(name) and est.isSet(name)]
    if bounded and est.getOrDefault("elasticNetParam") != 0:
        raise ValueError(
            f"elasticNetParam must be 0 when {bounded[0]} is set: fitting under bound constrained "
            f"optimization only supports L2 regularization; got {est.getOrDefault('elasticNetParam')}"
        )
    intercepts = [name for name in bounded if name.endswith("Intercepts")]
    if intercepts and not est.getOrDefault("fitIntercept"):
        raise ValueError(
            f"{intercepts[0]} is set but fitIntercept is False: don't set bounds on intercepts "
            f"if fitting without intercept"
        )


def check_huber_params(est):
    """MLlib's rules for LinearRegression's loss='huber' across Params: no normal solver, L2 only (``loss``'s and
    ``epsilon``'s own are their declarations': ``sparkml.params.estimators``)."""
    if est.getOrDefault("loss") != "huber":
        return
    if est.getOrDefault("solver") == "normal":
        raise ValueError(
            "solver='normal' does not support loss='huber': LinearRegression with huber loss doesn't "
            "support normal solver, please change solver to auto or l-bfgs"
        )
    if est.getOrDefault("elasticNetParam") != 0:
        raise ValueError(
            f"elasticNetParam must be 0 with loss='huber': LinearRegression with huber loss only "
            f"supports L2 regularization; got {est.getOrDefault('elasticNetParam')}"
        )


def classification_labels(summary, label_col, family="auto"):
    """Number of classes; ValueError unless labels are 0..K-1 with at least two classes present."""
    if not summary.label_integral or summary.label_min < 0:
        raise ValueError(
            f"label column {label_col!r} must hold class indices 0, 1, ..., K-1; "
            f"found {'negative' if summary.label_min < 0 else 'non-integer'} labels "
            f"(min {summary.label_min:g}, max {summary.label_max:g}); index string labels with StringIndexer"
        )
    num_classes = int(summary.label_max) + 1
    if family == "binomial" and num_classes > 2:
        raise ValueError(
            f"label column {label_col!r} has labels up to {summary.label_max:g}, but family='binomial' "
            f"needs labels in {{0, 1}}; use family='multinomial' or 'auto'"
        )
    if not len(summary.class_weights):  # the conversion histograms labels below MAX_CLASSES only
        raise ValueError(
            f"label column {label_col!r} has labels up to {summary.label_max:g}: more than {MAX_CLASSES} "
            f"classes are not supported"
        )
    present = int((summary.class_weights > 0).sum())
    if present < 2:
        raise ValueError(
            f"label column {label_col!r} has a single class ({summary.label_max:g}): "
            f"a classifier needs at least two classes with positive weight"
        )
    return max(num_classes, 2)


def binary_labels(summary, label_col, model="LinearSVC"):
    """ValueError unless labels are exactly 0/1 and both are present."""
    if not summary.label_integral or summary.label_min < 0 or summary.label_max > 1:
        raise ValueError(
            f"{model} is a binary classifier: label column {label_col!r} must hold 0 or 1; "
            f"found labels in [{summary.label_min:g}, {summary.label_max:g}]"
        )
    return classification_labels(summary, label_col, "binomial")


MODEL_NUMBERS = ("coefficients", "intercept", "coefficientMatrix", "interceptVector", "plattCoefficients")


def nonfinite_numbers(model):
    """The names among ``MODEL_NUMBERS`` of ``model``'s numbers that hold a NaN or an infinity (a property
    the model does not have, or that does not apply to it, is skipped)."""
    bad = []
    for name in MODEL_NUMBERS:
        try:
            value = getattr(model, name)
        except Exception:  # e.g. a multinomial model's coefficients
            continue
        if value is None:
            continue
        values = value.toArray() if hasattr(value, "toArray") else np.asarray(value, dtype=np.float64)
        if not np.all(np.isfinite(values)):
            bad.append(name)
    return bad


def check_finite_model(est, model):
    """ValueError when the fitted ``model`` holds non-finite numbers: the fit diverged (an objective without a
    finite minimum for these Params, or a step the arithmetic could not represent); MLlib would return such a
    model, whose every prediction is NaN. The message names the Params set, which led there."""
    bad = nonfinite_numbers(model)
    if bad:
        params = ", ".join(f"{p.name}={v!r}" for p, v in sorted(est._paramMap.items(), key=lambda kv: kv[0].name))
        raise ValueError(
            f"{type(est).__name__}: the fit ended with non-finite {', '.join(bad)} (it diverged), so no model is "
            f"returned; the Params set: {params or 'none (the defaults)'}"
        )
    return model
