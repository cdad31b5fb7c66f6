"""Bound-constrained LogisticRegression: pyspark.ml's four bound Params, fitted side by side with MLlib.

MLlib solves these with Breeze's L-BFGS-B, which stops once the projected gradient's largest entry is
below 1e-5: its coefficients are within a few 1e-5 of the optimum. Ours (scipy's L-BFGS-B, a relative
stopping rule: ``sparkml.optim.bounded``) must land within 1e-4 of MLlib's, on an objective no higher,
with every coefficient inside the box and the bound that binds at its value exactly. The refusals
(elastic net with bounds, shapes) are in tests/test_bad_input.py.
"""

import numpy as np
import pytest
from pyspark.ml.classification import LogisticRegression as StockLogisticRegression
from pyspark.ml.linalg import DenseMatrix, Vectors
from support.data_helpers import bounds_frame
from support.helpers import coefficient_vector, training_summary

from sparkml.classification import LogisticRegression
from sparkml.optim.bounded import minimize_bounded
from sparkml.optim.convergence import FVAL_MEMORY

INF = float("inf")
BOUND_PARAMS = (
    "lowerBoundsOnCoefficients",
    "upperBoundsOnCoefficients",
    "lowerBoundsOnIntercepts",
    "upperBoundsOnIntercepts",
)


def _matrix(rows):
    return DenseMatrix(len(rows), len(rows[0]), np.ravel(rows).tolist(), True)


# name -> (Params, the bounds expected to bind: ("coef", (k, j)) or ("icpt", k); empty: none binds)
CASES = {
    "binary upper bound": (
        dict(regParam=0.02, upperBoundsOnCoefficients=_matrix([[0.8, INF, INF, INF]])),
        [("coef", (0, 0))],
    ),
    "binary lower bounds, no standardization, weights": (
        dict(
            regParam=0.02,
            standardization=False,
            weightCol="w",
            lowerBoundsOnCoefficients=_matrix([[-INF, -0.3, -INF, 0.5]]),
        ),
        [("coef", (0, 1)), ("coef", (0, 3))],
    ),
    "binary intercept bound": (dict(regParam=0.02, lowerBoundsOnIntercepts=Vectors.dense([0.0])), [("icpt", 0)]),
    "binary inactive bounds": (
        dict(
            regParam=0.02,
            lowerBoundsOnCoefficients=_matrix([[-5.0] * 4]),
            upperBoundsOnCoefficients=_matrix([[5.0] * 4]),
            lowerBoundsOnIntercepts=Vectors.dense([-5.0]),
            upperBoundsOnIntercepts=Vectors.dense([5.0]),
        ),
        [],
    ),
    "multinomial nonnegative coefficients": (
        dict(labelCol="label3", regParam=0.02, lowerBoundsOnCoefficients=_matrix([[0.0] * 4] * 3)),
        [("coef", (0, 1)), ("coef", (1, 3))],
    ),
    "multinomial pinned intercept, no standardization": (  # class 0's intercept fixed at 0: MLlib's pivot
        dict(
            labelCol="label3",
            regParam=0.02,
            standardization=False,
            lowerBoundsOnIntercepts=Vectors.dense([0.0, -INF, -INF]),
            upperBoundsOnIntercepts=Vectors.dense([0.0, INF, INF]),
            upperBoundsOnCoefficients=_matrix([[1.0] * 4] * 3),
        ),
        [("icpt", 0)],
    ),
    "multinomial inactive bounds": (
        dict(
            labelCol="label3",
            regParam=0.02,
            lowerBoundsOnCoefficients=_matrix([[-5.0] * 4] * 3),
            upperBoundsOnCoefficients=_matrix([[5.0] * 4] * 3),
        ),
        [],
    ),
}


@pytest.fixture(scope="module")
def frame(spark):
    df = bounds_frame(spark)
    yield df
    df.unpersist()


@pytest.fixture(scope="module")
def stock(frame):
    """MLlib's fit of a case's Params (``bounded=False``: the same Params without the bounds), once each."""
    cache = {}

    def get(case, bounded=True):
        if (case, bounded) not in cache:
            params = {k: v for k, v in CASES[case][0].items() if bounded or k not in BOUND_PARAMS}
            cache[case, bounded] = StockLogisticRegression(**params).fit(frame)
        return cache[case, bounded]

    return get


def _arrays(model):
    return model.coefficientMatrix.toArray(), model.interceptVector.toArray()


def _box(params, k, d):
    def get(name, shape, fill):
        return params[name].toArray().reshape(shape) if name in params else np.full(shape, fill)

    return (
        get("lowerBoundsOnCoefficients", (k, d), -INF),
        get("upperBoundsOnCoefficients", (k, d), INF),
        get("lowerBoundsOnIntercepts", (k,), -INF),
        get("upperBoundsOnIntercepts", (k,), INF),
    )


