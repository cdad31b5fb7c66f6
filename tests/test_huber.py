"""LinearRegression(loss="huber"): MLlib's robust regression with a jointly estimated scale, fitted side by
side with pyspark.ml's on data with 5% gross outliers.

Coefficients, intercept and scale (sigma) within 1e-4 of MLlib's, from the same start (the objective
histories begin at the same value) to an objective no higher. The refusals (elastic net, the normal
solver, epsilon <= 1) are in tests/test_bad_input.py; the row loss's derivatives in tests/test_gpu_huber.py.
"""

import numpy as np
import pytest
from pyspark.ml.regression import LinearRegression as StockLinearRegression
from support.data_helpers import huber_frame
from support.helpers import training_summary

from sparkml.regression import LinearRegression

CASES = {
    "intercept": dict(),
    "intercept, regParam": dict(regParam=0.1),
    "no intercept, regParam": dict(fitIntercept=False, regParam=0.1),
    "no standardization, weights, epsilon": dict(regParam=0.1, standardization=False, weightCol="w", epsilon=1.8),
}


@pytest.fixture(scope="module")
def frame(spark):
    df = huber_frame(spark)
    yield df
    df.unpersist()


@pytest.fixture(scope="module")
def stock(frame):
    cache = {}

    def get(case):
        if case not in cache:
            cache[case] = StockLinearRegression(loss="huber", **CASES[case]).fit(frame)
        return cache[case]

    return get


def _numbers(model):
    return np.concatenate([model.coefficients.toArray(), [model.intercept, model.scale]])


@pytest.mark.parametrize("strategy", ["sync", "allreduce"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_huber_fit_matches_mllib(frame, stock, case, strategy):
    ours = LinearRegression(loss="huber", dtype="float64", strategy=strategy, **CASES[case]).fit(frame)
    theirs = stock(case)
    diff = np.abs(_numbers(ours) - _numbers(theirs)).max()
    assert diff <= 1e-4, f"max difference to MLlib {diff:.2e}: {_numbers(ours)} vs {_numbers(theirs)}"
    history, stock_history = training_summary(ours).objectiveHistory, training_summary(theirs).objectiveHistory
    assert history[0] == pytest.approx(stock_history[0], rel=1e-12)  # MLlib's start, MLlib's objective
    assert history[-1] <= stock_history[-1] + 1e-12
    assert ours.scale > 0
    if not CASES[case].get("fitIntercept", True):
        assert ours.intercept == 0.0


def test_huber_resists_the_outliers(frame):
    """The data's line is y = x.(1, -0.5, 2, 0.3) + 1.5 with N(0, 0.5) noise: huber recovers it, squared
    error is pulled away by the outliers; sigma is of the order of the inliers' noise (0.35 here)."""
    truth = np.array([1.0, -0.5, 2.0, 0.3, 1.5])
    huber = LinearRegression(loss="huber").fit(frame)
    squared = LinearRegression().fit(frame)
    huber_error = np.abs(_numbers(huber)[:-1] - truth).max()
    squared_error = np.abs(np.append(squared.coefficients.toArray(), squared.intercept) - truth).max()
    assert huber_error < 0.05 < squared_error
    assert 0.2 < huber.scale < 0.6 and squared.scale == 1.0


def test_averaging_keeps_sigma_positive(frame, stock):
    ours = LinearRegression(loss="huber", regParam=0.1, dtype="float64", strategy="averaging").fit(frame)
    assert ours.scale > 0
    assert np.abs(_numbers(ours) - _numbers(stock("intercept, regParam"))).max() <= 1e-3
