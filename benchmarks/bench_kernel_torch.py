"""KernelSVC's math through the ``sparkml.gpu`` layer alone (no Spark): one device, phase by phase.

What one executor does in a KernelSVC fit, on ``--device`` (cuda on a GPU machine, which has PyTorch
but no pyspark), for the binary synthetic problem of ``bench_kernel_svc.py``:

* the card's peaks, measured in the same run: a 8192^3 float32 matrix product (2048^3 on CPU) (TF32 off, as the
  kernels run) in TFLOP/s, and a device-to-device copy in GB/s (bytes read + written);
* K(X, L) throughput (``sparkml.gpu.kernels.kernel_matrix``, rbf, float32) for n x d rows against m
  landmarks: the cross product's 2 n m d flops per second against the matmul peak, and the bytes of
  K written per second against the copy rate (with d = 20 the kernel is bound by writing K);
* scoring a batch (``--score-rows`` float64 rows, Spark's Arrow batch, against ``--score-landmarks``
  landmarks, rbf): the margins K(X, L) c as ``NystroemMap.kernel_block(X) @ c`` (the whole block written,
  then read) and as ``kernel_matmul`` (cache-sized tiles, each dropped after its product), in rows per second;
* a whole fit per ``--sizes`` n: k-means landmarks per class (``sparkml.gpu.kmeans``, 10 rows per
  landmark, 10 Lloyd iterations), the Nystroem map (K_LL's eigendecomposition, ``rcond`` 1e-6),
  the kernel block K(X, L), then KernelSVC's default solve (``sparkml.optim.newton``: 2 squared-hinge
  rounds, then the smoothed hinge of half-width 0.1 by Newton-CG preconditioned by the features'
  second moment, regParam = 1 / n) and the accuracy on 10k held-out rows.

The constants mirror ``sparkml.kernel.kernel_svc`` (which imports pyspark, so this script does not).

    python benchmarks/bench_kernel_torch.py --device cuda --sizes 100000,1000000 --landmarks 4000

Prints a table and writes JSON (default ``benchmarks/results/kernel_torch.json``).
"""

import argparse
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
import report  # noqa: E402
from bench_blocks import best_ms  # noqa: E402
from datasets import synthetic  # noqa: E402

from sparkml.gpu import DenseBlock, OneVsRestProblems, SmoothedHingeLoss, SquaredHingeLoss, resolve_device  # noqa: E402
from sparkml.gpu.factored import FactoredBlock  # noqa: E402
from sparkml.gpu.kernels import kernel_matmul, kernel_matrix  # noqa: E402
from sparkml.gpu.kmeans import kmeans  # noqa: E402
from sparkml.gpu.nystroem import NystroemMap  # noqa: E402
from sparkml.optim.newton import newton_warm_started  # noqa: E402

HINGE_WIDTH, WARM_START_ROUNDS, RCOND, OVERSAMPLE, LLOYD_ITERS = 0.1, 2, 1e-6, 10, 10


def peaks(dev, sync):
    torch.backends.cuda.matmul.allow_tf32 = False
    size, elements = (8192, 1 << 28) if dev.type == "cuda" else (2048, 1 << 25)  # 1 GiB copied on a GPU
    a = torch.randn(size, size, device=dev)
    mm = best_ms(lambda: a @ a, 5, sync) / 1e3
    big = torch.empty(elements, device=dev)
    copy = best_ms(lambda: big.clone(), 5, sync) / 1e3
    return {"matmul_fp32_tflops": 2 * size**3 / mm / 1e12, "copy_gbs": 2 * elements * 4 / copy / 1e9}


def kernel_throughput(dev, sync, n, m, d, peak):
    x, lm = torch.randn(n, d, device=dev), torch.randn(m, d, device=dev)
    t = best_ms(lambda: kernel_matrix("rbf", x, lm, gamma=1.0 / d), 3, sync) / 1e3
    tflops, gbs = 2 * n * m * d / t / 1e12, n * m * 4 / t / 1e9
    return {
        "n": n,
        "m": m,
        "d": d,
        "ms": t * 1e3,
        "tflops": tflops,
        "of_matmul_peak": tflops / peak["matmul_fp32_tflops"],
        "write_gbs": gbs,
        "of_copy_rate": gbs / peak["copy_gbs"],
    }