def _bound_value(box, kind, index, beta, b):
    """(value, its lower bound, its upper bound) of one coefficient or intercept."""
    if kind == "coef":
        return beta[index], box[0][index], box[1][index]
    return b[index], box[2][index], box[3][index]


# `make test`: every case but the slowest with `allreduce` (inactive bounds are covered by the multinomial case),
# and `sync` (the same optimizer over a treeAggregated gradient) on one binary and one multinomial case;
# `make test-full`: all of them
SYNC_COVER = {"binary upper bound", "multinomial nonnegative coefficients"}
ALLREDUCE_FULL_ONLY = {"binary inactive bounds"}


def _in_full_only(case, strategy):
    return case not in SYNC_COVER if strategy == "sync" else case in ALLREDUCE_FULL_ONLY


GRID = [
    pytest.param(
        case, strategy, id=f"{case}-{strategy}", marks=pytest.mark.full if _in_full_only(case, strategy) else ()
    )
    for case in sorted(CASES)
    for strategy in ("sync", "allreduce")
]


@pytest.mark.parametrize("case, strategy", GRID)
def test_bounded_fit_matches_mllib(frame, stock, case, strategy):
    params, binding = CASES[case]
    ours = LogisticRegression(dtype="float64", strategy=strategy, **params).fit(frame)
    theirs = stock(case)
    diff = np.abs(coefficient_vector(ours) - coefficient_vector(theirs)).max()
    assert diff <= 1e-4, f"max difference to MLlib {diff:.2e}"
    f_ours, f_theirs = training_summary(ours).objectiveHistory[-1], training_summary(theirs).objectiveHistory[-1]
    assert f_ours <= f_theirs + 1e-12, (f_ours, f_theirs)
    beta, b = _arrays(ours)
    box = _box(params, *beta.shape)
    assert np.all(box[0] <= beta) and np.all(beta <= box[1]) and np.all(box[2] <= b) and np.all(b <= box[3])
    free_beta, free_b = _arrays(stock(case, bounded=False))
    for kind, index in binding:
        value, lower, upper = _bound_value(box, kind, index, beta, b)
        bound = lower if abs(value - lower) < abs(value - upper) else upper
        assert value == pytest.approx(bound, abs=1e-12), (kind, index, value, bound)
        free, _, _ = _bound_value(box, kind, index, free_beta, free_b)
        assert not lower <= free <= upper, f"the unconstrained fit's {kind} {index} = {free} is inside the box"
    if not binding:  # the box changes nothing: the unconstrained optimum
        assert np.all(np.abs(beta - box[0]) > 1e-3) and np.all(np.abs(beta - box[1]) > 1e-3)
        free = np.concatenate([free_beta.ravel(), free_b])
        assert np.abs(coefficient_vector(ours) - free).max() <= 1e-4


@pytest.mark.parametrize("strategy", ["averaging", "allreduce-averaging"])
def test_averaging_local_solves_stay_in_the_box(frame, stock, strategy):
    """Each local solve is L-BFGS-B over the same box, so their average is feasible; the rounds reach
    MLlib's optimum as the exact strategies do."""
    case = "multinomial nonnegative coefficients"
    params, _ = CASES[case]
    ours = LogisticRegression(dtype="float64", strategy=strategy, **params).fit(frame)
    beta, _ = _arrays(ours)
    assert np.all(beta >= 0)
    assert np.abs(coefficient_vector(ours) - coefficient_vector(stock(case))).max() <= 1e-3
    f_ours, f_theirs = training_summary(ours).objectiveHistory[-1], training_summary(stock(case)).objectiveHistory[-1]
    assert f_ours <= f_theirs * (1 + 1e-8)


def test_bounded_multinomial_is_not_centered(frame, stock):
    """MLlib centers a multinomial model's intercepts (and, unregularized, its coefficients) only without
    bounds: a centered model could leave the box. With class 0's intercept pinned at 0 it stays 0."""
    params, _ = CASES["multinomial pinned intercept, no standardization"]
    _, b = _arrays(LogisticRegression(dtype="float64", **params).fit(frame))
    assert b[0] == 0.0 and abs(b.mean()) > 0.1
    _, free_b = _arrays(stock("multinomial pinned intercept, no standardization", bounded=False))
    assert abs(free_b.mean()) < 1e-12


def test_setters_and_start_clipped_into_the_box(frame):
    """The setters exist as in pyspark.ml; a start outside the box (an initial model) is clipped into it."""
    est = LogisticRegression(regParam=0.02, dtype="float64").setUpperBoundsOnCoefficients(
        _matrix([[0.8, INF, INF, INF]])
    )
    assert est.getUpperBoundsOnCoefficients().toArray()[0, 0] == 0.8
    outside = LogisticRegression(regParam=0.02, dtype="float64").fit(frame)  # coefficient 0 is about 1.0
    warm = est.setInitialModel(outside).fit(frame)
    assert warm.coefficients[0] == pytest.approx(0.8, abs=1e-12)
    np.testing.assert_allclose(
        warm.coefficients.toArray(),
        LogisticRegression(**CASES["binary upper bound"][0], dtype="float64").fit(frame).coefficients.toArray(),
        atol=1e-4,
    )


