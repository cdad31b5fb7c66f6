"""GeneralizedLinearMixedModel's Params: the fixed effect's (MLlib's names, as GeneralizedLinearRegression's),
the random effects' three parallel lists, and the training Params, in the order its signature shows them.
"""

from __future__ import annotations

from sparkml.params import converters as c
from sparkml.params import training as t
from sparkml.params.declared import Declared
from sparkml.params.rules import Rule, at_least, choice_of

# the families and their canonical links (``sparkml.gpu.entity_glm`` solves each; a test checks they match)
MIXED_FAMILIES = ("gaussian", "binomial", "poisson")
CANONICAL_LINKS = {"gaussian": "identity", "binomial": "logit", "poisson": "log"}


def _all(check):
    return lambda values: all(check(v) for v in values)


MIXED_FAMILY = Declared(
    "family",
    c.to_string,
    "str",
    "The response's family: " + ", ".join(MIXED_FAMILIES) + " (each with its canonical link).",
    default="gaussian",
    rule=choice_of(MIXED_FAMILIES, ignore_case=True),
)
MIXED_LINK = Declared(
    "link",
    c.to_string,
    "str",
    "The link: the family's canonical one (" + ", ".join(f"{f}: {k}" for f, k in CANONICAL_LINKS.items()) + "); "
    "unset takes it.",
    rule=choice_of(tuple(CANONICAL_LINKS.values()), ignore_case=True),
)
MIXED_OFFSET_COL = Declared(
    "offsetCol", c.to_string, "str", "The offset column (a known term of the linear predictor); unset: none."
)
ENTITY_COLS = Declared(
    "entityCols",
    c.to_list_string,
    "list[str]",
    "The random effects' entity id columns (string or integer), one per effect: each distinct value is an "
    "entity with its own intercept and coefficients.",
    rule=Rule(lambda v: len(v) >= 1 and len(set(v)) == len(v) and all(v), "must name one or more distinct columns"),
)
ENTITY_FEATURES_COLS = Declared(
    "entityFeaturesCols",
    c.to_list_string,
    "list[str]",
    "Each random effect's own feature vector column, in entityCols' order; '' for an intercept-only effect. "
    "Unset: every effect is intercept-only.",
)
ENTITY_REG_PARAMS = Declared(
    "entityRegParams",
    c.to_list_float,
    "list[float]",
    "Each random effect's L2 strength on its entities' intercepts and coefficients, in entityCols' order (> 0: "
    "an entity has few rows, and without a penalty its small GLM has no unique optimum). Unset: 1.0 for each.",
    rule=Rule(_all(lambda v: 0 < v < float("inf")), "must hold finite numbers > 0"),
)
MIXED_MAX_ITER = t.MAX_ITER.with_default(20).with_rule(at_least(1))  # coordinate-descent passes
MIXED_TOL = t.TOL.with_default(1e-6)

GENERALIZED_LINEAR_MIXED_MODEL = (
    t.LABEL_COL,
    t.FEATURES_COL,
    t.PREDICTION_COL,
    MIXED_FAMILY,
    MIXED_LINK,
    t.FIT_INTERCEPT.with_default(True),
    MIXED_MAX_ITER,
    MIXED_TOL,
    t.REG_PARAM.with_default(0.0),
    t.ELASTIC_NET_PARAM.with_default(0.0),
    t.WEIGHT_COL,
    MIXED_OFFSET_COL,
    ENTITY_COLS,
    ENTITY_FEATURES_COLS,
    ENTITY_REG_PARAMS,
    t.AGGREGATION_DEPTH,  # the fixed effect's sums under "sync"
    t.STRATEGY.with_rule(choice_of(("auto", "sync", "allreduce"))),  # the fixed effect's exact quasi-Newton fit
    t.DEVICE,
    t.DTYPE.with_default("float64"),  # the fixed effect's stored features: F's rounding, not float32's
    *t.TRAINING[3:],
)
