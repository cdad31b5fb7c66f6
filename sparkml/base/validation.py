"""The estimators' checks of their Params and labels, made before any iteration runs.

* Params (``check_params``): values MLlib would reject, checked before any data is touched.
* The labels of each model (``classification_labels``, ``binary_labels``), from the conversion's
  statistics.

The checks of the data itself (schema, null, NaN or infinite values, ragged vectors, weights) are
``sparkml.data.checks``. Each raises ``ValueError`` naming the Param or column and the problem.
"""

from sparkml.data.statistics import MAX_CLASSES

# (Param, accepted, why not): the rules every estimator shares, when it has the Param
COMMON_RULES = (
    ("maxIter", lambda v: v >= 0, "must be >= 0"),
    ("tol", lambda v: v >= 0, "must be >= 0"),
    ("regParam", lambda v: v >= 0, "must be >= 0"),
    ("elasticNetParam", lambda v: 0 <= v <= 1, "must be in [0, 1]"),
    ("aggregationDepth", lambda v: v >= 2, "must be >= 2"),
    ("numWorkers", lambda v: v >= 0, "must be >= 0"),
    ("localIter", lambda v: v >= 1, "must be >= 1"),
    ("staleness", lambda v: v >= 0, "must be >= 0"),
)
BOUND_PARAMS = (
    "lowerBoundsOnCoefficients",
    "upperBoundsOnCoefficients",
    "lowerBoundsOnIntercepts",
    "upperBoundsOnIntercepts",
)


def check_params(est, rules=()):
    """ValueError for the first Param of ``est`` that breaks ``COMMON_RULES`` or ``rules``."""
    for name, ok, why in COMMON_RULES + tuple(rules):
        if est.hasParam(name) and est.isDefined(name) and not ok(est.getOrDefault(name)):
            raise ValueError(f"{name} {why}; got {est.getOrDefault(name)}")


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
    """MLlib's rules for LinearRegression's loss='huber': epsilon > 1, no normal solver, L2 only."""
    check_choice("loss", est.getOrDefault("loss"), ("squaredError", "huber"))
    if not est.getOrDefault("epsilon") > 1:
        raise ValueError(f"epsilon must be > 1.0; got {est.getOrDefault('epsilon')}")
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


def check_choice(name, value, allowed, why=""):
    """ValueError unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}{why}; got {value!r}")


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
