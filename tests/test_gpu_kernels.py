"""gpu.kernels against scikit-learn's pairwise kernels and closed forms, tiled and untiled."""

import numpy as np
import pytest
import torch
from sklearn.metrics import pairwise
from support.devices import DEVICES

from sparkml.gpu.kernels import DEFAULT_BUDGET_BYTES, KERNELS, kernel_diagonal, kernel_matmul, kernel_matrix

PARAMS = {
    "linear": {},
    "polynomial": {"gamma": 0.3, "degree": 3, "coef0": 0.5},
    "sigmoid": {"gamma": 0.05, "coef0": -0.2},
    "rbf": {"gamma": 0.2},
    "laplacian": {"gamma": 0.1},
}
SKLEARN = {
    "linear": pairwise.linear_kernel,
    "polynomial": pairwise.polynomial_kernel,
    "sigmoid": pairwise.sigmoid_kernel,
    "rbf": pairwise.rbf_kernel,
    "laplacian": pairwise.laplacian_kernel,
}
TOL = {np.float64: 1e-10, np.float32: 1e-5}


def _data(dtype, offset=0.0):
    rng = np.random.default_rng(3)
    a = rng.normal(offset, 1.0, (57, 6)).astype(dtype)
    b = rng.normal(offset, 1.0, (23, 6)).astype(dtype)
    return a, b


def _reference(kind, a, b, params):
    return SKLEARN[kind](a.astype(np.float64), b.astype(np.float64), **params)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", KERNELS)
