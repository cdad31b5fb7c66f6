"""gpu.losses: finite differences, closed forms / scikit-learn, CSR == dense, float32 ~ float64."""

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.special
import torch
from sklearn.metrics import log_loss
from support.devices import DEVICES

from sparkml.gpu import (
    CsrBlock,
    DenseBlock,
    HingeLoss,
    LogisticLoss,
    SmoothedHingeLoss,
    SoftmaxLoss,
    SquaredHingeLoss,
    SquaredLoss,
)
from sparkml.gpu.blocks import _PASS_CHUNK_ROWS

K = 3
LOSSES = ["logistic", "softmax", "squared", "hinge", "squared_hinge", "smoothed_hinge"]
WITH_HESSIAN = ["logistic", "squared", "squared_hinge", "smoothed_hinge"]
WITH_HESSP = ["logistic", "softmax", "squared", "squared_hinge", "smoothed_hinge"]
WIDTH = 0.5  # the smoothed hinge's band half-width in these tests: several of the 40 rows fall in it
FI = pytest.mark.parametrize("fit_intercept", [True, False], ids=["icpt", "noicpt"])
LAYOUT = pytest.mark.parametrize("layout", ["dense", "csr"])
DEVICE = pytest.mark.parametrize("device", DEVICES)


def make_loss(name, fit_intercept):
    cls = {"logistic": LogisticLoss, "squared": SquaredLoss, "hinge": HingeLoss, "squared_hinge": SquaredHingeLoss}
    if name == "smoothed_hinge":
        return SmoothedHingeLoss(fit_intercept, width=WIDTH)
    return SoftmaxLoss(K, fit_intercept) if name == "softmax" else cls[name](fit_intercept)


