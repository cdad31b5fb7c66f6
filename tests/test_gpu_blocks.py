"""gpu.blocks and gpu.device: dense/CSR products against numpy, device resolution."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from support.devices import CUDA, DEVICES

import sparkml.gpu as gpu
from sparkml.gpu import CsrBlock, DenseBlock, make_block, resolve_device, resolve_dtype
from sparkml.gpu import blocks as blocks_mod

DTYPES = [torch.float32, torch.float64]
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-12, atol=1e-12)}


def _matrix(n=23, d=7, seed=0):
    """Sparse-ish matrix with an empty row and an empty column."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.4)
    x[3] = 0.0
    x[:, 2] = 0.0
    return x


def _block(x, layout, dtype, device):
    if layout == "dense":
        return DenseBlock(torch.tensor(x, dtype=dtype, device=device))
    return CsrBlock.from_scipy(sp.csr_matrix(x), dtype, device)


def _close(actual, expected, dtype):
    np.testing.assert_allclose(actual.detach().cpu().numpy(), expected, **TOL[dtype])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["dense", "csr"])
def test_products_match_numpy(layout, dtype, device):
    x = _matrix()
    n, d = x.shape
    rng = np.random.default_rng(1)
    b = _block(x, layout, dtype, device)
    assert (b.n_rows, b.n_features, b.dtype, b.device.type) == (n, d, dtype, device)
    v1, v2 = rng.normal(size=d), rng.normal(size=(d, 3))
    r1, r2 = rng.normal(size=n), rng.normal(size=(n, 3))
    h = rng.uniform(0.1, 2.0, size=n)
    t = lambda a: torch.tensor(a, device=device)  # noqa: E731  (float64; blocks cast)
    for out, ref in [
        (b.matmul(t(v1)), x @ v1),
        (b.matmul(t(v2)), x @ v2),
        (b.rmatmul(t(r1)), x.T @ r1),
        (b.rmatmul(t(r2)), x.T @ r2),
        (b.weighted_gram(t(h)), x.T @ (x * h[:, None])),
    ]:
        assert out.dtype == dtype and out.shape == ref.shape
        _close(out, ref, dtype)
    s = b.column_sums(t(h))
    m1, m2 = b.weighted_moments(t(h))
    for out, ref in [(s, x.T @ h), (m1, x.T @ h), (m2, (x * x).T @ h)]:
        assert out.dtype == torch.float64 and out.device.type == device
        _close(out, ref, dtype)
    _close(b.to_dense(), x, dtype)


@pytest.mark.parametrize("layout", ["dense", "csr"])
def test_chunked_paths(layout, monkeypatch):
    """Gram and moments give the same answer when split into many row chunks."""
    monkeypatch.setattr(blocks_mod, "_CHUNK_ELEMENTS", 10)
    x = _matrix(n=31, d=4)
    h = np.linspace(0.5, 1.5, 31)
    b = _block(x, layout, torch.float64, "cpu")
    th = torch.tensor(h)
    _close(b.weighted_gram(th), x.T @ (x * h[:, None]), torch.float64)
    _close(b.weighted_moments(th)[1], (x * x).T @ h, torch.float64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["dense", "csr"])
