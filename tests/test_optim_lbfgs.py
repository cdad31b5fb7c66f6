"""Tests for sparkml.optim (L-BFGS / OWL-QN reproducing Breeze as used by Spark MLlib)."""

import math
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize, rosen, rosen_der

from sparkml.optim import OptimResult, minimize_lbfgs
from sparkml.optim.convergence import BreezeConvergence
from sparkml.optim.history import CurvatureError, InverseHessian
from sparkml.optim.line_search import LineSearchError, backtracking, strong_wolfe
from sparkml.optim.owlqn import orthant, project, pseudo_gradient

sklearn = pytest.importorskip("sklearn")
from sklearn.datasets import load_breast_cancer, load_diabetes  # noqa: E402
from sklearn.linear_model import Lasso, LogisticRegression  # noqa: E402

# ------------------------------------------------------------------------------------------
# problems
# ------------------------------------------------------------------------------------------


def _standardize(X):
    return (X - X.mean(0)) / X.std(0)


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return _standardize(X)[:, :10], y.astype(float)


@pytest.fixture(scope="module")
def diabetes():
    X, y = load_diabetes(return_X_y=True)
    return _standardize(X), y


def logistic_fun(X, y, lam2):
    """mean log-loss + lam2/2 ||w||^2, last coordinate an unpenalised intercept."""
    n, p = X.shape

    def fg(w):
        z = X @ w[:p] + w[p]
        f = np.mean(np.logaddexp(0.0, z) - y * z) + 0.5 * lam2 * w[:p] @ w[:p]
        r = (0.5 * (1.0 + np.tanh(0.5 * z)) - y) / n
        return f, np.concatenate([X.T @ r + lam2 * w[:p], [r.sum()]])

    return fg


def least_squares_fun(X, y, intercept=False):
    """(1/2n) ||X w (+ b) - y||^2."""
    n, p = X.shape

    def fg(w):
        r = X @ w[:p] + (w[p] if intercept else 0.0) - y
        g = X.T @ r / n
        if intercept:
            g = np.concatenate([g, [r.sum() / n]])
        return 0.5 * r @ r / n, g

    return fg


class Counting:
    def __init__(self, fg):
        self.fg, self.calls, self.points = fg, 0, []

    def __call__(self, x):
        self.calls += 1
        self.points.append(np.array(x, copy=True))
        return self.fg(x)


def _check_history(res: OptimResult, monotone: bool = True):
    h = np.asarray(res.objective_history)
    assert len(h) == res.n_iter + 1
    assert np.all(np.isfinite(h)) and np.all(np.isfinite(res.x))
    if monotone:
        # OWL-QN's backtracking (as Breeze's) may return an unchecked step, so near the optimum
        # the history can rise by rounding; on these well-behaved problems by no more than that.
        assert np.all(np.diff(h) <= 1e-12 * np.abs(h[:-1])), "objective history must not increase"
    assert h[-1] == pytest.approx(res.fun, abs=0)


# ------------------------------------------------------------------------------------------
# smooth problems (L-BFGS)
# ------------------------------------------------------------------------------------------


def test_quadratic_matches_linear_solve():
    rng = np.random.default_rng(0)
    M = rng.normal(size=(40, 20))
    A = M.T @ M + 0.1 * np.eye(20)
    b = rng.normal(size=20)
    res = minimize_lbfgs(lambda x: (0.5 * x @ A @ x - b @ x, A @ x - b), np.zeros(20), max_iter=500, tol=1e-6)
    np.testing.assert_allclose(res.x, np.linalg.solve(A, b), atol=1e-6)
    assert res.converged and res.message == "gradient converged"
    assert res.x.dtype == np.float64 and res.x.shape == (20,)
    _check_history(res)