def make_data(name, fit_intercept, n=40, d=5, seed=0):
    """x (n, d) with zeros and an empty row, y, non-trivial weights w, coef (numpy)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.6)
    x[7] = 0.0
    w = rng.uniform(0.2, 3.0, size=n)
    coef = rng.normal(scale=0.7, size=make_loss(name, fit_intercept).coef_shape(d))
    if name == "softmax":
        y = rng.integers(0, K, size=n).astype(float)
    elif name == "squared":
        y = rng.normal(size=n) * 2
    else:
        y = (rng.random(n) < 0.5).astype(float)
    if name in ("hinge", "squared_hinge", "smoothed_hinge"):  # finite differences need rows away from the kinks
        gap = 1 - (2 * y - 1) * margins_np(coef, x, fit_intercept)
        kinks = [-WIDTH, WIDTH] if name == "smoothed_hinge" else [0.0]
        assert min(np.min(np.abs(gap - k)) for k in kinks) > 1e-3
        if name == "smoothed_hinge":
            assert np.sum(np.abs(gap) <= WIDTH) >= 3, "the Hessian tests need rows in the band"
    return x, y, w, coef


def margins_np(coef, x, fit_intercept):
    if coef.ndim == 2:
        return x @ coef[:, :-1].T + coef[:, -1] if fit_intercept else x @ coef.T
    return x @ coef[:-1] + coef[-1] if fit_intercept else x @ coef


def block(x, layout, dtype, device):
    if layout == "dense":
        return DenseBlock(torch.tensor(x, dtype=dtype, device=device))
    return CsrBlock.from_scipy(sp.csr_matrix(x), dtype, device)


def setup(name, fit_intercept, layout, dtype=torch.float64, device="cpu"):
    x, y, w, coef = make_data(name, fit_intercept)
    t = lambda a: torch.tensor(a, dtype=torch.float64, device=device)  # noqa: E731
    return make_loss(name, fit_intercept), block(x, layout, dtype, device), t(y), t(w), t(coef)


def fd_jacobian(f, coef, eps=1e-5):
    """Central differences of f at coef along each coordinate: (f.numel(), coef.numel())."""
    cols = []
    for j in range(coef.numel()):
        e = torch.zeros_like(coef).reshape(-1)
        e[j] = eps
        e = e.reshape(coef.shape)
        cols.append(((f(coef + e) - f(coef - e)) / (2 * eps)).reshape(-1))
    return torch.stack(cols, dim=1)


def assert_close(actual, expected, rtol):
    actual = torch.as_tensor(actual, dtype=torch.float64).cpu()
    expected = torch.as_tensor(expected, dtype=torch.float64).cpu()
    scale = float(expected.abs().max()) if expected.numel() else 1.0
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=rtol * max(scale, 1e-12))


# ---- derivatives ------------------------------------------------------------------
@DEVICE
@LAYOUT
@FI
@pytest.mark.parametrize("name", LOSSES)
def test_gradient_matches_finite_differences(name, fit_intercept, layout, device):
    loss, X, y, w, coef = setup(name, fit_intercept, layout, device=device)
    value, grad = loss.loss_gradient(coef, X, y, w)
    assert value.dtype == grad.dtype == torch.float64 and value.dim() == 0
    assert grad.shape == coef.shape and grad.device.type == device
    fd = fd_jacobian(lambda c: loss.loss(c, X, y, w), coef)[0]
    assert_close(grad.reshape(-1), fd, 1e-6)
    assert_close(loss.gradient(coef, X, y, w), grad, 1e-14)
    assert_close(loss.loss(coef, X, y, w), value, 1e-14)


@DEVICE
@LAYOUT
@FI
@pytest.mark.parametrize("name", WITH_HESSIAN)
def test_hessian_block_matches_finite_differences(name, fit_intercept, layout, device):
    loss, X, y, w, coef = setup(name, fit_intercept, layout, device=device)
    H = loss.hessian_block(coef, X, y, w)
    p = X.n_features + fit_intercept
    assert H.shape == (p, p) and H.dtype == torch.float64
    fd = fd_jacobian(lambda c: loss.gradient(c, X, y, w), coef)
    assert_close(H, fd, 1e-6)
    assert_close(H, H.T, 1e-14)
    v = torch.linspace(-1, 1, p, dtype=torch.float64, device=device)
    assert_close(loss.hessp(coef, X, y, w, v), H @ v, 1e-12)
    assert_close(loss.hessp_operator(coef, X, y, w)(v), H @ v, 1e-12)


@DEVICE
@LAYOUT
@FI
@pytest.mark.parametrize("name", WITH_HESSP)
def test_hessp_matches_finite_differences(name, fit_intercept, layout, device):
    loss, X, y, w, coef = setup(name, fit_intercept, layout, device=device)
    v = torch.sin(torch.arange(coef.numel(), dtype=torch.float64, device=device)).reshape(coef.shape)
    hv = loss.hessp(coef, X, y, w, v)
    assert hv.shape == coef.shape and hv.dtype == torch.float64
    eps = 1e-5
    fd = (loss.gradient(coef + eps * v, X, y, w) - loss.gradient(coef - eps * v, X, y, w)) / (2 * eps)
    assert_close(hv, fd, 1e-6)
    if name == "softmax":  # full multinomial Hessian by differences, then H @ v
        H = fd_jacobian(lambda c: loss.gradient(c, X, y, w), coef)
        assert_close(hv.reshape(-1), H @ v.reshape(-1), 1e-6)


@pytest.mark.parametrize("name", ["softmax", "hinge"])
def test_no_hessian_raises(name):
    loss, X, y, w, coef = setup(name, True, "dense")
    with pytest.raises(NotImplementedError, match="hessp" if name == "softmax" else "Hessian"):
        loss.hessian_block(coef, X, y, w)
    if name == "hinge":
        with pytest.raises(NotImplementedError, match="piecewise linear"):
            loss.hessp(coef, X, y, w, coef)


# ---- values against closed forms and scikit-learn -----------------------------------
def reference_loss(name, x, y, w, coef, fit_intercept):
    m = margins_np(coef, x, fit_intercept)
    if name == "logistic":
        return log_loss(y, scipy.special.expit(m), sample_weight=w, normalize=False)
    if name == "softmax":
        yi = y.astype(int)
        return np.sum(w * (scipy.special.logsumexp(m, axis=1) - m[np.arange(len(y)), yi]))
    if name == "squared":
        return np.sum(w * (m - y) ** 2 / 2)
    slack = np.maximum(0.0, 1 - (2 * y - 1) * m)
    if name == "smoothed_hinge":  # Chapelle's Huber hinge, piece by piece
        t = (2 * y - 1) * m
        h = WIDTH
        return np.sum(w * np.where(t > 1 + h, 0.0, np.where(t < 1 - h, 1 - t, (1 + h - t) ** 2 / (4 * h))))
    return np.sum(w * (slack if name == "hinge" else slack**2))


@DEVICE
@LAYOUT
@FI
@pytest.mark.parametrize("name", LOSSES)
def test_loss_matches_reference(name, fit_intercept, layout, device):
    x, y, w, coef = make_data(name, fit_intercept)
    loss, X, ty, tw, tcoef = setup(name, fit_intercept, layout, device=device)
    assert_close(loss.loss(tcoef, X, ty, tw), reference_loss(name, x, y, w, coef, fit_intercept), 1e-10)


@FI
@pytest.mark.parametrize("name", ["logistic", "softmax", "squared"])
def test_matches_sklearn_linear_model_loss(name, fit_intercept):
    """sklearn's LinearModelLoss returns weighted means; ours are sums."""
    from sklearn._loss.loss import HalfBinomialLoss, HalfMultinomialLoss, HalfSquaredError
    from sklearn.linear_model._linear_loss import LinearModelLoss

    base = {"logistic": HalfBinomialLoss(), "squared": HalfSquaredError(), "softmax": HalfMultinomialLoss(n_classes=K)}[
        name
    ]
    x, y, w, coef = make_data(name, fit_intercept)
    ref_l, ref_g = LinearModelLoss(base, fit_intercept).loss_gradient(coef, x, y, w)
    loss, X, ty, tw, tcoef = setup(name, fit_intercept, "csr")
    value, grad = loss.loss_gradient(tcoef, X, ty, tw)
    assert_close(value, ref_l * w.sum(), 1e-10)
    assert_close(grad, ref_g * w.sum(), 1e-10)


