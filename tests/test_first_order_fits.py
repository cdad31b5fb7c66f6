"""``ssp`` and ``gossip`` fits in the shared Spark session: the optimum ``sync`` reaches, to the relative
objective gaps the strategies promise, with F evaluated exactly at each model (a ``sync`` fit of maxIter 0
started from it reports F there); the Params they refuse, before any Spark job runs.

The optima are fitted by ``allreduce``: ``sync``'s L-BFGS / OWL-QN (``strategies.exact.quasi_newton``) in one
barrier stage, the same iterates (``tests/test_strategies.py``) without a Spark job per evaluation (a tight
``sync`` fit takes hundreds)."""

import numpy as np
import pytest
from support.data_helpers import linear_frame
from support.helpers import coefficient_vector
from support.model_kinds import STRATEGY_CASES, compat_cases

from sparkml.classification import KernelSVC, LinearSVC, LogisticRegression
from sparkml.regression import LinearRegression


@pytest.fixture(scope="module")
def frame(spark):
    df = linear_frame(spark, n=1500, d=5, partitions=4, seed=3)
    yield df
    df.unpersist()


CASES = STRATEGY_CASES[:3]  # the smooth ones (up to an L1 term); the hinge has its own test below


def _exact_objective(make, model, frame):
    """F at ``model``'s coefficients: the objective history's first value of a ``sync`` fit that starts there
    and takes no step."""
    return make(strategy="sync", maxIter=0).setInitialModel(model).fit(frame).summary.objectiveHistory[0]


def _gap(make, model, optimum, frame):
    f_opt = optimum.summary.objectiveHistory[-1]
    return (_exact_objective(make, model, frame) - f_opt) / abs(f_opt)


@pytest.fixture(scope="module")
def optima(frame):
    return _Optima(frame)


class _Optima(dict):
    """name -> the tight fit of that case on ``frame`` (sync's optimizer, in one barrier stage), fitted when a test
    first asks for it."""

    def __init__(self, frame):
        super().__init__()
        self.frame = frame

    def __missing__(self, name):
        self[name] = dict(CASES)[name](strategy="allreduce", maxIter=1000, tol=1e-12).fit(self.frame)
        return self[name]


@pytest.mark.parametrize("name,make", compat_cases(CASES, marked=0))  # the barrier stage: ssp's on every line
def test_gossip_reaches_the_sync_optimum(frame, optima, name, make):
    model = make(strategy="gossip", maxIter=5000, tol=1e-10).fit(frame)
    assert model.summary.converged and model.summary.totalIterations > 1
    gap = _gap(make, model, optima[name], frame)
    assert -1e-9 <= gap <= 1e-8, gap  # measured: within 4e-16
    ref = coefficient_vector(optima[name])
    np.testing.assert_allclose(coefficient_vector(model), ref, rtol=0, atol=1e-4 * np.linalg.norm(ref))


@pytest.mark.parametrize("staleness", [0, 3])
@pytest.mark.parametrize("name,make", compat_cases(CASES))
def test_ssp_reaches_the_sync_optimum(frame, optima, name, make, staleness):
    model = make(strategy="ssp", staleness=staleness, maxIter=5000, tol=1e-8).fit(frame)
    assert model.summary.converged
    gap = _gap(make, model, optima[name], frame)
    assert -1e-9 <= gap <= 1e-6, gap  # measured: within 4e-15


@pytest.mark.parametrize("strategy", ["gossip", "ssp"])
def test_bound_constraints_are_a_projection(frame, strategy):
    """LogisticRegression's coefficient bounds: the proximal step projects onto the box, and the fit ends at
    the bounded optimum of L-BFGS-B (``sync``'s, fitted in one barrier stage), the bound binding."""
    from pyspark.ml.linalg import DenseMatrix

    upper = DenseMatrix(1, 5, [0.2, float("inf"), float("inf"), float("inf"), float("inf")], True)
    make = lambda **k: LogisticRegression(regParam=0.01, upperBoundsOnCoefficients=upper, **k)  # noqa: E731
    optimum = make(strategy="allreduce", maxIter=1000, tol=1e-12).fit(frame)
    assert optimum.coefficients[0] == pytest.approx(0.2)  # the bound binds
    model = make(strategy=strategy, maxIter=5000, tol=1e-10).fit(frame)
    assert model.coefficients[0] <= 0.2 + 1e-12
    assert -1e-9 <= _gap(make, model, optimum, frame) <= 1e-6


def test_gossip_on_the_hinge_ends_near_the_optimum(frame):
    """The hinge has no gradient to track exactly: fixed (sub)gradient steps end in a neighbourhood, here about
    1e-6 above the optimum's objective after 100, 500 or 5000 iterations (not closer with more). (The
    optimum from ``allreduce``, whose OWL-QN is ``sync``'s in one stage: a thousand Spark jobs would take
    minutes.)"""
    make = lambda **k: LinearSVC(regParam=0.01, **k)  # noqa: E731
    optimum = make(strategy="allreduce", maxIter=1000, tol=1e-12).fit(frame)
    model = make(strategy="gossip", maxIter=500, tol=0.0).fit(frame)
    assert model.summary.totalIterations == 500
    assert 0 <= _gap(make, model, optimum, frame) <= 1e-4


@pytest.mark.parametrize(
    "make,match",
    [
        (lambda: LogisticRegression(strategy="ssp", staleness=-1), "staleness must be >= 0"),
        (
            lambda: LinearRegression(strategy="gossip", loss="huber"),
            "strategy='gossip' cannot fit this LinearRegression",
        ),
        (
            lambda: LogisticRegression(strategy="ssp", checkpointDir="/tmp/nowhere"),
            "strategy='ssp' writes no checkpoints",
        ),
        (lambda: KernelSVC(strategy="gossip"), "strategy must be one of auto, sync, allreduce"),
    ],
)
def test_bad_params_are_refused_before_any_job(spark, frame, make, match):
    tracker = spark.sparkContext.statusTracker()
    spark.sparkContext.setJobGroup("refused", "refused")
    try:
        with pytest.raises(ValueError, match=match):
            make().fit(frame)
        assert tracker.getJobIdsForGroup("refused") == []
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)


def test_topology_is_checked_when_set():
    with pytest.raises(ValueError, match="topology must be one of ring, complete; got 'star'"):
        LogisticRegression(strategy="gossip", topology="star")
