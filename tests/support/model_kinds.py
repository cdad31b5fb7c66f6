"""The four linear models the model-level tests (test_model_outputs, test_persistence) fit on
``data_helpers.linear_frame``: ours and the stock pyspark.ml classes, their fit Params and the
output columns of their transform. conftest.py's ``fitted`` fixture fits them."""

from collections import namedtuple

import pytest
from pyspark.ml import classification as stock_classification
from pyspark.ml import regression as stock_regression

from sparkml.classification import LinearSVC, LinearSVCModel, LogisticRegression, LogisticRegressionModel
from sparkml.regression import LinearRegression, LinearRegressionModel

Kind = namedtuple("Kind", "estimator model stock_estimator stock_model params columns")

CLASSIFIER_OUT = ["rawPrediction", "probability", "prediction"]
KINDS = {
    "lr_binary": Kind(
        LogisticRegression,
        LogisticRegressionModel,
        stock_classification.LogisticRegression,
        stock_classification.LogisticRegressionModel,
        {"regParam": 0.01},
        CLASSIFIER_OUT,
    ),
    "lr_multinomial": Kind(
        LogisticRegression,
        LogisticRegressionModel,
        stock_classification.LogisticRegression,
        stock_classification.LogisticRegressionModel,
        {"regParam": 0.01, "labelCol": "label3"},
        CLASSIFIER_OUT,
    ),
    "svc": Kind(
        LinearSVC,
        LinearSVCModel,
        stock_classification.LinearSVC,
        stock_classification.LinearSVCModel,
        {"regParam": 0.5, "maxIter": 25},
        ["rawPrediction", "prediction"],
    ),
    "linreg": Kind(
        LinearRegression,
        LinearRegressionModel,
        stock_regression.LinearRegression,
        stock_regression.LinearRegressionModel,
        {"regParam": 0.01, "labelCol": "y"},
        ["prediction"],
    ),
}

# (name, make(**Params)): the problems every strategy must solve to sync's optimum (test_strategies,
# test_first_order_fits); the first three are smooth up to an L1 term
STRATEGY_CASES = [
    ("binary logistic", lambda **k: LogisticRegression(regParam=0.01, **k)),
    (
        "multinomial logistic, elastic net",
        lambda **k: LogisticRegression(labelCol="label3", regParam=0.02, elasticNetParam=0.5, **k),
    ),
    (
        "linear regression l-bfgs, elastic net",
        lambda **k: LinearRegression(labelCol="y", solver="l-bfgs", regParam=0.1, elasticNetParam=0.3, **k),
    ),
    ("linear svc", lambda **k: LinearSVC(regParam=0.01, maxIter=30, **k)),
]


def compat_cases(cases, marked=1):
    """``cases`` (name, make) as pytest params by name, the first ``marked`` of them in the compatibility run
    (``make test-compat``: each strategy on one or two problems there, every problem here)."""
    return [
        pytest.param(*case, id=case[0], marks=[pytest.mark.compat] if i < marked else [])
        for i, case in enumerate(cases)
    ]