@pytest.mark.parametrize("n", [2, 10])
def test_rosenbrock_vs_scipy(n):
    x0 = np.tile([-1.2, 1.0], n // 2)
    res = minimize_lbfgs(lambda x: (rosen(x), rosen_der(x)), x0, max_iter=1000, tol=1e-12)
    ref = minimize(rosen, x0, jac=rosen_der, method="L-BFGS-B", options=dict(maxiter=1000, ftol=1e-15, gtol=1e-12))
    np.testing.assert_allclose(res.x, np.ones(n), atol=1e-6)
    np.testing.assert_allclose(res.x, ref.x, atol=1e-6)
    assert res.converged
    assert res.n_evals <= 2 * res.n_iter + 5  # strong-Wolfe steps are mostly accepted at 1
    _check_history(res)


def test_l2_logistic_vs_sklearn(cancer):
    X, y = cancer
    n, p = X.shape
    C = 0.5
    ref = LogisticRegression(C=C, tol=1e-12, max_iter=10000).fit(X, y)
    res = minimize_lbfgs(logistic_fun(X, y, 1.0 / (C * n)), np.zeros(p + 1), max_iter=500, tol=1e-12)
    np.testing.assert_allclose(res.x, np.r_[ref.coef_[0], ref.intercept_], atol=1e-5)
    _check_history(res)


# ------------------------------------------------------------------------------------------
# L1 problems (OWL-QN)
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [1.0, 5.0])
def test_lasso_vs_sklearn(diabetes, alpha):
    X, y = diabetes
    y = y - y.mean()
    p = X.shape[1]
    ref = Lasso(alpha=alpha, fit_intercept=False, tol=1e-14, max_iter=100000).fit(X, y)
    res = minimize_lbfgs(least_squares_fun(X, y), np.zeros(p), l1=np.full(p, alpha), max_iter=1000, tol=1e-12)
    np.testing.assert_allclose(res.x, ref.coef_, atol=1e-5)
    zeros = ref.coef_ == 0
    assert zeros.any()
    assert np.all(res.x[zeros] == 0.0), "OWL-QN must produce exact zeros where Lasso has them"
    assert np.all(res.x[~zeros] != 0.0)
    _check_history(res)


def test_lasso_unpenalised_intercept(diabetes):
    X, y = diabetes
    y = 0.01 * y - 3.0  # negative mean: the intercept must go below zero
    p = X.shape[1]
    alpha = 0.02
    ref = Lasso(alpha=alpha, fit_intercept=True, tol=1e-14, max_iter=100000).fit(X, y)
    l1 = np.r_[np.full(p, alpha), 0.0]
    res = minimize_lbfgs(least_squares_fun(X, y, intercept=True), np.zeros(p + 1), l1=l1, max_iter=1000, tol=1e-12)
    np.testing.assert_allclose(res.x[:p], ref.coef_, atol=1e-5)
    assert res.x[p] == pytest.approx(ref.intercept_, abs=1e-5) and res.x[p] < -1
    assert (ref.coef_ == 0).any() and np.all(res.x[:p][ref.coef_ == 0] == 0.0)
    _check_history(res)


def _elastic_net_reference(fg, l1):
    """Tight reference: x = u - v with u, v >= 0 makes the L1 term linear (L-BFGS-B)."""
    k = len(l1)

    def split(z):
        f, g = fg(z[:k] - z[k:])
        return f + l1 @ (z[:k] + z[k:]), np.concatenate([g + l1, -g + l1])

    free = l1 == 0  # unpenalised coordinates keep an unbounded u
    bounds = [(None, None) if fr else (0, None) for fr in free] + [(0, 0) if fr else (0, None) for fr in free]
    out = minimize(
        split,
        np.zeros(2 * k),
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options=dict(maxiter=20000, ftol=1e-16, gtol=1e-13, maxcor=30),
    )
    return out.x[:k] - out.x[k:]


def test_elastic_net_logistic_vs_saga_and_scipy(cancer):
    X, y = cancer
    n, p = X.shape
    C, rho = 0.05, 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        saga = LogisticRegression(
            penalty="elasticnet", solver="saga", l1_ratio=rho, C=C, tol=1e-12, max_iter=200000
        ).fit(X, y)
    fg = logistic_fun(X, y, (1 - rho) / (C * n))
    l1 = np.r_[np.full(p, rho / (C * n)), 0.0]
    res = minimize_lbfgs(fg, np.zeros(p + 1), l1=l1, max_iter=1000, tol=1e-12)
    ref = np.r_[saga.coef_[0], saga.intercept_]
    np.testing.assert_allclose(res.x, ref, atol=1e-5)
    np.testing.assert_allclose(res.x, _elastic_net_reference(fg, l1), atol=1e-5)
    assert np.all(res.x[:p][saga.coef_[0] == 0] == 0.0)
    assert res.fun == pytest.approx(fg(res.x)[0] + l1 @ np.abs(res.x), abs=0)
    _check_history(res)


def test_owlqn_forced_without_l1_matches_lbfgs(cancer):
    """MLlib's LinearSVC runs OWL-QN with a zero L1 function: same optimum as L-BFGS."""
    X, y = cancer
    n, p = X.shape
    fg = logistic_fun(X, y, 1e-2)
    a = minimize_lbfgs(fg, np.zeros(p + 1), max_iter=500, tol=1e-12)
    b = minimize_lbfgs(fg, np.zeros(p + 1), max_iter=500, tol=1e-12, method="owlqn")
    np.testing.assert_allclose(a.x, b.x, atol=1e-5)
    assert np.any(b.x < 0) and np.any(b.x > 0)
    _check_history(b)
    with pytest.raises(ValueError):
        minimize_lbfgs(fg, np.zeros(p + 1), l1=np.ones(p + 1), method="lbfgs")


