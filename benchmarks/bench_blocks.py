"""What one pass of a linear model costs per storage / compute dtype, on one block.

Columns: X @ w; X^T r; a whole logistic loss-and-gradient pass (``LogisticLoss.loss_gradient``:
margins, pointwise loss, X^T r; float32 storage computing in float64 converts each run of rows
once for both products); one read of the stored block (``x.sum()``, the memory floor, also in GB/s);
the L-BFGS step on the host (``sparkml.optim``'s two-loop direction from 10 stored pairs, plus the
pair update: what every rank runs after the all-reduce); and a whole iteration as an ``allreduce``
task runs it without the all-reduce: the logistic pass, its sums copied to the host as float64, the
step. Two parts of the pass alone, its profile: ``upcast``, the float32 -> float64 conversion of every
run of rows into the pass's reused buffer (float32 storage computing in float64 only), and
``pointwise``, the logistic loss and its derivative from precomputed margins (float64, one per row);
``pass/read``: the logistic pass over one read of the block. Torch only (no Spark): the per-task work
of every iteration. Prints a table and writes JSON.

``--layout csr`` measures CSR blocks instead: hashed one-hot rows as in CTR data, ``--nnz-per-row``
nonzeros in ``--features`` columns (4 numeric columns present in every row, the rest one-hot at random).
A CSR block computing in float64 widens its values when built (``gpu/csr.py``), so its two float64 rows
match; ``read X`` is then one read of the values.

    python benchmarks/bench_blocks.py [--rows 500000] [--features 100] [--threads 1] [--device cpu]
    python benchmarks/bench_blocks.py --layout csr --features 1048576 --nnz-per-row 34
"""

import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report

from sparkml.gpu import CsrBlock, DenseBlock, LogisticLoss, resolve_device
from sparkml.gpu.blocks import _PASS_CHUNK_ROWS
from sparkml.optim.history import InverseHessian