def test_float32_storage_computes_exactly_in_float64(layout, device, monkeypatch):
    """compute_dtype=float64 over float32 values: the float64 products of the float32-rounded matrix
    to 1e-13, over several upcast chunks, and no float64 copy of the rows is kept."""
    monkeypatch.setattr(blocks_mod, "_SUM_CHUNK_ROWS", 5)
    monkeypatch.setattr(blocks_mod, "_GPU_CHUNK_ELEMENTS", 5 * 7)  # GPU chunks: 5 rows too
    x = _matrix(n=23, d=7) * 1e3 + 0.1  # values far from representable in float32
    x32 = x.astype(np.float32).astype(np.float64)  # what the block stores, exactly
    b = _block(x, layout, torch.float32, device)
    mixed = (
        DenseBlock(b.x, compute_dtype=torch.float64)
        if layout == "dense"
        else CsrBlock(b.crow_indices, b.col_indices, b.values, b.shape, compute_dtype=torch.float64)
    )
    # a CSR block widens its values once: the sparse kernels take one dtype (gpu/csr.py)
    widened = layout == "csr"
    assert (mixed.dtype, mixed.storage_dtype) == (torch.float64, torch.float64 if widened else torch.float32)
    assert mixed.to(device).dtype == torch.float64
    rng = np.random.default_rng(2)
    v, r, h = rng.normal(size=(7, 2)), rng.normal(size=23), rng.uniform(0.5, 2, size=23)
    t = lambda a: torch.tensor(a, device=device)  # noqa: E731
    exact = dict(rtol=1e-13, atol=1e-13 * np.abs(x32).max())
    for out, ref in [
        (mixed.matmul(t(v[:, 0])), x32 @ v[:, 0]),
        (mixed.matmul(t(v)), x32 @ v),
        (mixed.rmatmul(t(r)), x32.T @ r),
        (mixed.weighted_gram(t(h)), x32.T @ (x32 * h[:, None])),
        (mixed.rows(3, 9), x32[3:9]),
        (mixed.to_dense(), x32),
    ]:
        assert out.dtype == torch.float64
        np.testing.assert_allclose(out.cpu().numpy(), ref, **exact)
    # the float32 product itself is off by far more than that: the test can tell the two apart
    assert np.abs(b.matmul(t(v[:, 0])).double().cpu().numpy() - x32 @ v[:, 0]).max() > 1e3 * exact["atol"]
    with pytest.raises(ValueError, match="only float32 storage"):
        DenseBlock(torch.zeros(2, 2, dtype=torch.float64), compute_dtype=torch.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["dense", "csr"])
def test_take_copies_the_rows_asked_for(layout, device):
    """take(index): those rows, in that order (repeats and the empty row included), as a block of the same
    kind that keeps computing as the original (float32 storage computing in float64 here)."""
    x = _matrix()
    index = [5, 3, 0, 22, 5, 11]
    block = (
        DenseBlock(torch.tensor(x, dtype=torch.float32, device=device), torch.float64)
        if layout == "dense"
        else CsrBlock(
            *(lambda c: (c.indptr, c.indices, torch.tensor(c.data, dtype=torch.float32, device=device), c.shape))(
                sp.csr_matrix(x)
            ),
            compute_dtype=torch.float64,
        )
    )
    taken = block.take(torch.tensor(index))
    assert type(taken) is type(block) and taken.shape == (6, 7) and taken.dtype == torch.float64
    expected = x.astype(np.float32)[index].astype(np.float64)
    _close(taken.to_dense(), expected, torch.float64)
    v = np.random.default_rng(1).normal(size=7)
    _close(taken.matmul(torch.tensor(v)), expected @ v, torch.float64)
    empty = block.take(torch.tensor([], dtype=torch.int64))
    assert empty.shape == (0, 7) and empty.matmul(torch.tensor(v)).numel() == 0


def test_csr_int32_indices_and_duplicates():
    x = _matrix()
    csr = sp.csr_matrix(x)
    b = CsrBlock(
        torch.tensor(csr.indptr, dtype=torch.int32),
        torch.tensor(csr.indices, dtype=torch.int32),
        torch.tensor(csr.data, dtype=torch.float64),
        csr.shape,
    )
    v = torch.arange(x.shape[1], dtype=torch.float64)
    _close(b.matmul(v), x @ v.numpy(), torch.float64)
    # duplicate (row, col) entries add up, as in scipy
    dup = CsrBlock(torch.tensor([0, 2, 2]), torch.tensor([1, 1]), torch.tensor([1.0, 2.0]), (2, 3))
    _close(dup.to_dense(), np.array([[0.0, 3.0, 0.0], [0.0, 0.0, 0.0]]), torch.float64)
    _close(dup.weighted_gram(torch.ones(2)), np.diag([0.0, 9.0, 0.0]), torch.float64)