# ---- the solver on its own ---------------------------------------------------------------------------


def _quadratic(a, c):
    """f(x) = sum a_i (x_i - c_i)^2 / 2: over a box its minimizer is clip(c, lower, upper)."""
    return lambda x: (0.5 * float(np.sum(a * (x - c) ** 2)), a * (x - c))


def test_minimize_bounded_reaches_the_clipped_minimizer():
    rng = np.random.default_rng(0)
    a, c = rng.uniform(0.5, 5.0, 8), rng.normal(size=8) * 3
    lower = np.array([-1.0, -INF, 0.0, -2.0, -INF, 0.5, -1.0, 2.0])
    upper = np.array([1.0, 0.0, INF, -2.0, INF, 0.6, 1.0, 3.0])  # x_3 is fixed (lower == upper)
    seen = []
    res = minimize_bounded(
        _quadratic(a, c),
        np.full(8, 5.0),
        (lower, upper),
        max_iter=100,
        tol=1e-12,
        callback=lambda i, x, f, pg: seen.append((i, x.copy(), f)),
    )
    np.testing.assert_allclose(res.x, np.clip(c, lower, upper), atol=1e-9)
    assert res.converged and res.message == "projected gradient converged"
    x0 = np.clip(np.full(8, 5.0), lower, upper)  # the start outside the box is clipped into it first
    assert res.objective_history[0] == _quadratic(a, c)(x0)[0]
    assert len(res.objective_history) == res.n_iter + 1 == len(seen) + 1
    assert [i for i, _, _ in seen] == list(range(1, res.n_iter + 1))
    assert all(np.all(lower <= x) and np.all(x <= upper) for _, x, _ in seen)
    assert np.all(np.diff(res.objective_history) <= 0)


def test_minimize_bounded_stopping_rules():
    a, c = np.linspace(1.0, 100.0, 6), np.linspace(-3.0, 3.0, 6)
    box = (np.full(6, -1.0), np.full(6, 2.0))
    capped = minimize_bounded(_quadratic(a, c), np.zeros(6), box, max_iter=2, tol=0.0)
    assert capped.n_iter == 2 and not capped.converged and capped.message == "max iterations reached"
    at_optimum = minimize_bounded(_quadratic(a, c), np.clip(c, *box), box, max_iter=100, tol=1e-6)
    assert at_optimum.n_iter == 0 and at_optimum.converged
    # the function-value rule, as Breeze's: not before FVAL_MEMORY values are in its window
    loose = minimize_bounded(_quadratic(a, c), np.zeros(6), box, max_iter=100, tol=1e-6)
    assert loose.converged and (loose.n_iter < FVAL_MEMORY or loose.message == "function values converged")
    with pytest.raises(ValueError, match="lower <= upper"):
        minimize_bounded(_quadratic(a, c), np.zeros(6), (np.ones(6), np.zeros(6)))


def test_bounds_save_and_load_in_mllibs_json(frame, tmp_path):
    """Matrix and Vector Params are written in MLlib's own JSON: a bounded model loads back as ours and
    (finite bounds) as pyspark.ml's, bounds and coefficients intact, and so does the unfitted estimator.
    Infinite bounds are written as MLlib writes them ("Infinity"), which MLlib's own reader cannot read
    back (its models with an infinite bound do not load either); ours reads them."""
    from pyspark.ml.classification import LogisticRegressionModel as StockModel

    from sparkml.classification import LogisticRegressionModel

    names = ("upperBoundsOnCoefficients", "lowerBoundsOnIntercepts", "upperBoundsOnIntercepts")
    for case, readers in (
        ("binary inactive bounds", (LogisticRegressionModel, StockModel)),
        ("multinomial pinned intercept, no standardization", (LogisticRegressionModel,)),
    ):
        params, _ = CASES[case]
        est = LogisticRegression(maxIter=30, **params)
        model = est.fit(frame)
        path = tmp_path / case.replace(" ", "_").replace(",", "")
        model.save(str(path / "model"))
        est.save(str(path / "estimator"))
        loaded = [reader.load(str(path / "model")) for reader in readers]
        for other in [*loaded, LogisticRegression.load(str(path / "estimator"))]:
            for name in names:
                np.testing.assert_array_equal(other.getOrDefault(name).toArray(), params[name].toArray())
        for other in loaded:
            np.testing.assert_array_equal(coefficient_vector(other), coefficient_vector(model))
        refit = LogisticRegression.load(str(path / "estimator")).fit(frame)
        np.testing.assert_array_equal(coefficient_vector(refit), coefficient_vector(model))
