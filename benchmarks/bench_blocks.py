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

    python benchmarks/bench_blocks.py [--rows 500000] [--features 100] [--threads 1] [--device cpu]
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

from sparkml.gpu import DenseBlock, LogisticLoss, resolve_device
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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=500_000)
    p.add_argument("--features", type=int, default=100)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (one per Spark task core)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "blocks.json"))
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    dev = resolve_device(args.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    x32 = torch.randn(args.rows, args.features, dtype=torch.float32, device=dev)
    w = torch.randn(args.features, dtype=torch.float64, device=dev)
    r = torch.randn(args.rows, dtype=torch.float64, device=dev)
    y = (torch.rand(args.rows, device=dev) < 0.5).to(torch.float64)
    loss, coef = LogisticLoss(fit_intercept=True), torch.randn(args.features + 1, dtype=torch.float64) * 0.1
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
        read_ms = best_ms(lambda: block.x.sum(), args.reps, sync)
        bytes_per_row = args.features * (4 if storage == "float32" else 8)
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
                    best_ms(lambda: upcast(block), args.reps, sync) if block.storage_dtype != block.dtype else 0.0
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
    title = (
        f"One pass over a {args.rows:,} x {args.features} block on {dev.type}, {args.threads} thread(s), "
        f"milliseconds, best of {args.reps}"
    )
    report.write(args.out, title, table, {"args": vars(args), "device": str(dev), "results": rows})


if __name__ == "__main__":
    main()