def best_ms(f, reps, sync):
    f()
    times = []
    for _ in range(reps):
        sync()
        start = time.perf_counter()
        f()
        sync()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def hashed_rows(rows, features, nnz_per_row, device):
    """CSR arrays of CTR-like rows: 4 numeric columns in every row, then one-hot columns drawn at random."""
    rng = np.random.default_rng(0)
    numeric = min(4, nnz_per_row)
    cols = np.empty((rows, nnz_per_row), np.int32)
    cols[:, :numeric] = np.arange(numeric)
    cols[:, numeric:] = rng.integers(numeric, features, size=(rows, nnz_per_row - numeric))
    cols.sort(axis=1)  # sorted, duplicates allowed (they add up)
    values = np.ones((rows, nnz_per_row), np.float32)
    values[:, :numeric] = rng.standard_normal((rows, numeric))
    crow = np.arange(0, rows * nnz_per_row + 1, nnz_per_row, dtype=np.int64)
    return (torch.from_numpy(a).to(device) for a in (crow, cols.ravel(), values.ravel()))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=500_000)
    p.add_argument("--features", type=int, default=100)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (one per Spark task core)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--layout", default="dense", choices=["dense", "csr"])
    p.add_argument("--nnz-per-row", type=int, default=34, help="csr only")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "blocks.json"))
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    dev = resolve_device(args.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    w = torch.randn(args.features, dtype=torch.float64, device=dev)
    r = torch.randn(args.rows, dtype=torch.float64, device=dev)
    y = (torch.rand(args.rows, device=dev) < 0.5).to(torch.float64)
    loss, coef = LogisticLoss(fit_intercept=True), torch.randn(args.features + 1, dtype=torch.float64) * 0.1
    if args.layout == "csr":
        crow, col, values = hashed_rows(args.rows, args.features, args.nnz_per_row, dev)
        shape = (args.rows, args.features)
        blocks = [
            ("float32", "float32", CsrBlock(crow, col, values, shape)),
            ("float32", "float64", CsrBlock(crow, col, values, shape, compute_dtype=torch.float64)),
            ("float64", "float64", CsrBlock(crow, col, values.double(), shape)),
        ]
    else:
        x32 = torch.randn(args.rows, args.features, dtype=torch.float32, device=dev)
        blocks = [
            ("float32", "float32", DenseBlock(x32)),
            ("float32", "float64", DenseBlock(x32, compute_dtype=torch.float64)),
            ("float64", "float64", DenseBlock(x32.double())),
        ]
    memory = InverseHessian(10)
    rng = np.random.default_rng(0)
    for _ in range(10):
        s = rng.standard_normal(args.features + 1)
        memory.update(s, s + 0.1 * rng.standard_normal(args.features + 1))

    def lbfgs_step(g):
        d = memory.direction(g)
        memory.update(1e-3 * d, 1e-3 * d + 1e-6 * g)  # keeps 10 pairs of positive curvature
        return d

    def iteration(block):
        value, grad = loss.loss_gradient(coef, block, y)
        return lbfgs_step(grad.double().cpu().numpy()), float(value)

    def upcast(block):
        """The float32 -> float64 conversion alone: every run of rows through the pass's reused buffer."""
        for _ in block._upcast_chunks(_PASS_CHUNK_ROWS):
            pass

    margins = {dtype: torch.randn(args.rows, dtype=dtype, device=dev) for dtype in (torch.float32, torch.float64)}

    def pointwise(block):
        """The logistic loss's per-row part alone: the losses (summed) and dl/dm from given margins."""
        m = margins[block.dtype].to(torch.float64)
        value, g = loss._pointwise(m, y)
        return float(value.sum()), g.to(block.dtype)

    g0 = rng.standard_normal(args.features + 1)
    rows = []
    for storage, compute, block in blocks:
        stored = block.values if args.layout == "csr" else block.x
        read_ms = best_ms(lambda: stored.sum(), args.reps, sync)
        bytes_per_row = stored.numel() * stored.element_size() // args.rows
        rows.append(
            {
                "storage": storage,
                "compute": compute,
                "matmul_ms": best_ms(lambda: block.matmul(w), args.reps, sync),
                "rmatmul_ms": best_ms(lambda: block.rmatmul(r), args.reps, sync),
                "logistic_pass_ms": best_ms(lambda: loss.loss_gradient(coef, block, y), args.reps, sync),
                "lbfgs_step_ms": best_ms(lambda: lbfgs_step(g0), args.reps, sync),
                "iteration_ms": best_ms(lambda: iteration(block), args.reps, sync),
                "upcast_ms": (
                    best_ms(lambda: upcast(block), args.reps, sync)
                    if block.storage_dtype != block.dtype and args.layout == "dense"
                    else 0.0
                ),
                "pointwise_ms": best_ms(lambda: pointwise(block), args.reps, sync),
                "read_ms": read_ms,
                "read_gbs": args.rows * bytes_per_row / read_ms / 1e6,
                "bytes_per_row": bytes_per_row,
            }
        )
    table = (
        "| storage | compute | X @ w | X^T r | logistic pass | L-BFGS step | iteration | read X | GB/s | upcast "
        "| pointwise | pass / read |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n"
        + "\n".join(
            f"| {r['storage']} | {r['compute']} | {r['matmul_ms']:.2f} | {r['rmatmul_ms']:.2f} | "
            f"{r['logistic_pass_ms']:.2f} | {r['lbfgs_step_ms']:.3f} | {r['iteration_ms']:.2f} | {r['read_ms']:.2f} | "
            f"{r['read_gbs']:.0f} | {r['upcast_ms']:.2f} | {r['pointwise_ms']:.2f} | "
            f"{r['logistic_pass_ms'] / r['read_ms']:.2f} |"
            for r in rows
        )
    )
    what = f"{args.layout} block" if args.layout == "dense" else f"CSR block ({args.nnz_per_row} nonzeros a row)"
    title = (
        f"One pass over a {args.rows:,} x {args.features} {what} on {dev.type}, {args.threads} thread(s), "
        f"milliseconds, best of {args.reps}"
    )
    report.write(args.out, title, table, {"args": vars(args), "device": str(dev), "results": rows})


if __name__ == "__main__":
    main()