@pytest.mark.parametrize("device", DEVICES)
def test_csr_sparse_kernels_match_numpy(device):
    """Both CSR kernels (scipy's on the CPU, torch's sparse CSR, cuSPARSE on CUDA, with X^T stored as
    its own CSR copy) give X @ v and X^T @ r of the float64-widened values; int32 indices are kept."""
    x = _matrix(n=41, d=13, seed=4) * 1e3 + 0.1 * (_matrix(n=41, d=13, seed=4) != 0)
    csr = sp.csr_matrix(x)
    x32 = csr.astype(np.float32).toarray().astype(np.float64)
    b = CsrBlock(
        torch.tensor(csr.indptr, device=device),
        torch.tensor(csr.indices, dtype=torch.int32, device=device),
        torch.tensor(csr.data, dtype=torch.float32, device=device),
        csr.shape,
        compute_dtype=torch.float64,
    )
    assert b.col_indices.dtype == torch.int32 and b.values.dtype == torch.float64
    rng = np.random.default_rng(5)
    v, r = rng.normal(size=(13, 3)), rng.normal(size=41)
    t = lambda a: torch.tensor(a, device=device)  # noqa: E731
    exact = dict(rtol=1e-13, atol=1e-13 * np.abs(x32).max())
    for transposed, arg, ref in [(False, v, x32 @ v), (True, r, x32.T @ r), (False, v[:, 0], x32 @ v[:, 0])]:
        out = b.rmatmul(t(arg)) if transposed else b.matmul(t(arg))
        torch_sparse = b._torch_sparse(transposed) @ t(arg)  # the CUDA kernel's path, on any device
        for got in (out, torch_sparse):
            assert got.dtype == torch.float64 and got.device.type == device
            np.testing.assert_allclose(got.cpu().numpy(), ref, **exact)


def test_empty_csr_block():
    b = CsrBlock(
        torch.zeros(4, dtype=torch.int64),
        torch.zeros(0, dtype=torch.int64),
        torch.zeros(0, dtype=torch.float32),
        (3, 2),
    )
    assert b.nnz == 0 and b.matmul(torch.ones(2)).tolist() == [0.0, 0.0, 0.0]
    assert b.rmatmul(torch.ones(3, 2)).shape == (2, 2)


def test_csr_validation():
    with pytest.raises(ValueError, match="n_rows"):
        CsrBlock(torch.tensor([0, 1]), torch.tensor([0]), torch.tensor([1.0]), (2, 2))
    with pytest.raises(ValueError, match="floating"):
        CsrBlock(torch.tensor([0, 1]), torch.tensor([0]), torch.tensor([1]), (1, 2))
    with pytest.raises(ValueError, match="2-D"):
        DenseBlock(torch.ones(3))


@pytest.mark.parametrize("device", DEVICES)
def test_to_and_make_block(device):
    x = _matrix()
    csr = sp.csr_matrix(x)
    for b in [
        make_block(x, dtype=torch.float32),
        make_block(csr, dtype=torch.float32),
        make_block((csr.indptr, csr.indices, csr.data, csr.shape), dtype=torch.float32),
    ]:
        moved = b.to(device)
        assert type(moved) is type(b) and moved.device.type == device
        assert moved.dtype == torch.float32 and moved.n_rows == x.shape[0]
        _close(moved.matmul(torch.ones(x.shape[1])), x.sum(1), torch.float32)
        assert make_block(moved) is moved


# ---- gpu.device ------------------------------------------------------------------
def test_resolve_device_cpu_and_auto():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(" CPU ") == torch.device("cpu")
    assert resolve_device("auto").type == ("cuda" if CUDA else "cpu")
    assert resolve_device().type == resolve_device("auto").type


