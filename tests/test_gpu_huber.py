"""gpu.huber.HuberLoss (MLlib's huber loss with a joint scale sigma): finite differences with respect to
(coefficients, intercept, sigma), half of scikit-learn's HuberRegressor objective, CSR == dense,
float32 storage ~ float64, CPU and CUDA."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from support.devices import DEVICES

from sparkml.gpu import CsrBlock, DenseBlock, HuberLoss

EPSILON = 1.35
FI = pytest.mark.parametrize("fit_intercept", [True, False], ids=["icpt", "noicpt"])
LAYOUT = pytest.mark.parametrize("layout", ["dense", "csr"])
DEVICE = pytest.mark.parametrize("device", DEVICES)


def make_data(fit_intercept, n=60, d=5, seed=0):
    """x (n, d) with zeros and an empty row, y with a few outliers, weights, coef = (beta, [b], sigma):
    some rows in each piece of the loss, none within 1e-3 of the kink |r| = epsilon * sigma."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.7)
    x[7] = 0.0
    w = rng.uniform(0.2, 3.0, size=n)
    beta = rng.normal(scale=0.7, size=d)
    b = 0.4 if fit_intercept else 0.0
    sigma = 0.8
    y = x @ beta + b + rng.normal(scale=0.8, size=n)
    y[::9] += 6.0  # outliers: the linear piece
    coef = np.concatenate([beta, [b] if fit_intercept else [], [sigma]])
    r = y - x @ beta - b
    assert np.min(np.abs(np.abs(r) - EPSILON * sigma)) > 1e-3
    assert 5 < np.sum(np.abs(r) > EPSILON * sigma) < n - 5
    return x, y, w, coef


def block(x, layout, dtype, device):
    if layout == "dense":
        return DenseBlock(torch.tensor(x, dtype=dtype, device=device))
    return CsrBlock.from_scipy(sp.csr_matrix(x), dtype, device)


def setup(fit_intercept, layout, dtype=torch.float64, device="cpu"):
    x, y, w, coef = make_data(fit_intercept)
    t = lambda a: torch.tensor(a, dtype=torch.float64, device=device)  # noqa: E731
    return HuberLoss(fit_intercept, EPSILON), block(x, layout, dtype, device), t(y), t(w), t(coef)


def reference(x, y, w, coef, fit_intercept, eps=EPSILON):
    """MLlib's HuberBlockAggregator, row by row in numpy: (sum w l, sum w dl/dcoef)."""
    d = x.shape[1]
    beta, sigma = coef[:d], coef[-1]
    b = coef[d] if fit_intercept else 0.0
    r = y - x @ beta - b
    inside = np.abs(r) <= eps * sigma
    loss = np.where(inside, 0.5 * (sigma + r**2 / sigma), 0.5 * (sigma + 2 * eps * np.abs(r) - sigma * eps**2))
    d_m = np.where(inside, -r / sigma, np.where(r >= 0, -eps, eps))
    d_sigma = np.where(inside, 0.5 * (1 - (r / sigma) ** 2), 0.5 * (1 - eps**2))
    grad = [x.T @ (w * d_m)] + ([[np.sum(w * d_m)]] if fit_intercept else []) + [[np.sum(w * d_sigma)]]
    return np.sum(w * loss), np.concatenate(grad)


def assert_close(actual, expected, rtol):
    actual = torch.as_tensor(actual, dtype=torch.float64).cpu()
    expected = torch.as_tensor(expected, dtype=torch.float64).cpu()
    scale = float(expected.abs().max())
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=rtol * max(scale, 1e-12))


@DEVICE
@LAYOUT
@FI
def test_gradient_matches_finite_differences(fit_intercept, layout, device):
    loss, X, y, w, coef = setup(fit_intercept, layout, device=device)
    value, grad = loss.loss_gradient(coef, X, y, w)
    assert value.dtype == grad.dtype == torch.float64 and value.dim() == 0
    assert grad.shape == coef.shape == (X.n_features + fit_intercept + 1,) and grad.device.type == device
    eps = 1e-6
    fd = torch.stack(
        [
            (loss.loss(coef + e, X, y, w) - loss.loss(coef - e, X, y, w)) / (2 * eps)
            for e in torch.eye(coef.numel(), dtype=torch.float64, device=device) * eps
        ]
    )
    assert_close(grad, fd, 1e-7)
    assert_close(loss.loss(coef, X, y, w), value, 1e-14)
    assert_close(loss.gradient(coef, X, y, w), grad, 1e-14)


@DEVICE
@LAYOUT
@FI
def test_sums_match_mllibs_formula(fit_intercept, layout, device):
    x, y, w, coef = make_data(fit_intercept)
    loss, X, ty, tw, tcoef = setup(fit_intercept, layout, device=device)
    value, grad = loss.loss_gradient(tcoef, X, ty, tw)
    ref_value, ref_grad = reference(x, y, w, coef, fit_intercept)
    assert_close(value, ref_value, 1e-12)
    assert_close(grad, ref_grad, 1e-12)


@FI
def test_half_of_sklearns_huber_objective(fit_intercept):
    """scikit-learn's HuberRegressor minimizes sum w (sigma + H(r / sigma) sigma) + alpha |beta|^2 (its
    ``_huber_loss_and_gradient``, coef = (beta, [b], sigma) as here): twice MLlib's loss sum."""
    from sklearn.linear_model._huber import _huber_loss_and_gradient

    x, y, w, coef = make_data(fit_intercept)
    ref_value, ref_grad = _huber_loss_and_gradient(coef, x, y, EPSILON, 0.0, w)
    loss, X, ty, tw, tcoef = setup(fit_intercept, "dense")
    value, grad = loss.loss_gradient(tcoef, X, ty, tw)
    assert_close(value, ref_value / 2, 1e-12)
    assert_close(grad, ref_grad / 2, 1e-12)


@DEVICE
@pytest.mark.parametrize("layout", ["dense", "csr"])
def test_float32_storage_is_the_rounded_features(layout, device):
    x, y, w, coef = make_data(True)
    loss, X32, ty, tw, tcoef = setup(True, layout, dtype=torch.float32, device=device)
    value, grad = loss.loss_gradient(tcoef, X32, ty, tw)
    ref_value, ref_grad = reference(x.astype(np.float32).astype(np.float64), y, w, coef, True)
    assert value.dtype == grad.dtype == torch.float64
    assert_close(value, ref_value, 1e-6)
    assert_close(grad, ref_grad, 1e-6)


def test_no_hessian_and_bad_values_raise():
    loss, X, y, w, coef = setup(True, "dense")
    with pytest.raises(NotImplementedError, match="no Hessian"):
        loss.hessian_block(coef, X, y, w)
    with pytest.raises(NotImplementedError, match="no Hessian"):
        loss.hessp(coef, X, y, w, coef)
    bad = coef.clone()
    bad[-1] = 0.0
    with pytest.raises(ValueError, match="sigma > 0"):
        loss.loss_gradient(bad, X, y, w)
    with pytest.raises(ValueError, match="coef has shape"):
        loss.loss_gradient(coef[:-1], X, y, w)
    with pytest.raises(ValueError, match="epsilon > 1"):
        HuberLoss(True, epsilon=1.0)