def test_hinge_kink_gets_zero_subgradient():
    """s m == 1 exactly: MLlib adds gradient only where 1 - s m > 0."""
    X = DenseBlock(torch.tensor([[1.0], [1.0], [0.5]], dtype=torch.float64))
    coef = torch.tensor([1.0], dtype=torch.float64)
    y, w = torch.tensor([1.0, 0.0, 1.0]), torch.ones(3)
    value, grad = HingeLoss(fit_intercept=False).loss_gradient(coef, X, y, w)
    # rows: s m = 1 (kink, no gradient), s m = -1 (slack 2, grad +x), s m = 0.5 (slack 0.5, grad -x)
    assert float(value) == pytest.approx(2.5)
    assert grad.tolist() == pytest.approx([1.0 - 0.5])


@pytest.mark.parametrize("width", [0.5, 0.1, 0.01])
def test_smoothed_hinge_is_within_a_quarter_width_of_the_hinge(width):
    """0 <= l_h(t) - max(0, 1 - t) <= h / 4, equal at the kink + h / 4 and outside the band."""
    t = torch.linspace(-3, 3, 6001, dtype=torch.float64)
    y = torch.ones_like(t)
    gap = SmoothedHingeLoss(width=width)._pointwise(t, y)[0] - torch.clamp(1 - t, min=0)
    assert float(gap.min()) >= -1e-15 and float(gap.max()) == pytest.approx(width / 4, rel=1e-9)
    outside = (t - 1).abs() > width + 1e-9
    assert float(gap[outside].abs().max()) < 1e-15


def test_smoothed_hinge_rejects_a_non_positive_width():
    with pytest.raises(ValueError, match="width"):
        SmoothedHingeLoss(width=0.0)


def test_logistic_and_softmax_stable_for_huge_margins():
    X = DenseBlock(torch.tensor([[1.0], [-1.0]], dtype=torch.float64))
    y = torch.tensor([0.0, 0.0])
    value, grad = LogisticLoss(False).loss_gradient(torch.tensor([1000.0]), X, y, None)
    assert float(value) == pytest.approx(1000.0) and torch.isfinite(grad).all()
    sm = SoftmaxLoss(2, False)
    value, grad = sm.loss_gradient(torch.tensor([[1000.0], [-1000.0]]), X, y, None)
    assert float(value) == pytest.approx(2000.0) and torch.isfinite(grad).all()


# ---- layouts and precisions agree -------------------------------------------------------
def everything(loss, X, y, w, coef):
    value, grad = loss.loss_gradient(coef, X, y, w)
    out = [value, grad]
    if type(loss).__name__ in ("LogisticLoss", "SquaredLoss", "SquaredHingeLoss"):
        out.append(loss.hessian_block(coef, X, y, w))
    if not isinstance(loss, HingeLoss):
        v = torch.cos(torch.arange(coef.numel(), dtype=torch.float64, device=coef.device))
        out.append(loss.hessp(coef, X, y, w, v.reshape(coef.shape)))  # not ones: softmax null space
    return out


