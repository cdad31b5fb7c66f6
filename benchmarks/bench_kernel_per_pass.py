"""KernelSVC's executor path with its kernel blocks computed per pass (or stored), without Spark.

What a KernelSVC fit runs on its executors, driven by torch and numpy alone (the library's own task code under a
stand-in task context, as ``bench_executor_path.py``), on ``bench_kernel_svc.py``'s synthetic problem:

1. the training rows written as blocks (float32), ``--partition-rows`` rows a partition;
2. the feature map as ``KernelSVC`` fits it at defaults: k-means centres of a class-stratified sample (10 rows a
   landmark, 5 Lloyd iterations), the Nystroem projection (rcond 1e-6, float32 eigendecomposition) and the
   preconditioner's spectrum from 1000 sampled rows, gamma="scale", C = 1 (regParam 1 / n);
3. every partition derived with a ``KernelPlan`` (``sparkml.data.derive``): ``--blocks per_pass`` keeps the rows
   and every pass computes their K(X, L) in chunks (``sparkml.gpu.kernel_block``), ``--blocks stored`` stores K(X, L);
4. the Newton solve of ``KernelSVC`` (two squared-hinge rounds, then the smoothed hinge; Newton-CG preconditioned
   by the spectrum beyond 256 features) in a one-rank barrier task over all the partitions;
5. the held-out accuracy of the margins K(X_test, L) (P beta) + b.

``tests/test_kernel_per_pass_path.py`` checks that both kinds of blocks give the same model (CPU, and CUDA where
torch sees a GPU). As a script it times the path on ``--device``:

    python benchmarks/bench_kernel_per_pass.py --rows 10000000 --landmarks 4000 --blocks per_pass --device cuda
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_executor_path import StandIn, barrier_task

from sparkml.data import block_store
from sparkml.data.derive import KernelPlan, derive_partition, executor_shares
from sparkml.optim.iterations import Progress
from sparkml.params.converters import memory_bytes
from sparkml.runtime import task_context
from sparkml.strategies.exact import newton

HINGE_WIDTH, WARM_START_ROUNDS = 0.1, 2  # KernelSVC's (sparkml.kernel.kernel_svc)
CPU_BUDGET = "4g"  # the executor's kernel blocks on a CPU: half of bench_kernel_svc.py's 8g local executor
CG_FROM = 257  # features from which KernelSVC's Newton rounds use CG inside a barrier stage


def synthetic(n, d, seed):
    """``datasets.synthetic`` in float32 rows: x ~ N(0, I_d), y from a sphere, a product and a sine."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d), dtype=np.float32)
    score = x[:, 0] ** 2 + x[:, 1] ** 2 - 2 * x[:, 2] * x[:, 3] + 2 * np.sin(2 * x[:, 4])
    y = (score + 0.3 * rng.standard_normal(n, dtype=np.float32) > 1.5).astype(np.float64)
    return x, y


def write_blocks(x, y, partition_rows, dtype="float32"):
    """(dataset id, handle rows (partition, rows, store)) of x, y (weights 1) as blocks of ``dtype``."""
    dataset = block_store.new_dataset_id()
    handles = []
    for p, start in enumerate(range(0, len(x), partition_rows)):
        writer = block_store.PartitionWriter(dataset, p)
        rows = x[start : start + partition_rows]
        writer.append("x", np.ascontiguousarray(rows, dtype=dtype))
        writer.append("y", y[start : start + partition_rows])
        writer.append("w", np.ones(len(rows)))
        writer.commit()
        handles.append((p, len(rows), block_store.store_key()))
    return dataset, handles


