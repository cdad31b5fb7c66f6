"""Each linear estimator's Params, in the order its signature lists them: MLlib's (pyspark's descriptions and
defaults), an estimator's own rules where MLlib's validators set them, and this library's training Params.

A model class has its estimator's Params. Read by the estimator's pyspark Params (``sparkml.base.params.declares``:
the Params, getters, setters, defaults and signature), its checks (``base.validation.param_rules``) and its saved
files' reader (``sparkml.saved.classes``). KernelSVC's are ``sparkml.params.kernel_svc``'s.
"""

from __future__ import annotations

from sparkml.params import converters as c
from sparkml.params import training as t
from sparkml.params.declared import Declared
from sparkml.params.rules import Rule, choice_of

# GeneralizedLinearRegression's families and links (``sparkml.gpu.glm`` implements each; a test checks they match)
GLM_FAMILIES = ("gaussian", "binomial", "poisson", "gamma", "tweedie")
GLM_LINKS = ("identity", "log", "inverse", "logit", "probit", "cloglog", "sqrt")


def _mllib(name, converter, type_, rule=None):
    return Declared(name, converter, type_, rule=rule)


_COLUMNS = (t.FEATURES_COL, t.LABEL_COL, t.PREDICTION_COL)
_THRESHOLDS = _mllib("thresholds", c.to_list_float, "list[float]")
_FAMILY = _mllib("family", c.to_string, "str")
_BOUNDS = (
    _mllib("lowerBoundsOnCoefficients", c.to_matrix, "Matrix"),
    _mllib("upperBoundsOnCoefficients", c.to_matrix, "Matrix"),
    _mllib("lowerBoundsOnIntercepts", c.to_vector, "Vector"),
    _mllib("upperBoundsOnIntercepts", c.to_vector, "Vector"),
)
_LINEAR_TRAINING = (*t.TRAINING[:4], *t.SOLVER_OPTIONS, *t.TRAINING[4:])  # the signatures' order

LOGISTIC_REGRESSION = (
    *_COLUMNS,
    t.MAX_ITER,
    t.REG_PARAM,
    t.ELASTIC_NET_PARAM,
    t.TOL,
    t.FIT_INTERCEPT,
    t.THRESHOLD,
    _THRESHOLDS,
    t.PROBABILITY_COL,
    t.RAW_PREDICTION_COL,
    t.STANDARDIZATION,
    t.WEIGHT_COL,
    t.AGGREGATION_DEPTH,
    _FAMILY,
    *_BOUNDS,
    t.MAX_BLOCK_SIZE_IN_MB,
    *_LINEAR_TRAINING,
    t.CLASS_WEIGHT,
)

LINEAR_SVC = (
    *_COLUMNS,
    t.MAX_ITER,
    t.REG_PARAM,
    t.TOL,
    t.RAW_PREDICTION_COL,
    t.FIT_INTERCEPT,
    t.STANDARDIZATION,
    t.THRESHOLD,
    t.WEIGHT_COL,
    t.AGGREGATION_DEPTH,
    t.MAX_BLOCK_SIZE_IN_MB,
    *_LINEAR_TRAINING,
    t.CLASS_WEIGHT,
)

LINEAR_REGRESSION = (
    *_COLUMNS,
    t.MAX_ITER,
    t.REG_PARAM,
    t.ELASTIC_NET_PARAM,
    t.TOL,
    t.FIT_INTERCEPT,
    t.STANDARDIZATION,
    _mllib("solver", c.to_string, "str", choice_of(("auto", "normal", "l-bfgs"))),
    t.WEIGHT_COL,
    t.AGGREGATION_DEPTH,
    _mllib("loss", c.to_string, "str", choice_of(("squaredError", "huber"))),
    _mllib("epsilon", c.to_float, "float", Rule(lambda v: v > 1, "must be > 1.0")),
    t.MAX_BLOCK_SIZE_IN_MB,
    *_LINEAR_TRAINING,
)

GENERALIZED_LINEAR_REGRESSION = (
    t.LABEL_COL,
    t.FEATURES_COL,
    t.PREDICTION_COL,
    _mllib("family", c.to_string, "str", choice_of(GLM_FAMILIES, ignore_case=True)),  # MLlib reads any case
    _mllib("link", c.to_string, "str", choice_of(GLM_LINKS, ignore_case=True)),
    t.FIT_INTERCEPT,
    t.MAX_ITER,
    t.TOL,
    t.REG_PARAM,
    t.ELASTIC_NET_PARAM,  # not MLlib's GLR's: saved beside its Params (``_own_param_names``)
    t.WEIGHT_COL,
    _mllib("solver", c.to_string, "str", choice_of(("irls",))),
    _mllib("linkPredictionCol", c.to_string, "str"),
    _mllib(
        "variancePower",
        c.to_float,
        "float",
        Rule(lambda v: v == 0.0 or 1.0 <= v < float("inf"), "must be 0 or a finite number >= 1"),
    ),
    _mllib(
        "linkPower", c.to_float, "float", Rule(lambda v: v is None or abs(v) < float("inf"), "must be a finite number")
    ),
    _mllib("offsetCol", c.to_string, "str"),
    t.AGGREGATION_DEPTH,
    t.STRATEGY.with_rule(choice_of(("auto", "sync", "allreduce"))),  # IRLS: exact sums, one solve per pass
    *t.TRAINING[1:],
)