# ------------------------------------------------------------------------------------------
# Breeze's exact step rules (hand-traced)
# ------------------------------------------------------------------------------------------


def _parabola(x):
    return 0.5 * float((x[0] - 3.0) ** 2), np.array([x[0] - 3.0])


def test_lbfgs_first_step_is_one_over_grad_norm():
    f = Counting(_parabola)
    res = minimize_lbfgs(f, np.zeros(1), max_iter=1)
    # direction 3, first trial 1/3 -> x = 1 satisfies strong Wolfe: one extra call only
    assert f.calls == res.n_evals == 2
    assert res.x[0] == pytest.approx(1.0)
    res = minimize_lbfgs(_parabola, np.zeros(1), max_iter=10)
    assert res.n_iter == 2 and res.x[0] == pytest.approx(3.0)  # secant step is exact


def test_owlqn_first_step_follows_breeze_backtracking():
    f = Counting(_parabola)
    res = minimize_lbfgs(f, np.zeros(1), max_iter=1, method="owlqn")
    # init 0.5/|g| = 1/6; Breeze's stale Armijo test shrinks it (x0.1) without using phi(1/6),
    # so we never evaluate it; then 1/60 -> grows x2.1 three times until the slope is flat enough.
    expected = 3.0 * (1 / 60) * 2.1**3
    assert f.calls == 5
    assert res.x[0] == pytest.approx(expected)
    assert not any(pt[0] == pytest.approx(0.5) for pt in f.points)


def test_owlqn_orthant_projection_and_pseudo_gradient():
    x = np.array([0.0, 0.0, 0.0, 1.0, -2.0, 0.0])
    g = np.array([2.0, -2.0, 0.5, 0.3, 0.3, 5.0])
    l1 = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 0.0])
    pg = pseudo_gradient(x, g, l1)
    np.testing.assert_allclose(pg, [1.0, -1.0, 0.0, 1.3, -0.7, 5.0])
    orth = orthant(x, pg)
    np.testing.assert_allclose(orth, [-1, 1, 0, 1, -1, -1])
    y = np.array([-0.5, -0.1, 0.0, -0.2, -1.0, 0.4])
    np.testing.assert_allclose(project(y, orth), [-0.5, 0.0, 0.0, 0.0, -1.0, 0.0])


def test_convergence_rules_follow_breeze():
    # function values: the window starts as [+inf], so it cannot fire before 20 iterations
    c = BreezeConvergence(max_iter=100, tol=1e-6, initial_value=10.0)
    for k in range(1, 25):
        c.record(1.0)
        reason = c.reason(k, 1.0, grad_norm=1.0)
        assert reason == (None if k < 20 else "function values converged"), k
    # gradient: ||g|| <= max(tol * |f|, 1e-8)
    c = BreezeConvergence(max_iter=100, tol=1e-3, initial_value=10.0)
    assert c.reason(0, 5.0, 0.005) == "gradient converged"
    assert c.reason(0, 5.0, 0.0051) is None
    assert c.reason(0, 0.0, 1e-8) == "gradient converged"
    assert c.reason(0, 0.0, 2e-8) is None
    # max iterations first; negative means unlimited
    assert c.reason(100, 5.0, 0.0) == "max iterations reached"
    assert BreezeConvergence(-1, 0.0, 1.0).reason(10**6, 1.0, 1.0) is None


def test_stops_exactly_when_gradient_rule_first_holds(cancer):
    X, y = cancer
    n, p = X.shape
    tol = 1e-6
    seen = []
    res = minimize_lbfgs(
        logistic_fun(X, y, 1e-3),
        np.zeros(p + 1),
        tol=tol,
        max_iter=500,
        callback=lambda it, x, f, gn: seen.append((it, f, gn, x.copy())),
    )
    assert res.message == "gradient converged" and res.converged
    assert [s[0] for s in seen] == list(range(1, res.n_iter + 1))
    assert [s[1] for s in seen] == res.objective_history[1:]
    np.testing.assert_array_equal(seen[-1][3], res.x)
    ok = [gn <= max(tol * abs(f), 1e-8) for _, f, gn, _ in seen]
    assert ok[-1] and not any(ok[:-1])


# ------------------------------------------------------------------------------------------
# iteration cap, callback, robustness
# ------------------------------------------------------------------------------------------