def feature_map(x, y, m, gamma, device, seed=0):
    """(NystroemSpec, preconditioner shape) as ``sparkml.kernel.feature_map.fit_feature_map`` makes them."""
    import torch

    from sparkml.gpu.feature_maps import NystroemSpec
    from sparkml.gpu.kmeans import kmeans
    from sparkml.gpu.nystroem import NystroemMap

    rng = np.random.default_rng(seed)
    centres = []
    for c in (0.0, 1.0):
        members = np.flatnonzero(y == c)
        q = max(1, int(round(m * len(members) / len(y))))
        sample = torch.as_tensor(x[rng.choice(members, min(len(members), 10 * q), replace=False)]).to(device)
        centres.append(kmeans(sample, q, iters=5, seed=seed, assign_dtype=torch.float32).cpu().numpy())
    landmarks = np.concatenate(centres)
    nystroem = NystroemMap(
        "rbf", torch.as_tensor(landmarks).to(device), rcond=1e-6, gamma=gamma, eigh_dtype=torch.float32
    )
    probe = torch.as_tensor(x[rng.choice(len(x), 1000, replace=False)], dtype=torch.float64).to(device)
    spectrum = (nystroem.transform(probe) ** 2).mean(0).cpu().numpy()
    spec = NystroemSpec("rbf", landmarks, nystroem.projection.cpu().numpy(), gamma, 3, 0.0)
    return spec, (None, spectrum)


def fit(x, y, *, landmarks, blocks="per_pass", device="cpu", partition_rows=1_000_000, budget="auto", dtype="float32"):
    """KernelSVC's executor path (module docstring) -> dict: theta (1, r + 1), spec, rounds, seconds by phase;
    ``dtype`` as KernelSVC's (the blocks' storage and the passes' arithmetic).
    ``budget``: the executor's kernel-block bytes (``KernelPlan``), a memory size or "auto" (a GPU: its share
    of the device; a CPU: ``CPU_BUDGET``)."""
    import torch

    from sparkml.gpu import OneVsRestProblems, SmoothedHingeLoss, SquaredHingeLoss
    from sparkml.gpu.feature_maps import RowFeatures

    n, gpus = len(x), (["0"] if str(device).startswith("cuda") else [])
    gamma = 1.0 / (x.shape[1] * float(x.astype(np.float64).var()))
    times = {}
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    with task_context.use(StandIn(0, gpus)):
        start = time.perf_counter()
        source, handles = write_blocks(x, y, partition_rows, dtype)
        times["write_s"] = time.perf_counter() - start
        start = time.perf_counter()
        spec, shape = feature_map(x, y, landmarks, gamma, device)
        times["feature_map_s"] = time.perf_counter() - start
        plan = KernelPlan(
            "rbf",
            spec.landmarks,
            gamma,
            3,
            0.0,
            mode=blocks,
            budget_bytes=None if budget == "auto" else memory_bytes(budget),
            cpu_budget_bytes=memory_bytes(CPU_BUDGET),
            shares=executor_shares(handles),
        )
        target = block_store.new_dataset_id()
        start = time.perf_counter()
        stored = sum(
            derive_partition(source, target, p, device, dtype, RowFeatures(spec), spec.projection, plan)
            for p, _, _ in handles
        )
        block_store.drop(source)
        times["derive_s"] = time.perf_counter() - start
        r = spec.projection.shape[1]

        def problems(loss):
            return lambda idx: OneVsRestProblems(loss, [1.0])

        try:
            start = time.perf_counter()
            with barrier_task(handles, target, None, device, dtype, gpus) as task:
                theta, summaries = newton(
                    task,
                    problems(SmoothedHingeLoss(True, width=HINGE_WIDTH)),
                    np.zeros((1, r + 1)),
                    warm_start=(problems(SquaredHingeLoss(True)), WARM_START_ROUNDS),
                    solver="cg" if r + 1 >= CG_FROM else "cholesky",
                    preconditioner=shape if r + 1 >= CG_FROM else None,
                    reg=1.0 / n,
                    weight_sum=float(n),
                    fit_intercept=True,
                    max_iter=100,
                    tol=1e-4,
                    names=["KernelSVC"],
                    progress=Progress(),
                    checkpoint=None,
                )
                used = str(task.sums.device)
            times["newton_s"] = time.perf_counter() - start
        finally:
            block_store.drop(target)
    peak = torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None
    return dict(
        theta=theta,
        spec=spec,
        rounds=summaries[0].totalIterations,
        stored_rows=stored,
        device=used,
        gpu_peak_gb=peak,
        **times,
    )