@pytest.mark.skipif(CUDA, reason="checks the no-CUDA error")
@pytest.mark.parametrize("name", ["cuda", "cuda:0", "CUDA:1"])
def test_resolve_device_cuda_unavailable(name):
    with pytest.raises(RuntimeError, match="torch sees no CUDA device; use device='auto' or 'cpu'"):
        resolve_device(name)


@pytest.mark.skipif(not CUDA, reason="needs CUDA")
def test_resolve_device_cuda_available():
    assert resolve_device("cuda").type == "cuda"
    assert resolve_device("cuda:0") == torch.device("cuda", 0)
    with pytest.raises(RuntimeError, match="CUDA device"):
        resolve_device(f"cuda:{torch.cuda.device_count()}")


@pytest.mark.parametrize("name", ["gpu", "tpu", "", "cuda:x", 3])
def test_resolve_device_bad_name(name):
    with pytest.raises(ValueError, match="auto, cpu, cuda, cuda:N"):
        resolve_device(name)


def test_resolve_dtype():
    assert resolve_dtype("float32") is torch.float32
    assert resolve_dtype("float64") is torch.float64
    assert resolve_dtype(torch.float64) is torch.float64
    for bad in ["float16", "double", torch.int64, None]:
        with pytest.raises(ValueError, match="float32, float64"):
            resolve_dtype(bad)


def test_package_has_no_spark_imports():
    import pathlib

    for path in pathlib.Path(gpu.__file__).parent.glob("*.py"):
        src = path.read_text()
        for banned in ("import pyspark", "from pyspark", "import sparkml", "from sparkml", "import jobs", "from jobs"):
            assert banned not in src, f"{path.name} must not use {banned!r}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_factored_block_is_the_product_of_its_factors(dtype, device):
    """gpu.factored.FactoredBlock (A R, never formed) against the dense product, every method the losses use."""
    from sparkml.gpu.factored import FactoredBlock

    rng = np.random.default_rng(3)
    a, r = rng.normal(size=(40, 6)), rng.normal(size=(6, 5))
    x = a @ r
    block = FactoredBlock(DenseBlock(torch.tensor(a, dtype=dtype, device=device)), torch.from_numpy(r))
    assert block.shape == (40, 5) and block.dtype == dtype and block.device.type == device
    v, res, h = rng.normal(size=5), rng.normal(size=40), rng.uniform(0, 2, 40) * (rng.random(40) < 0.7)
    _close(block.matmul(torch.from_numpy(v)), x @ v, dtype)
    _close(block.rmatmul(torch.from_numpy(res)), x.T @ res, dtype)
    _close(block.weighted_gram(torch.from_numpy(h)), x.T @ (h[:, None] * x), dtype)
    # fewer rows with h != 0 (5) than twice A's width: the Gram matrix of those rows' features instead
    few = np.where(np.arange(40) % 9 == 0, h + 1, 0.0)
    _close(block.weighted_gram(torch.from_numpy(few)), x.T @ (few[:, None] * x), dtype)
    s1, s2 = block.weighted_moments(torch.from_numpy(h))
    _close(s1, h @ x, dtype)
    _close(s2, h @ (x * x), dtype)
    _close(block.take(torch.tensor([7, 2, 2])).to_dense(), x[[7, 2, 2]], dtype)
    _close(block.rows(3, 9), x[3:9], dtype)
    _close(block.margin_pass(torch.from_numpy(v), lambda i, j, m: 2 * m), 2 * x.T @ (x @ v), dtype)
    # products of one column: 40 rows are at most 40 a column, formed once (A R) as a dense block
    formed = block.for_products(1)
    assert isinstance(formed, DenseBlock)
    _close(formed.to_dense(), x, dtype)
    with pytest.raises(ValueError, match=r"right factor must be \(6, p\)"):
        FactoredBlock(DenseBlock(torch.tensor(a)), torch.zeros(5, 5))
    # enough rows for a float32 block's chunked float64 sums (X^T r then comes back in float64)
    a = rng.normal(size=(2500, 6))
    big = FactoredBlock(DenseBlock(torch.tensor(a, dtype=dtype, device=device)), torch.from_numpy(r))
    res = rng.normal(size=2500)
    _close(big.rmatmul(torch.from_numpy(res)), (a @ r).T @ res, dtype)
    assert big.for_products(62) is big and isinstance(big.for_products(63), DenseBlock)  # 40 rows a column