def scoring(dev, sync, n, m, d):
    """Rows per second of a Nystroem model's margins over one float64 batch, both ways (module docstring)."""
    x, lm = torch.randn(n, d, dtype=torch.float64, device=dev), torch.randn(m, d, dtype=torch.float64, device=dev)
    c = torch.randn(m, 1, dtype=torch.float64, device=dev)
    ny = NystroemMap("rbf", lm, gamma=1.0 / d, projection=torch.eye(m, dtype=torch.float64, device=dev))
    block = best_ms(lambda: ny.kernel_block(x) @ c, 5, sync) / 1e3
    tiled = best_ms(lambda: kernel_matmul("rbf", x, lm, c, gamma=1.0 / d), 5, sync) / 1e3
    return {
        "n": n,
        "m": m,
        "d": d,
        "block_then_product_ms": block * 1e3,
        "kernel_matmul_ms": tiled * 1e3,
        "block_rows_per_s": n / block,
        "kernel_matmul_rows_per_s": n / tiled,
    }


def kmeans_landmarks(x, y, m, dev):
    """Per class: the k-means centres of up to 10 rows per landmark of that class (KernelSVC's default)."""
    rng, centres = np.random.default_rng(0), []
    for c in np.unique(y):
        rows = x[y == c]
        q = max(1, int(round(m * len(rows) / len(x))))
        sample = torch.from_numpy(rows[rng.permutation(len(rows))[: OVERSAMPLE * q]]).to(dev)
        centres.append(kmeans(sample, q, iters=LLOYD_ITERS, seed=0))
    return torch.cat(centres), sample


def evaluate_for(block, y, w):
    """``sparkml.optim.newton``'s pass: the problems' sums over the one block (a task's, without Spark)."""
    cache = {}

    def make(problems):
        def evaluate(theta, idx, kind):
            c = torch.from_numpy(np.ascontiguousarray(theta))
            pr = problems(idx)
            if kind == "hessp":  # the active rows are found once per Newton round (as PartitionSums does)
                key = (repr(pr), c[0].numpy().tobytes())
                if cache.get("key") != key:
                    cache["key"], cache["op"] = key, pr.hessp_operator(c[0], block, y, w)
                return (cache["op"](c[1]).double().cpu().numpy(),)
            return tuple(t.double().cpu().numpy() for t in getattr(pr, kind)(c, block, y, w))

        return evaluate

    return make