@DEVICE
@FI
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", LOSSES)
def test_csr_equals_dense(name, dtype, fit_intercept, device):
    dense = everything(*setup(name, fit_intercept, "dense", dtype, device))
    csr = everything(*setup(name, fit_intercept, "csr", dtype, device))
    for a, b in zip(csr, dense):
        assert a.dtype == torch.float64
        assert_close(a, b, 1e-5 if dtype == torch.float32 else 1e-12)


@DEVICE
@LAYOUT
@FI
@pytest.mark.parametrize("name", LOSSES)
def test_float32_close_to_float64(name, fit_intercept, layout, device):
    f32 = everything(*setup(name, fit_intercept, layout, torch.float32, device))
    f64 = everything(*setup(name, fit_intercept, layout, torch.float64, device))
    for a, b in zip(f32, f64):
        assert a.dtype == torch.float64 and a.device.type == device
        assert_close(a, b, 1e-4)


# ---- API details -----------------------------------------------------------------
def test_shapes_and_validation():
    assert LogisticLoss(True).coef_shape(4) == (5,) and LogisticLoss(False).coef_shape(4) == (4,)
    assert SoftmaxLoss(3, True).coef_shape(4) == (3, 5) and SoftmaxLoss(3).n_outputs == 3
    assert SquaredLoss().n_outputs == 1
    with pytest.raises(ValueError, match="n_classes"):
        SoftmaxLoss(1)
    loss, X, y, w, coef = setup("logistic", True, "dense")
    with pytest.raises(ValueError, match="expected"):
        loss.loss(coef[:-1], X, y, w)
    with pytest.raises(ValueError, match="entries"):
        loss.loss(coef, X, y[:-1], w)
    sm, X, y, w, coef = setup("softmax", True, "dense")
    with pytest.raises(ValueError, match="labels"):
        sm.loss(coef, X, y + 1, w)


def test_unit_weights_default_and_float32_coef():
    loss, X, y, w, coef = setup("softmax", True, "csr", torch.float32)
    ones = torch.ones_like(w)
    assert_close(loss.loss(coef, X, y, None), loss.loss(coef, X, y, ones), 1e-14)
    assert_close(loss.gradient(coef.float(), X, y, ones.float()), loss.gradient(coef, X, y, ones), 1e-6)


@FI
@pytest.mark.parametrize("name", LOSSES)
def test_loss_gradient_over_float32_storage_reads_rows_in_runs(name, fit_intercept):
    """A float32 block computing in float64 runs loss_gradient as one margin_pass over runs of
    4096 rows (each converted once): it must give the float64 block's sums over the same rounded
    values, with the runs covering every row once and in order (10,000 rows: 3 runs, the last short)."""
    n = 10_000
    x, y, _, coef = make_data(name, fit_intercept, n=40, d=7, seed=3)  # rows away from hinge kinks
    x, y = np.tile(x, (n // 40, 1)), np.tile(y, n // 40)  # 4096 is not a multiple of 40: a run
    w = np.random.default_rng(4).uniform(0.2, 3.0, size=n)  # misplaced in y or w would show
    x32 = torch.as_tensor(x, dtype=torch.float32)
    mixed = DenseBlock(x32, compute_dtype=torch.float64)
    exact = DenseBlock(x32.to(torch.float64))
    loss = make_loss(name, fit_intercept)
    got = loss.loss_gradient(torch.as_tensor(coef), mixed, torch.as_tensor(y), torch.as_tensor(w))
    want = loss.loss_gradient(torch.as_tensor(coef), exact, torch.as_tensor(y), torch.as_tensor(w))
    for a, b in zip(got, want):
        assert a.dtype == torch.float64
        assert_close(a, b, 1e-12)
    runs = []
    mixed.margin_pass(
        torch.zeros(7, dtype=torch.float64),
        lambda start, stop, m: runs.append((start, stop, len(m))) or torch.zeros_like(m),
    )
    run = _PASS_CHUNK_ROWS  # 4096
    assert runs == [(0, run, run), (run, 2 * run, run), (2 * run, n, n - 2 * run)]
    empty = DenseBlock(torch.zeros(0, 7), compute_dtype=torch.float64)  # no run at all: zero sums
    total, grad = loss.loss_gradient(torch.as_tensor(coef), empty, torch.zeros(0), torch.zeros(0))
    assert float(total) == 0.0 and grad.shape == tuple(coef.shape) and not grad.any()
