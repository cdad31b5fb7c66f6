"""sparkml.newton on local sums: the squared-hinge SVM's minimizer, checked against scipy and sklearn."""
import numpy as np
import torch
from scipy.optimize import minimize
from sklearn.svm import LinearSVC as SkLinearSVC

from gpu import DenseBlock, OneVsRestLoss, SquaredHingeLoss
from sparkml.newton import newton_squared_hinge


def _problem(seed=0, n=300, d=4):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    y = (x @ rng.normal(size=d) + 0.5 * rng.normal(size=n) > 0).astype(float)
    return x, y


def _sums(loss, x, y, w):
    block, yt, wt = DenseBlock(torch.from_numpy(x)), torch.from_numpy(y), torch.from_numpy(w)

    def fgh(theta):
        f, g = loss.loss_gradient(torch.from_numpy(theta), block, yt, wt)
        return float(f), g.numpy(), loss.hessian_block(torch.from_numpy(theta), block, yt, wt).numpy()

    def fg(theta):
        f, g = loss.loss_gradient(torch.from_numpy(theta), block, yt, wt)
        return float(f), g.numpy()

    return fgh, fg


def test_newton_reaches_the_minimizer_in_a_few_rounds():
    x, y = _problem()
    w = np.random.default_rng(1).uniform(0.5, 2.0, len(y))
    reg = 0.05
    fgh, fg = _sums(SquaredHingeLoss(), x, y, w)
    theta, summary = newton_squared_hinge(fgh, fg, np.zeros(5), reg=reg, weight_sum=w.sum(), fit_intercept=True,
                                          max_iter=50, tol=1e-12, name="test")

    def objective(t):
        m = x @ t[:4] + t[4]
        return float(w @ np.maximum(0, 1 - (2 * y - 1) * m) ** 2 / w.sum() + reg / 2 * t[:4] @ t[:4])

    ref = minimize(objective, np.zeros(5), method="BFGS", options={"gtol": 1e-10}).x
    np.testing.assert_allclose(theta, ref, atol=1e-6)
    assert summary.totalIterations <= 10
    assert np.all(np.diff(summary.objectiveHistory) <= 1e-15)  # monotone


def test_regparam_is_one_over_n_c():
    """lambda = 1 / (n C): the same coefficients as scikit-learn's LinearSVC(loss='squared_hinge', C) with an
    unpenalized intercept (intercept_scaling large makes liblinear's penalty on it negligible)."""
    x, y = _problem(seed=3)
    c = 0.7
    fgh, fg = _sums(SquaredHingeLoss(), x, y, np.ones(len(y)))
    theta, _ = newton_squared_hinge(fgh, fg, np.zeros(5), reg=1 / (len(y) * c), weight_sum=len(y),
                                    fit_intercept=True, max_iter=50, tol=1e-14, name="test")
    sk = SkLinearSVC(C=c, loss="squared_hinge", dual=False, tol=1e-12, intercept_scaling=1e3, max_iter=10000).fit(x, y)
    np.testing.assert_allclose(theta[:4], sk.coef_[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(theta[4], sk.intercept_[0], rtol=1e-4, atol=1e-5)


def test_one_vs_rest_loss_is_the_binary_loss_on_indicators():
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(50, 3)), rng.integers(0, 3, 50).astype(float)
    coef = torch.from_numpy(rng.normal(size=4))
    block, w = DenseBlock(torch.from_numpy(x)), torch.ones(50, dtype=torch.float64)
    ovr = OneVsRestLoss(SquaredHingeLoss(), 2)
    direct = SquaredHingeLoss()
    yk = torch.from_numpy((y == 2).astype(float))
    f1, g1 = ovr.loss_gradient(coef, block, torch.from_numpy(y), w)
    f2, g2 = direct.loss_gradient(coef, block, yk, w)
    assert float(f1) == float(f2)
    np.testing.assert_array_equal(g1.numpy(), g2.numpy())
    np.testing.assert_array_equal(ovr.hessian_block(coef, block, torch.from_numpy(y), w).numpy(),
                                  direct.hessian_block(coef, block, yk, w).numpy())
