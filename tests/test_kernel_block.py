"""gpu.kernel_block: a kernel block computed per pass gives the products of the stored block K(X, L), chunk by chunk,
alone, under a Nystroem projection and stacked after stored rows; KernelSVC's problems read it as they read the
stored one; no product holds more than one chunk of the kernel."""

import numpy as np
import pytest
import torch
from support.devices import DEVICES

from sparkml.gpu import DenseBlock, OneVsOneProblems, OneVsRestProblems, SmoothedHingeLoss, SquaredHingeLoss
from sparkml.gpu import kernel_block as kb
from sparkml.gpu.factored import FactoredBlock
from sparkml.gpu.kernels import kernel_matrix
from sparkml.gpu.stacked import RowStack

ARGS = {"gamma": 0.3, "degree": 3, "coef0": 1.0}
N, D, M = 9000, 5, 300  # 4096-row chunks (``_chunk``): three of them, the last partial


def _chunk(dtype):
    return 4096 * M * torch.tensor([], dtype=dtype).element_size()


def _data(device, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = torch.tensor(rng.normal(size=(N, D)), dtype=dtype, device=device)
    landmarks = torch.tensor(rng.normal(size=(M, D)), dtype=torch.float64, device=device)
    return x, landmarks


def _pair(device, dtype, kernel="rbf", take_bytes=0):
    """(computed per pass, stored) blocks of the same K(X, L)."""
    x, landmarks = _data(device, dtype)
    lazy = kb.KernelBlock(x, landmarks, kernel, **ARGS, chunk_bytes=_chunk(dtype), take_bytes=take_bytes)
    stored = DenseBlock(kernel_matrix(kernel, x, landmarks.to(dtype), **ARGS))
    return lazy, stored


def _close(a, b, dtype):
    tol = 1e-11 if dtype == torch.float64 else 2e-5
    scale = max(1.0, float(b.abs().max()))
    assert float((a.to(torch.float64) - b.to(torch.float64)).abs().max()) <= tol * scale


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("kernel", ["rbf", "polynomial", "laplacian"])
def test_products_equal_the_stored_block(device, dtype, kernel):
    lazy, stored = _pair(device, dtype, kernel)
    assert lazy.chunk_rows == 4096 and lazy.shape == stored.shape == (N, M)
    rng = np.random.default_rng(1)
    v = torch.tensor(rng.normal(size=M), dtype=dtype, device=device)
    vk = torch.tensor(rng.normal(size=(M, 3)), dtype=dtype, device=device)
    r = torch.tensor(rng.normal(size=N), dtype=dtype, device=device)
    rk = torch.tensor(rng.normal(size=(N, 3)), dtype=dtype, device=device)
    h = torch.tensor(rng.random(N) * (rng.random(N) < 0.3), dtype=dtype, device=device)
    for a, b in [
        (lazy.matmul(v), stored.matmul(v)),
        (lazy.matmul(vk), stored.matmul(vk)),
        (lazy.rmatmul(r), stored.rmatmul(r)),
        (lazy.rmatmul(rk), stored.rmatmul(rk)),
        (lazy.weighted_gram(h), stored.weighted_gram(h)),
        (lazy.column_sums(h), stored.column_sums(h)),
        (lazy.weighted_moments(h)[1], stored.weighted_moments(h)[1]),
        (lazy.rows(4000, 4200), stored.rows(4000, 4200)),
        (lazy.to_dense(), stored.to_dense()),
    ]:
        _close(a, b, dtype)

    def fn(start, stop, m):  # a pass's residuals, which may depend on the rows' positions
        return torch.tanh(m) * r[start:stop]

    _close(lazy.margin_pass(v, fn), stored.margin_pass(v, fn), dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_take_materializes_within_its_bytes(device):
    index = torch.arange(10, N, 7, device=device)
    lazy, stored = _pair(device, torch.float64, take_bytes=len(index) * M * 8)
    taken = lazy.take(index)
    assert isinstance(taken, DenseBlock)  # fits: the kernel of the taken rows, once
    _close(taken.to_dense(), stored.take(index).to_dense(), torch.float64)
    part = kb.KernelBlock(lazy.x, lazy.landmarks, "rbf", **ARGS, take_bytes=100 * M * 8 + 7)
    split = part.take(index)  # 100 rows' kernel materialized, the others' computed per product
    assert isinstance(split, RowStack) and [b.n_rows for b in split.blocks] == [100, len(index) - 100]
    assert isinstance(split.blocks[0], DenseBlock) and isinstance(split.blocks[1], kb.KernelBlock)
    assert split.computed_per_pass and not taken.computed_per_pass
    _close(split.to_dense(), stored.take(index).to_dense(), torch.float64)
    none = kb.KernelBlock(lazy.x, lazy.landmarks, "rbf", **ARGS).take(index)
    assert isinstance(none, kb.KernelBlock) and none.n_rows == len(index)
    _close(none.to_dense(), stored.take(index).to_dense(), torch.float64)


def test_no_product_holds_more_than_a_chunk(monkeypatch):
    """Memory flat in n: every kernel evaluation covers at most one chunk of rows."""
    lazy, _ = _pair("cpu", torch.float32)
    calls = []
    real = kb.kernel_matrix

    def recording(kind, a, b, **kwargs):
        calls.append(a.shape[0])
        return real(kind, a, b, **kwargs)

    monkeypatch.setattr(kb, "kernel_matrix", recording)
    v, h = torch.ones(M), torch.ones(N)
    lazy.matmul(v)
    lazy.rmatmul(h)
    lazy.margin_pass(v, lambda a, b, m: m)
    lazy.weighted_gram(h)
    assert max(calls) <= lazy.chunk_rows < N and sum(calls) == 4 * N


def _problem_blocks(device, dtype, stored_rows):
    """FactoredBlocks over the stored K and over K computed per pass for all rows but the first ``stored_rows``."""
    lazy, stored = _pair(device, dtype)
    right = torch.tensor(np.random.default_rng(2).normal(size=(M, 40)) / 10, dtype=dtype, device=device)
    left = lazy
    if stored_rows:
        rest = kb.KernelBlock(lazy.x[stored_rows:], lazy.landmarks, "rbf", **ARGS, chunk_bytes=_chunk(dtype))
        left = RowStack([DenseBlock(stored.x[:stored_rows]), rest])
    return FactoredBlock(left, right), FactoredBlock(stored, right)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("stored_rows", [0, 5000])
@pytest.mark.parametrize(
    "problems",
    [
        OneVsRestProblems(SmoothedHingeLoss(True, width=0.1), [1.0]),
        OneVsRestProblems(SquaredHingeLoss(True), [0.0, 1.0, 2.0]),
        OneVsOneProblems(SquaredHingeLoss(False), [(0.0, 1.0), (0.0, 2.0), (1.0, 2.0)]),
    ],
    ids=["binary hinge", "ovr", "ovo"],
)
def test_newton_sums_equal_the_stored_blocks(device, dtype, stored_rows, problems):
    """What a Newton round asks of a partition: loss, gradient, curvature and Hessian-vector products over the
    active rows, and the Hessians themselves."""
    lazy, stored = _problem_blocks(device, dtype, stored_rows)
    rng = np.random.default_rng(3)
    y = torch.tensor(rng.integers(0, 3, size=N), dtype=torch.float64, device=device)
    if len(problems.classes) == 1:
        y = (y > 0).to(torch.float64)
    w = torch.tensor(rng.uniform(0.5, 1.5, size=N), device=device)
    coef = rng.normal(size=problems.coef_shape(40)) * 0.5
    v = rng.normal(size=coef.shape)
    for a, b in zip(
        problems.loss_gradient_curvature(coef, lazy, y, w), problems.loss_gradient_curvature(coef, stored, y, w)
    ):
        _close(a, b, dtype)
    _close(problems.hessp_operator(coef, lazy, y, w)(v), problems.hessp_operator(coef, stored, y, w)(v), dtype)
    _close(problems.hessian_block(coef, lazy, y, w), problems.hessian_block(coef, stored, y, w), dtype)