def test_max_iter_and_callback():
    calls = []
    res = minimize_lbfgs(
        lambda x: (rosen(x), rosen_der(x)), np.array([-1.2, 1.0]), max_iter=5, callback=lambda *a: calls.append(a)
    )
    assert res.n_iter == 5 and len(res.objective_history) == 6 and len(calls) == 5
    assert res.message == "max iterations reached" and not res.converged
    _check_history(res)


def test_max_iter_zero_returns_x0_evaluated():
    f = Counting(lambda x: (rosen(x), rosen_der(x)))
    x0 = np.array([-1.2, 1.0])
    res = minimize_lbfgs(f, x0, max_iter=0)
    assert f.calls == 1 and res.n_iter == 0
    np.testing.assert_array_equal(res.x, x0)
    assert res.x is not x0
    assert res.objective_history == [rosen(x0)] and res.fun == rosen(x0)


def test_non_finite_trial_points_shrink_the_step():
    def fg(x):  # sum(x - log x): defined for x > 0 only, minimum at 1
        if np.any(x <= 0):
            return math.nan, np.full_like(x, math.nan)
        return float(np.sum(x - np.log(x))), 1.0 - 1.0 / x

    for l1, method in [(None, "auto"), (None, "owlqn"), (np.full(3, 0.1), "auto")]:
        res = minimize_lbfgs(fg, np.array([30.0, 0.05, 4.0]), max_iter=200, tol=1e-10, l1=l1, method=method)
        want = 1.0 if l1 is None else 1.0 / 1.1
        np.testing.assert_allclose(res.x, want, atol=1e-4)
        _check_history(res)


def test_failed_line_search_stops_without_raising():
    def wrong(x):  # gradient points uphill
        return float(x @ x), -2.0 * x

    for l1 in (None, np.ones(3)):
        res = minimize_lbfgs(wrong, np.array([1.0, -2.0, 3.0]), l1=l1, max_iter=50)
        assert not res.converged
        assert res.message.startswith("line search failed")
        np.testing.assert_array_equal(res.x, [1.0, -2.0, 3.0])
        _check_history(res)


def test_non_finite_start():
    res = minimize_lbfgs(lambda x: (math.inf, x), np.ones(2))
    assert not res.converged and res.n_iter == 0 and "not finite" in res.message


def test_building_blocks():
    # two-loop recursion reproduces the exact inverse on a quadratic after n steps
    A = np.diag([1.0, 4.0, 9.0])
    h = InverseHessian(10)
    for s in np.eye(3):
        h.update(s, A @ s)
    g = np.array([1.0, 1.0, 1.0])
    np.testing.assert_allclose(h.direction(g), -np.linalg.solve(A, g))
    h.update(np.array([1.0, 0, 0]), np.array([-1.0, 0, 0]))
    with pytest.raises(CurvatureError):
        h.direction(g)
    # line searches on phi(t) = (t - 2)^2
    phi = lambda t: ((t - 2.0) ** 2, 2.0 * (t - 2.0))  # noqa: E731
    assert abs(2 * (strong_wolfe(phi, 4.0, -4.0, 1.0) - 2)) <= 0.9 * 4
    assert backtracking(phi, 4.0, -4.0, 1.0) == 1.0  # Armijo and strong Wolfe hold
    assert backtracking(phi, 4.0, -4.0, 0.1) == pytest.approx(0.21)  # slope too steep: grow
    with pytest.raises(LineSearchError):
        strong_wolfe(phi, 4.0, 4.0, 1.0)


def test_degenerate_memory_gives_a_null_owlqn_step_as_in_breeze():
    """s'y == 0 is not one of Breeze's NaNHistory cases: the two-loop result is NaN, OWL-QN's
    direction correction zeroes it, and the backtracking accepts the (null) step at once; the
    zero pair then makes the next direction fail (0/0), which resets the memory."""
    from sparkml.optim.lbfgs import _make_evaluator, _owlqn_step

    f = Counting(lambda x: (float(x @ x), 2.0 * x))
    evaluate, _ = _make_evaluator(f, np.zeros(2))
    cur = evaluate(np.array([1.0, 1.0]))
    h = InverseHessian(10)
    h.update(np.array([1.0, 0.0]), np.array([0.0, 1.0]))  # s'y == 0
    assert not np.any(np.isfinite(h.direction(cur.pg)))
    assert _owlqn_step(cur, h, 3, evaluate) is cur and f.calls == 1
    h.update(np.zeros(2), np.zeros(2))
    with pytest.raises(CurvatureError):
        h.direction(cur.pg)