def fit(dev, sync, n, m, d):
    x, y = synthetic(n, d, 0)
    xt, yt = synthetic(10_000, d, 1)
    gamma = 1.0 / (d * x.var())
    phases, start = {}, time.perf_counter()

    def phase(name, f):
        sync()
        t = time.perf_counter()
        out = f()
        sync()
        phases[name] = time.perf_counter() - t
        return out

    xd = phase("to_device", lambda: torch.from_numpy(x).to(dev, torch.float32))
    landmarks, sample = phase("kmeans", lambda: kmeans_landmarks(x, y, m, dev))
    ny = phase("nystroem", lambda: NystroemMap("rbf", landmarks, gamma=gamma, rcond=RCOND))
    scale = (ny.transform(sample[:1000]) ** 2).mean(0).cpu().numpy()
    block = phase("kernel_block", lambda: FactoredBlock(DenseBlock(ny.kernel_block(xd)), ny.projection))
    yd, wd = torch.from_numpy(y).to(dev), torch.ones(n, dtype=torch.float64, device=dev)
    r = ny.n_components

    def problems(loss):
        return lambda idx: OneVsRestProblems(loss, [1.0])

    theta, summary = phase(
        "newton",
        lambda: newton_warm_started(
            evaluate_for(block, yd, wd),
            problems(SmoothedHingeLoss(True, width=HINGE_WIDTH)),
            np.zeros((1, r + 1)),
            warm_start=(problems(SquaredHingeLoss(True)), WARM_START_ROUNDS),
            solver="cg",
            preconditioner=(None, scale),
            reg=1.0 / n,
            weight_sum=float(n),
            fit_intercept=True,
            max_iter=100,
            tol=1e-6,
            names=["KernelSVC"],
        ),
    )
    total = time.perf_counter() - start
    phi = ny.transform(torch.from_numpy(xt).to(dev, torch.float32)).double().cpu().numpy()
    accuracy = float(((phi @ theta[0, :r] + theta[0, r] > 0) == (yt > 0)).mean())
    return {
        "n": n,
        "m": m,
        "d": d,
        "components": r,
        "seconds": total,
        "accuracy": accuracy,
        "rounds": int(summary[0].totalIterations),
        **{f"{k}_s": v for k, v in phases.items()},
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--sizes", default="100000", help="comma-separated training rows per fit")
    p.add_argument("--landmarks", type=int, default=4000)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--kernel-features", default="20,256", help="d values of the K(X, L) throughput rows")
    p.add_argument("--threads", type=int, default=2, help="torch intra-op threads (CPU)")
    p.add_argument("--score-rows", type=int, default=10_000)
    p.add_argument("--score-landmarks", type=int, default=1000)
    p.add_argument("--out", default=os.path.join(HERE, "results", "kernel_torch.json"))
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    dev = resolve_device(args.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    peak = peaks(dev, sync)
    print(
        f"{dev} ({torch.cuda.get_device_name(dev) if dev.type == 'cuda' else 'cpu'}): float32 matmul "
        f"{peak['matmul_fp32_tflops']:.1f} TFLOP/s, copy {peak['copy_gbs']:.0f} GB/s"
    )
    kernels = [
        kernel_throughput(dev, sync, max(sizes), args.landmarks, int(k), peak)
        for k in args.kernel_features.split(",")
        if k
    ]
    print(f"{'K(X, L)':12s} {'ms':>9s} {'TFLOP/s':>8s} {'of peak':>8s} {'GB/s K':>8s} {'of copy':>8s}")
    for k in kernels:
        print(
            f"{k['n']}x{k['m']} d={k['d']:<4d} {k['ms']:9.2f} {k['tflops']:8.2f} {k['of_matmul_peak']:8.1%} "
            f"{k['write_gbs']:8.0f} {k['of_copy_rate']:8.1%}"
        )
    score = scoring(dev, sync, args.score_rows, args.score_landmarks, args.features)
    print(
        f"scoring {score['n']} x {score['d']} rows, {score['m']} landmarks, float64: kernel_block(X) @ c "
        f"{score['block_then_product_ms']:.1f} ms ({score['block_rows_per_s']:,.0f} rows/s), kernel_matmul "
        f"{score['kernel_matmul_ms']:.1f} ms ({score['kernel_matmul_rows_per_s']:,.0f} rows/s)"
    )
    fits = [fit(dev, sync, n, args.landmarks, args.features) for n in sizes]
    names = ["to_device", "kmeans", "nystroem", "kernel_block", "newton"]
    table = (
        "| rows | fit s | "
        + " | ".join(f"{k} s" for k in names)
        + " | Newton rounds | accuracy |\n|"
        + "---|" * (len(names) + 4)
        + "\n"
        + "\n".join(
            f"| {f['n']:,} | {f['seconds']:.2f} | "
            + " | ".join(f"{f[k + '_s']:.3f}" for k in names)
            + f" | {f['rounds']} | {f['accuracy']:.4f} |"
            for f in fits
        )
    )
    title = (
        f"KernelSVC's fit phases through torch alone on {dev.type}, {args.landmarks} landmarks, "
        f"{args.features} features"
    )
    report.write(
        args.out,
        title,
        table,
        {
            "args": vars(args),
            "device": str(dev),
            "torch": torch.__version__,
            "peaks": peak,
            "kernels": kernels,
            "scoring": score,
            "fits": fits,
        },
    )


if __name__ == "__main__":
    main()