@pytest.mark.parametrize("budget", [DEFAULT_BUDGET_BYTES, 700])  # 700 bytes: tiles of a few pairs in both directions
def test_matches_sklearn(kind, dtype, device, budget):
    a, b = _data(dtype)
    got = kernel_matrix(
        kind, torch.from_numpy(a), torch.from_numpy(b), budget_bytes=budget, device=device, **PARAMS[kind]
    )
    assert got.dtype == (torch.float64 if dtype == np.float64 else torch.float32)
    assert got.device.type == device
    ref = _reference(kind, a, b, PARAMS[kind])
    np.testing.assert_allclose(got.cpu().numpy(), ref, rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("kind", KERNELS)
def test_defaults_are_sklearns(kind):
    a, b = _data(np.float64)
    np.testing.assert_allclose(kernel_matrix(kind, a, b).numpy(), SKLEARN[kind](a, b), rtol=1e-10, atol=1e-12)


def test_rbf_float32_survives_a_large_common_offset():
    # ||a||^2 + ||b||^2 - 2 a.b in float32 at offset 1000 would lose every digit of the distance
    a, b = _data(np.float32, offset=1000.0)
    got = kernel_matrix("rbf", a, b, gamma=0.2).numpy()
    np.testing.assert_allclose(got, _reference("rbf", a, b, {"gamma": 0.2}), rtol=1e-5, atol=1e-5)


def test_closed_forms():
    a = np.array([[1.0, 2.0], [0.0, -1.0]])
    b = np.array([[3.0, 0.0]])
    np.testing.assert_allclose(
        kernel_matrix("rbf", a, b, gamma=0.5).numpy()[:, 0], np.exp(-0.5 * np.array([4 + 4, 9 + 1]))
    )
    np.testing.assert_allclose(
        kernel_matrix("laplacian", a, b, gamma=0.5).numpy()[:, 0], np.exp(-0.5 * np.array([2 + 2, 3 + 1]))
    )
    np.testing.assert_allclose(
        kernel_matrix("polynomial", a, b, gamma=2.0, degree=2, coef0=1.0).numpy()[:, 0],
        (2.0 * np.array([3.0, 0.0]) + 1.0) ** 2,
    )
    np.testing.assert_allclose(
        kernel_matrix("sigmoid", a, b, gamma=0.1, coef0=0.0).numpy()[:, 0], np.tanh(0.1 * np.array([3.0, 0.0]))
    )
    k = kernel_matrix("rbf", a).numpy()  # B defaults to A: symmetric, unit diagonal
    np.testing.assert_allclose(k, k.T)
    np.testing.assert_allclose(np.diag(k), 1.0)


@pytest.mark.parametrize("kind", KERNELS)
def test_diagonal_matches_matrix(kind):
    a, _ = _data(np.float64)
    np.testing.assert_allclose(
        kernel_diagonal(kind, a, **PARAMS[kind]).numpy(),
        np.diag(kernel_matrix(kind, a, **PARAMS[kind]).numpy()),
        rtol=1e-12,
    )


def test_errors_name_the_problem():
    a, b = _data(np.float64)
    with pytest.raises(ValueError, match="kernel must be one of"):
        kernel_matrix("cosine", a, b)
    with pytest.raises(ValueError, match="A has 6 features but B has 5"):
        kernel_matrix("rbf", a, b[:, :5])
    with pytest.raises(ValueError, match="gamma must be > 0"):
        kernel_matrix("rbf", a, b, gamma=0.0)
    with pytest.raises(ValueError, match="degree must be a positive integer"):
        kernel_matrix("polynomial", a, b, degree=1.5)
    with pytest.raises(ValueError, match="2-D"):
        kernel_matrix("rbf", a[0], b)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", KERNELS)
@pytest.mark.parametrize("budget", [DEFAULT_BUDGET_BYTES, 700])  # 700 bytes: column tiles summed into the product
def test_kernel_matmul_is_the_kernel_matrix_times_c(kind, dtype, device, budget):
    a, b = _data(dtype)
    c = np.random.default_rng(4).normal(size=(len(b), 3)).astype(dtype)
    got = kernel_matmul(
        kind,
        torch.from_numpy(a),
        torch.from_numpy(b),
        torch.from_numpy(c),
        budget_bytes=budget,
        device=device,
        **PARAMS[kind],
    )
    assert got.dtype == (torch.float64 if dtype == np.float64 else torch.float32) and got.device.type == device
    ref = _reference(kind, a, b, PARAMS[kind]) @ c.astype(np.float64)
    np.testing.assert_allclose(got.cpu().numpy(), ref, rtol=TOL[dtype], atol=10 * TOL[dtype])
    one = kernel_matmul(kind, a, b, c[:, 0], budget_bytes=budget, device=device, **PARAMS[kind])
    assert one.shape == (len(a),)
    np.testing.assert_allclose(one.cpu().numpy(), got[:, 0].cpu().numpy(), rtol=TOL[dtype], atol=TOL[dtype])


def test_kernel_matmul_over_many_tiles_equals_the_whole_product():
    """Thousands of rows: many cache-sized row tiles, each product written to its own rows."""
    rng = np.random.default_rng(5)
    a, b, c = rng.normal(size=(3000, 8)), rng.normal(size=(400, 8)), rng.normal(size=(400, 2))
    got = kernel_matmul("rbf", a, b, c, gamma=0.1).numpy()
    np.testing.assert_allclose(got, pairwise.rbf_kernel(a, b, gamma=0.1) @ c, rtol=1e-12, atol=1e-12)


def test_kernel_matmul_errors_and_empty_rows():
    a, b = _data(np.float64)
    with pytest.raises(ValueError, match="C must have 23 rows"):
        kernel_matmul("rbf", a, b, np.ones((22, 1)))
    with pytest.raises(ValueError, match="A has 6 features but B has 5"):
        kernel_matmul("rbf", a, b[:, :5], np.ones((23, 1)))
    assert tuple(kernel_matmul("rbf", a[:0], b, np.ones((23, 2))).shape) == (0, 2)
    np.testing.assert_array_equal(kernel_matmul("rbf", a, b[:0], np.ones((0, 2))).numpy(), np.zeros((57, 2)))


def test_empty_inputs():
    a, b = _data(np.float64)
    assert tuple(kernel_matrix("rbf", a[:0], b).shape) == (0, 23)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", KERNELS)
def test_nystroem_matches_sklearn_on_the_same_landmarks(kind, dtype):
    from sklearn.kernel_approximation import Nystroem

    from sparkml.gpu.nystroem import NystroemMap

    a, _ = _data(np.float64)
    # the linear kernel has rank 6 here: more landmarks than that leave a null space both maps
    # fill with clipped-eigenvalue noise, so it gets 5
    ref = Nystroem(kernel=kind, n_components=5 if kind == "linear" else 20, random_state=0, **PARAMS[kind]).fit(a)
    phi = NystroemMap(kind, torch.from_numpy(ref.components_), **PARAMS[kind])
    got = phi.transform(torch.from_numpy(a.astype(dtype)), budget_bytes=2000).numpy()
    expected = ref.transform(a)
    scale = np.abs(expected).max()
    np.testing.assert_allclose(got, expected, rtol=0, atol=(1e-9 if dtype == np.float64 else 2e-4) * scale)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", KERNELS)
def test_nystroem_eigenbasis_map_is_sklearns_up_to_a_rotation(kind, dtype):
    """``rcond``: K(X, L) V_r diag(|lambda_r|^-1/2), the map KernelSVC trains on as two factors. Its
    left factor is sklearn's kernel block, its inner products are sklearn's Nystroem's, the landmarks'
    own features have the Gram matrix diag(|lambda_r|), and the projection is bounded."""
    from sklearn.kernel_approximation import Nystroem

    from sparkml.gpu.nystroem import NystroemMap

    a, _ = _data(np.float64)
    ref = Nystroem(kernel=kind, n_components=5 if kind == "linear" else 20, random_state=0, **PARAMS[kind]).fit(a)
    phi = NystroemMap(kind, torch.from_numpy(ref.components_), rcond=1e-6, **PARAMS[kind])
    x = torch.from_numpy(a.astype(dtype))
    k = phi.kernel_block(x, budget_bytes=2000).numpy()
    np.testing.assert_allclose(
        k,
        pairwise.pairwise_kernels(a, ref.components_, metric=kind, **PARAMS[kind]),
        rtol=1e-9 if dtype == np.float64 else 1e-5,
        atol=1e-9 if dtype == np.float64 else 1e-5,
    )
    got = phi.transform(x, budget_bytes=2000).numpy().astype(np.float64)
    assert got.shape == (len(a), phi.n_components) and phi.n_components <= len(ref.components_)
    np.testing.assert_allclose(
        got,
        k.astype(np.float64) @ phi.projection.numpy(),
        rtol=0,
        atol=(1e-9 if dtype == np.float64 else 1e-4) * np.abs(got).max(),
    )
    expected = ref.transform(a) @ ref.transform(a).T
    np.testing.assert_allclose(
        got @ got.T, expected, rtol=0, atol=(1e-7 if dtype == np.float64 else 1e-4) * np.abs(expected).max()
    )
    v, lam = phi.gram_spectrum()
    assert v is None and len(lam) == phi.n_components
    phi_l = phi.transform(torch.from_numpy(ref.components_)).numpy()
    np.testing.assert_allclose(phi_l.T @ phi_l, np.diag(lam.numpy()), rtol=0, atol=1e-8 * float(lam.max()))
    assert np.abs(phi.projection.numpy()).max() <= (1e-6 * float(lam.max())) ** -0.5


def test_nystroem_with_all_rows_as_landmarks_reproduces_the_kernel():
    from sparkml.gpu.nystroem import NystroemMap

    a, b = _data(np.float64)
    phi = NystroemMap("rbf", torch.from_numpy(a), gamma=0.2)
    approx = phi.transform(a) @ phi.transform(b).T  # exact on the landmarks' span, and a spans a
    np.testing.assert_allclose(approx.numpy()[:, :5], pairwise.rbf_kernel(a, b[:5], gamma=0.2), atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_random_fourier_map_is_sklearns_rbf_sampler_with_the_same_draws(dtype, device):
    from sklearn.kernel_approximation import RBFSampler

    from sparkml.gpu.fourier import RandomFourierMap

    a, _ = _data(dtype)
    sampler = RBFSampler(gamma=0.2, n_components=300, random_state=0).fit(a)
    rff = RandomFourierMap("rbf", frequencies=sampler.random_weights_, offsets=sampler.random_offset_).to(device)
    np.testing.assert_allclose(
        rff.transform(torch.from_numpy(a).to(device)).cpu().numpy(), sampler.transform(a), atol=TOL[dtype] * 10
    )


@pytest.mark.parametrize("kind", ["rbf", "laplacian"])
def test_random_fourier_features_approximate_the_kernel(kind):
    """z(x) . z(x') -> k(x, x'): Monte Carlo error ~ 1 / sqrt(D)."""
    from sparkml.gpu.fourier import RandomFourierMap

    a, b = _data(np.float64)
    rff = RandomFourierMap(kind, a.shape[1], 40000, gamma=PARAMS[kind]["gamma"], seed=1)
    approx = (rff.transform(torch.from_numpy(a)) @ rff.transform(torch.from_numpy(b)).T).numpy()
    assert np.abs(approx - _reference(kind, a, b, PARAMS[kind])).max() < 0.03
    with pytest.raises(ValueError, match="shift-invariant kernel"):
        RandomFourierMap("polynomial", 6, 10, gamma=1.0)


@pytest.mark.parametrize(
    "kind, args",
    [("rbf", {"gamma": 0.3}), ("polynomial", {"gamma": 0.5, "degree": 3, "coef0": 1.0}), ("laplacian", {"gamma": 0.2})],
)
def test_residual_fraction_is_the_relative_trace_of_the_nystroem_residual(kind, args):
    """trace(K - K_nL K_LL^+ K_Ln) / trace(K) against numpy's pseudo-inverse; 0 on the landmarks themselves,
    duplicated landmarks included."""
    from sparkml.gpu.nystroem import residual_fraction

    rng = np.random.default_rng(4)
    x, lm = rng.normal(size=(60, 3)), rng.normal(size=(15, 3))
    k = kernel_matrix(kind, torch.from_numpy(np.vstack([x, lm])), **args).numpy()
    k_nn, k_nl, k_ll = k[:60, :60], k[:60, 60:], k[60:, 60:]
    expected = np.trace(k_nn - k_nl @ np.linalg.pinv(k_ll) @ k_nl.T) / np.trace(k_nn)
    assert 0.05 < expected < 1
    assert residual_fraction(kind, lm, x, **args) == pytest.approx(expected, rel=1e-6)
    assert residual_fraction(kind, np.vstack([lm, lm[:4]]), lm, **args) == pytest.approx(0.0, abs=1e-7)
    assert residual_fraction(kind, np.vstack([lm, x]), x, **args) < 1e-7