@pytest.mark.parametrize("k", [None, 2])
def test_wide_float32_rmatmul_sums_chunks_in_float64(k):
    """A float32 block of >= 512 columns (a kernel block) sums X^T r over 4096-row chunks in float64:
    it agrees with the float64 product to 1e-6 (the plain float32 product is off by 3.8e-6 here), rows
    past the last full chunk included, for one residual column or several."""
    rng = np.random.default_rng(5)
    d = blocks_mod._WIDE_FEATURES  # 512: the narrowest such block
    x = rng.uniform(0, 1, size=(40000, d)).astype(np.float32)  # kernel-like values: no cancellation help
    r = rng.uniform(0, 1, size=(40000,) if k is None else (40000, k)).astype(np.float32)
    out = DenseBlock(torch.from_numpy(x)).rmatmul(torch.from_numpy(r))
    exact = x.astype(np.float64).T @ r.astype(np.float64)
    assert out.dtype == torch.float64 and tuple(out.shape) == exact.shape
    np.testing.assert_allclose(out.numpy(), exact, rtol=1e-6)


@pytest.mark.parametrize("layout", ["dense", "csr"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_row_stack_is_the_concatenation_of_its_blocks(layout, dtype):
    """gpu.stacked.RowStack against one block of the concatenated rows: every method the losses use,
    take() and rows() across the blocks' boundaries, margin_pass's row positions, and a stacked
    FactoredBlock (how partition_sums reads several partitions' kernel blocks) against the formed product."""
    from sparkml.gpu.factored import FactoredBlock
    from sparkml.gpu.stacked import RowStack

    parts = [_matrix(n=n, seed=s) for n, s in ((23, 0), (5, 1), (11, 2))]
    x = np.vstack(parts)
    stack = RowStack([_block(p, layout, dtype, "cpu") for p in parts])
    assert stack.shape == x.shape and stack.dtype == dtype
    rng = np.random.default_rng(4)
    v, r, h = rng.normal(size=(7, 2)), rng.normal(size=39), rng.uniform(0.1, 2.0, size=39)
    t = torch.tensor
    _close(stack.matmul(t(v)), x @ v, dtype)
    _close(stack.rmatmul(t(r)), x.T @ r, dtype)
    _close(stack.weighted_gram(t(h)), x.T @ (x * h[:, None]), dtype)
    m1, m2 = stack.weighted_moments(t(h))
    _close(m1, x.T @ h, dtype)
    _close(m2, (x * x).T @ h, dtype)
    _close(
        stack.margin_pass(t(v[:, 0]), lambda i, j, m: m * t(h[i:j], dtype=m.dtype)), x.T @ (h * (x @ v[:, 0])), dtype
    )
    index = [1, 22, 23, 27, 30, 38]
    _close(stack.take(t(index)).to_dense(), x[index], dtype)
    assert stack.take(t([], dtype=torch.int64)).n_rows == 0
    _close(stack.rows(20, 30), x[20:30], dtype)
    _close(stack.to_dense(), x, dtype)
    with pytest.raises(ValueError, match="increasing"):
        stack.take(t([5, 2]))
    with pytest.raises(ValueError, match="agree in width"):
        RowStack([_block(parts[0], layout, dtype, "cpu"), _block(np.zeros((3, 4)), layout, dtype, "cpu")])
    right = rng.normal(size=(7, 3))
    factored = FactoredBlock(stack, t(right))
    _close(factored.rmatmul(t(r)), (x @ right).T @ r, dtype)
    _close(factored.matmul(t(v[:3, 0])), x @ right @ v[:3, 0], dtype)
