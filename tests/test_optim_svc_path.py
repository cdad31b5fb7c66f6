"""OWL-QN on MLlib's LinearSVC objective follows MLlib's path step for step (no Spark needed).

The objective is evaluated in numpy through ``LinearObjective`` on the parity tests' binary data
(tests/support/data_helpers.py's ``parity_arrays("binary", sparse=False)``); the expected histories are MLlib 4.x's
``LinearSVCModel.summary().objectiveHistory`` on that data (Breeze 2.1 ``OWLQN``). Both paths
contain steps that *raise* the objective: Breeze's backtracking returns some steps without
checking their value (the stale first Armijo test of scalanlp/breeze#697, and the trial cap),
and refusing them (as an earlier version did) sent our iterates elsewhere and stopped early.
"""

import numpy as np
import pytest
from support.data_helpers import parity_arrays

from sparkml.optim import minimize_lbfgs
from sparkml.optim.line_search import backtracking
from sparkml.optim.linear_objective import LinearObjective

# MLlib: LinearSVC(regParam=0.0) (fitIntercept, no weights), maxIter=100: 101 entries.
MLLIB_INTERCEPT_HEAD = [
    1.0,
    0.11679319258687826,
    0.10370833047377861,
    0.1222398385558804,
    0.07366389657690983,
    0.07303020435082899,
    0.07266466577794606,
    0.0723645551337041,
    0.07226269714411777,
    0.07197445096783793,
    0.07176944088998082,
    0.07148890034049375,
]
MLLIB_INTERCEPT_LAST = 0.06833619969831739

# MLlib: LinearSVC(regParam=0.1, fitIntercept=False, weightCol="weight"): function values
# converge after 38 iterations.
MLLIB_NO_INTERCEPT = [
    1.0,
    0.08866532623961662,
    0.08196589949295034,
    0.0819061742922419,
    0.08181442947298266,
    0.0810529707754437,
    0.07948368562666454,
    0.07926915363959205,
    0.07920252041858925,
    0.07920066607209879,
    0.07920022701129864,
    0.07919978260254483,
    0.07919949418277428,
    0.07919882960356335,
    0.07919839905576281,
    0.07919725782161109,
    0.07919596780345266,
    0.07919581334572046,
    0.07919431917590375,
    0.07919349685297797,
    0.0791932692437084,
    0.07919302680439663,
    0.07919288919726425,
    0.07919288683346574,
    0.0791928864545519,
    0.07919288639715782,
    0.07919288637794948,
    0.07919288642879269,
    0.07919288639378602,
    0.07919288524393062,
    0.0791928852107458,
    0.07919288550882501,
    0.07919288535478168,
    0.07919289211854891,
    0.07919287946825941,
    0.07919286799111407,
    0.07919286441577003,
    0.07919285995564217,
    0.07919285995812808,
]


def _svc_objective(fit_intercept, reg, weighted):
    x, y, w = parity_arrays("binary", sparse=False)
    if not weighted:
        w = np.ones_like(y)
    wsum = w.sum()
    mean = w @ x / wsum
    var = (w @ x**2 - wsum * mean**2) / (wsum - (w @ w) / wsum)  # MLlib's Summarizer
    s = 2 * y - 1

    def data_sum(coef):
        beta, b = (coef[:-1], coef[-1]) if fit_intercept else (coef, 0.0)
        slack = 1 - s * (x @ beta + b)
        active = slack > 0
        r = np.where(active, -s * w, 0.0)
        g = x.T @ r
        return float(w[active] @ slack[active]), (np.append(g, r.sum()) if fit_intercept else g)

    return LinearObjective(
        data_sum,
        n_features=x.shape[1],
        n_outputs=1,
        fit_intercept=fit_intercept,
        mean=mean,
        std=np.sqrt(var),
        weight_sum=wsum,
        reg_l2=reg,
        reg_l1=0.0,
        standardization=True,
    )


def test_svc_with_intercept_follows_mllib_through_an_objective_increase():
    obj = _svc_objective(True, 0.0, False)
    res = minimize_lbfgs(obj.fun_grad, np.zeros(obj.size), max_iter=100, tol=1e-6, method="owlqn")
    h = res.objective_history
    assert len(h) == 101 and res.message == "max iterations reached"
    # iteration 3 raises the objective (an unchecked backtracking step), as in MLlib
    assert h[3] > h[2]
    np.testing.assert_allclose(h[: len(MLLIB_INTERCEPT_HEAD)], MLLIB_INTERCEPT_HEAD, rtol=1e-12)
    assert h[-1] == pytest.approx(MLLIB_INTERCEPT_LAST, rel=1e-9)


def test_svc_without_intercept_runs_as_long_as_mllib():
    obj = _svc_objective(False, 0.1, True)
    res = minimize_lbfgs(obj.fun_grad, np.zeros(obj.size), max_iter=100, tol=1e-6, method="owlqn")
    assert res.message == "function values converged"
    np.testing.assert_allclose(res.objective_history, MLLIB_NO_INTERCEPT, rtol=1e-12)


# ------------------------------------------------------------------------------------------
# Breeze's BacktrackingLineSearch: steps returned without checking their value
# ------------------------------------------------------------------------------------------


def test_backtracking_returns_the_unchecked_step_at_the_trial_cap():
    calls = []

    def phi(alpha):  # every trial is worse than phi(0) = 1
        calls.append(alpha)
        return 2.0, -1.0

    alpha = backtracking(phi, f0=1.0, d0=-1.0, init=1.0)
    # init + 19 halvings; Breeze then evaluates a 20th trial, drops it and returns the 19th step
    assert alpha == 0.5**19 and calls == [0.5**k for k in range(20)]


def test_backtracking_judges_the_initial_step_on_its_slope_when_the_stale_test_passes():
    # OWL-QN passes the smooth value (0.5) while phi(0) includes the L1 term (1.0): the stale
    # Armijo test passes, the slope at init is inside the strong-Wolfe band, so Breeze takes
    # init although phi(init) = 5 > phi(0).
    alpha = backtracking(lambda a: (5.0, -0.5), f0=1.0, d0=-1.0, init=1.0, stale_value=0.5)
    assert alpha == 1.0


def test_non_finite_value_at_the_trial_cap_fails_the_search():
    from sparkml.optim import LineSearchError

    with pytest.raises(LineSearchError):
        backtracking(lambda a: (float("inf"), -1.0), f0=1.0, d0=-1.0, init=1.0)


def test_max_iter_counts_steps_not_history_resets():
    """Breeze's cap is on ``state.iter``: a failed search resets the memory and repeats the
    current state in the history without counting as an iteration."""
    poison = [0]

    def fg(x):  # a convex quadratic, "infinite" while poisoned
        v, g = 0.5 * float(x @ (np.arange(1, 4) * x)), np.arange(1, 4) * x
        if poison[0] > 0:
            poison[0] -= 1
            return float("inf"), g
        return v, g

    def callback(it, f, gn, sec):
        if it == 1:
            poison[0] = 10  # the whole line search of iteration 2 fails

    res = minimize_lbfgs(fg, np.array([1.0, -1.0, 2.0]), max_iter=4, tol=0.0, callback=callback)
    h = res.objective_history
    assert h[2] == h[1]  # the reset repeats the state...
    assert res.n_iter == 5 and len(h) == 6  # ...and 4 steps are still taken
    assert res.message.startswith("max iterations reached") and "1 memory reset" in res.message