def accuracy(result, x, y, device="cpu"):
    """Held-out accuracy of the fitted margins K(X, L) (P beta) + b."""
    import torch

    spec, theta = result["spec"], result["theta"][0]
    fmap = spec.make().to(device)
    c = torch.as_tensor(spec.projection @ theta[:-1]).to(device)
    margins = torch.cat(
        [fmap.kernel_product(torch.as_tensor(x[i : i + 65536]).to(device), c) for i in range(0, len(x), 65536)]
    )
    return float(np.mean((margins.cpu().numpy() + theta[-1] > 0) == (y > 0)))


def main(argv=None):
    import report
    import torch

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--landmarks", type=int, default=4000)
    p.add_argument("--blocks", default="per_pass", help="per_pass, stored, or both (one fit each)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--partition-rows", type=int, default=1_000_000)
    p.add_argument("--budget", default="auto", help=f"kernel-block bytes (auto: half the GPU's, {CPU_BUDGET} on a CPU)")
    p.add_argument("--test-rows", type=int, default=100_000)
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="the task's cores (torch threads on the CPU)")
    p.add_argument("--out", default=None, help="default: benchmarks/results/kernel_per_pass_<rows>_<device>.json")
    args = p.parse_args(argv)
    StandIn.cores = args.threads
    os.environ.setdefault("SPARK_LOCAL_DIRS", tempfile.mkdtemp(prefix="kernel-per-pass-"))
    x, y = synthetic(args.rows, args.features, 0)
    xt, yt = synthetic(args.test_rows, args.features, 1)
    rows, payload = [], []
    for blocks in ("per_pass", "stored") if args.blocks == "both" else (args.blocks,):
        start = time.perf_counter()
        result = fit(
            x,
            y,
            landmarks=args.landmarks,
            blocks=blocks,
            device=args.device,
            partition_rows=args.partition_rows,
            budget=args.budget,
        )
        total = time.perf_counter() - start
        acc = accuracy(result, xt, yt, args.device)
        phases = {k: round(v, 2) for k, v in result.items() if k.endswith("_s")}
        payload.append(
            dict(
                blocks=blocks,
                total_s=total,
                accuracy=acc,
                rows=args.rows,
                landmarks=args.landmarks,
                **{k: v for k, v in result.items() if k not in ("theta", "spec")},
            )
        )
        peak = "-" if result["gpu_peak_gb"] is None else f"{result['gpu_peak_gb']:.1f}"
        rows.append(
            f"| {args.rows:,} x {args.features} | {args.landmarks} | {blocks} | {result['device']} | {total:.1f} | "
            f"{phases['feature_map_s']} | {phases['derive_s']} | {phases['newton_s']} | {result['rounds']} | "
            f"{acc:.4f} | {peak} |"
        )
        print(rows[-1], flush=True)
    table = "\n".join(
        [
            "| rows x d | landmarks | kernel blocks | device | total s | feature map s | derive s | Newton s | "
            "rounds | held-out accuracy | GPU peak GB |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
            *rows,
        ]
    )
    device = "cuda" if args.device.startswith("cuda") else "cpu"
    out = args.out or os.path.join(os.path.dirname(__file__), "results", f"kernel_per_pass_{args.rows}_{device}.json")
    report.write(
        out,
        "KernelSVC's executor path with its kernel blocks computed per pass (or stored), one task",
        table,
        {"rows": payload},
        "total: writing the blocks, the feature map (k-means landmarks, projection), deriving the blocks and the "
        "Newton solve (rounds: the smoothed hinge's, after two squared-hinge rounds); accuracy on held-out rows.",
    )


if __name__ == "__main__":
    main()
