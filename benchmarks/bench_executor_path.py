"""The executor path without Spark: what a Spark task runs, driven by torch, numpy and pyarrow alone.

Each step is the library's own task code, under a stand-in task context (``sparkml.runtime.task_context.use``):

1. Arrow record batches -> blocks in the block store (``sparkml.data.convert.convert_partition``, the
   conversion's task function), storage ``float32`` as the estimators' default;
2. the ``allreduce`` strategy's optimizer (``strategies.exact.quasi_newton``) on a ``BarrierTask`` of a
   one-rank stage: the rendezvous, the device choice (``task_context.device``), the blocks opened on the
   device, the process group (NCCL on CUDA, gloo on the CPU) adding the sums;
3. KernelSVC's per-task phases: the Nystroem features of the rows computed on the device and stored as
   blocks, then the one-vs-rest Newton rounds (``strategies.exact.newton``) over them in a barrier task;
4. scoring a batch (``sparkml.scoring.batch.score_batch``).

``tests/test_executor_path.py`` checks the results on the CPU (and on CUDA where a GPU is visible) against
references computed here in numpy and scipy. Run as a script, it times the path on every device it finds
(a machine with a GPU needs no Spark or Java):

    python benchmarks/bench_executor_path.py [--rows 1000000] [--features 100] [--kernel-rows 100000] [--landmarks 500]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sparkml.data import block_store
from sparkml.data.convert import convert_partition, handle_rows
from sparkml.optim.iterations import Progress
from sparkml.runtime import task_context
from sparkml.strategies import rendezvous
from sparkml.strategies.barrier_task import BarrierTask, Meeting
from sparkml.strategies.exact import newton, quasi_newton
from sparkml.strategies.table import StrategyOptions


@dataclass
class _Info:
    address: str


@dataclass
class _Gpus:
    addresses: list


class StandIn:
    """The context of one task of a one-rank stage on this machine (``task_context.use``): its partition, its
    cores, its GPU (``gpus``: the addresses Spark would assign) and a barrier context's calls."""

    cores = 1  # the task's cores (spark.task.cpus): torch's threads; the script sets --threads

    def __init__(self, partition=0, gpus=()):
        self.partition, self.gpus = partition, list(gpus)

    def partitionId(self):
        return self.partition

    def cpus(self):
        return self.cores

    def getTaskInfos(self):
        return [_Info("127.0.0.1:0")]

    def allGather(self, message=""):
        return [message]

    def resources(self):
        return {"gpu": _Gpus(self.gpus)} if self.gpus else {}


def classification_data(n, d, seed=0, classes=2):
    """(x float64 (n, d), y in 0..classes-1, w): a noisy linear (binary) or argmax-of-linear problem."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * np.linspace(0.5, 2.0, d)
    if classes == 2:
        y = (x @ np.linspace(1.0, -1.0, d) / np.sqrt(d) + rng.logistic(size=n) * 0.5 > 0).astype(np.float64)
    else:
        scores = x @ rng.normal(size=(d, classes)) / np.sqrt(d) + rng.gumbel(size=(n, classes)) * 0.3
        y = scores.argmax(axis=1).astype(np.float64)
    return x, y, rng.uniform(0.5, 1.5, size=n)


def arrow_batches(x, y, w, rows_per_batch=65536):
    """The conversion's input: Arrow batches of (x list<double>, y double, w double), as ``mapInArrow`` sends."""
    n, d = x.shape
    out = []
    for start in range(0, n, rows_per_batch):
        xs = np.ascontiguousarray(x[start : start + rows_per_batch], dtype=np.float64)
        k = len(xs)
        column = pa.ListArray.from_arrays(pa.array(np.arange(0, k * d + 1, d, dtype=np.int32)), pa.array(xs.ravel()))
        out.append(
            pa.RecordBatch.from_arrays(
                [column, pa.array(y[start : start + k]), pa.array(w[start : start + k])], ["x", "y", "w"]
            )
        )
    return out


def convert(x, y, w, dtype="float32", partition=0):
    """Blocks of (x, y, w) in the block store: (dataset id, the handle rows a barrier task reads)."""
    dataset_id = block_store.new_dataset_id()
    with task_context.use(StandIn(partition)):
        rows = list(handle_rows(convert_partition(iter(arrow_batches(x, y, w)), dataset_id, False, dtype)))
    return dataset_id, [(p, n, block_store.store_key()) for p, n, *_ in rows]


class L2Objective:
    """F(theta) = (1/W) D(theta) + reg/2 ||beta||^2, theta = [beta, b] the loss's own coefficients: D the data
    term's weighted sum (``with_data_sum``), the intercept unpenalized. The interface of
    ``sparkml.optim.linear_objective.LinearObjective`` that the solvers call, without its feature scaling."""

    def __init__(self, size, weight_sum, reg, data_sum=None):
        self.size, self.weight_sum, self.reg, self.data_sum = size, weight_sum, reg, data_sum

    def with_data_sum(self, data_sum, weight_sum=None):
        return L2Objective(self.size, self.weight_sum if weight_sum is None else weight_sum, self.reg, data_sum)

    def loss_coef(self, theta):
        return np.asarray(theta, dtype=np.float64)

    def l1_weights(self):
        return None

    def fun_grad(self, theta):
        f, g = self.data_sum(theta)
        beta = np.asarray(theta)[:-1]
        g = np.asarray(g, dtype=np.float64).reshape(-1) / self.weight_sum
        g[:-1] += self.reg * beta
        return float(f) / self.weight_sum + 0.5 * self.reg * float(beta @ beta), g


def barrier_task(blocks, dataset_id, loss, device, compute_dtype, gpus=()):
    """A one-rank ``BarrierTask`` over ``blocks`` (enter it under ``task_context.use(StandIn(...))``)."""
    return BarrierTask(blocks, dataset_id, loss, device, compute_dtype, Meeting(None, rendezvous.new_secret()), False)


def fit_logistic(x, y, w, *, reg=0.01, device="auto", dtype="float32", compute_dtype="float64", gpus=(), tol=1e-10):
    """The ``allreduce`` L-BFGS fit of L2-regularized logistic regression through the executor path:
    (theta = [beta, b], TrainingSummary, the task's device, seconds of the fit after the conversion)."""
    from sparkml.gpu import LogisticLoss

    dataset_id, blocks = convert(x, y, w, dtype)
    try:
        objective = L2Objective(x.shape[1] + 1, float(w.sum()), reg)
        with task_context.use(StandIn(0, gpus)):
            start = time.perf_counter()
            with barrier_task(blocks, dataset_id, LogisticLoss(True), device, compute_dtype) as task:
                theta, summary = quasi_newton(
                    task,
                    objective,
                    np.zeros(objective.size),
                    options=StrategyOptions(device=device),
                    max_iter=200,
                    tol=tol,
                    name="executor path",
                    owlqn=False,
                    bounds=None,
                    progress=Progress(),
                    checkpoint=None,
                )
                used = str(task.sums.device)
            seconds = time.perf_counter() - start
    finally:
        block_store.drop_partitions(dataset_id, [p for p, _, _ in blocks])
    return theta, summary, used, seconds


def logistic_reference(x, y, w, reg=0.01):
    """The same objective minimized by scipy's L-BFGS-B on numpy (float64): theta = [beta, b]."""
    from scipy.optimize import minimize

    xt = np.hstack([x, np.ones((len(x), 1))])
    weight_sum = w.sum()

    def fun(theta):
        m = xt @ theta
        f = np.sum(w * (np.logaddexp(0, m) - y * m)) / weight_sum + 0.5 * reg * theta[:-1] @ theta[:-1]
        g = xt.T @ (w * (1 / (1 + np.exp(-m)) - y)) / weight_sum
        g[:-1] += reg * theta[:-1]
        return f, g

    return minimize(fun, np.zeros(xt.shape[1]), jac=True, method="L-BFGS-B", options={"gtol": 1e-12, "ftol": 0}).x


def nystroem_features(x, landmarks, gamma, device="auto"):
    """KernelSVC's feature phase on the task's device: phi(x) = K(x, L) K_LL^{-1/2} (RBF), float64 on the host."""
    import torch

    from sparkml.gpu.nystroem import NystroemMap

    dev = torch.device(task_context.device(device).device)
    fmap = NystroemMap("rbf", torch.as_tensor(landmarks, dtype=torch.float64).to(dev), gamma=gamma)
    rows = torch.as_tensor(x, dtype=torch.float64).to(dev)
    return torch.cat([fmap.transform(rows[i : i + 65536]) for i in range(0, len(rows), 65536)]).cpu().numpy()


def fit_kernel_svc(x, y, w, *, landmarks=200, gamma=None, reg=1e-3, device="auto", gpus=(), classes=None):
    """KernelSVC's per-task phases: Nystroem features on the device, stored as blocks, then squared-hinge
    Newton rounds for every one-vs-rest problem in a barrier task. (theta (k, r + 1), phi, the device, seconds)."""
    from sparkml.gpu import OneVsRestProblems, SquaredHingeLoss

    classes = sorted(set(y.tolist())) if classes is None else classes
    positive = [1.0] if len(classes) == 2 else [float(c) for c in classes]
    gamma = 1.0 / (x.shape[1] * x.var()) if gamma is None else gamma
    rng = np.random.default_rng(1)
    with task_context.use(StandIn(0, gpus)):
        start = time.perf_counter()
        phi = nystroem_features(x, x[rng.choice(len(x), landmarks, replace=False)], gamma, device)
        dataset_id, blocks = convert(phi, y, w, "float32")
        try:
            with barrier_task(blocks, dataset_id, None, device, "float64") as task:
                theta, summaries = newton(
                    task,
                    lambda idx: OneVsRestProblems(SquaredHingeLoss(True), [positive[j] for j in idx]),
                    np.zeros((len(positive), phi.shape[1] + 1)),
                    progress=Progress(),
                    checkpoint=None,
                    reg=reg,
                    weight_sum=float(w.sum()),
                    fit_intercept=True,
                    max_iter=50,
                    tol=1e-12,
                    names=[f"class {c}" for c in positive],
                    solver="cholesky",
                )
                used = str(task.sums.device)
        finally:
            block_store.drop_partitions(dataset_id, [p for p, _, _ in blocks])
        seconds = time.perf_counter() - start
    return theta, phi, positive, summaries, used, seconds


def squared_hinge_gradient(theta, phi, y, w, positive, reg):
    """The gradient of ``sparkml.optim.newton``'s objective in numpy (one row per problem), for a KKT check."""
    phit = np.hstack([phi, np.ones((len(phi), 1))])
    out = []
    for c, t in zip(positive, theta):
        s = np.where(y == c, 1.0, -1.0)
        slack = np.maximum(0.0, 1 - s * (phit @ t))
        g = phit.T @ (w * -2 * s * slack) / w.sum()
        g[:-1] += reg * t[:-1]
        out.append(g)
    return np.array(out)


def score_logistic(x, theta, device="auto"):
    """``score_batch`` over one Arrow batch of ``x``: (raw, probability, prediction) as numpy."""
    from sparkml.scoring.batch import score_batch
    from sparkml.scoring.kinds import KINDS
    from sparkml.scoring.spec import ScoringSpec

    column = arrow_batches(x, np.zeros(len(x)), np.ones(len(x)), rows_per_batch=len(x))[0].column("x")
    with task_context.use(StandIn(0)):
        out = score_batch(column, ScoringSpec(KINDS["logistic"], theta[None, :-1], [theta[-1]], device=device))
    raw, prob, pred = (out.field(i) for i in range(3))
    k = len(x)
    return (
        np.asarray(raw.flatten()).reshape(k, 2),
        np.asarray(prob.flatten()).reshape(k, 2),
        np.asarray(pred),
    )


def devices():
    import torch

    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def main(argv=None):
    import report

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--features", type=int, default=100)
    p.add_argument("--kernel-rows", type=int, default=100_000)
    p.add_argument("--landmarks", type=int, default=500)
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="the task's cores (torch threads on the CPU)")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "executor_path.json"))
    args = p.parse_args(argv)
    StandIn.cores = args.threads
    os.environ.setdefault("SPARK_LOCAL_DIRS", tempfile.mkdtemp(prefix="executor-path-"))
    x, y, w = classification_data(args.rows, args.features)
    kx, ky, kw = classification_data(args.kernel_rows, 20, seed=3, classes=3)
    rows, payload = [], []
    base = {}
    for device in devices():
        for dtype in ("float32", "float64"):
            for compute in sorted({dtype, "float64"}):
                theta, summary, used, seconds = fit_logistic(x, y, w, device=device, dtype=dtype, compute_dtype=compute)
                base.setdefault((dtype, compute), theta)
                diff = float(np.max(np.abs(theta - base[(dtype, compute)])))
                per = seconds / max(summary.totalIterations, 1)
                rows.append(
                    f"| logistic allreduce {args.rows:,} x {args.features} | {used} | {dtype}/{compute} | "
                    f"{summary.totalIterations} | {seconds:.2f} | {per * 1e3:.1f} | {diff:.1e} |"
                )
                payload.append(
                    dict(
                        case="logistic",
                        device=used,
                        dtype=dtype,
                        compute=compute,
                        seconds=seconds,
                        iters=summary.totalIterations,
                        max_diff=diff,
                    )
                )
        theta, phi, positive, summaries, used, seconds = fit_kernel_svc(
            kx, ky, kw, landmarks=args.landmarks, device=device
        )
        base.setdefault("kernel", theta)
        diff = float(np.max(np.abs(theta - base["kernel"])))
        rounds = max(s.totalIterations for s in summaries)
        rows.append(
            f"| KernelSVC phases {args.kernel_rows:,} x 20, 3 classes, {args.landmarks} landmarks | {used} | "
            f"float32/float64 | {rounds} | {seconds:.2f} | {seconds / max(rounds, 1) * 1e3:.1f} | {diff:.1e} |"
        )
        payload.append(dict(case="kernel_svc", device=used, seconds=seconds, iters=rounds, max_diff=diff))
    table = "\n".join(
        [
            "| case | device | storage/compute | iterations | fit s | ms/iteration | max diff vs first device |",
            "| --- | --- | --- | --- | --- | --- | --- |",
            *rows,
        ]
    )
    report.write(
        args.out,
        "The executor path without Spark (conversion, one-rank allreduce, KernelSVC's task phases), per device",
        table,
        {"rows": payload},
        "Each fit: blocks already converted, one barrier task (rendezvous, blocks opened on the device, the "
        "process group) and the solver; seconds exclude the conversion.",
    )


if __name__ == "__main__":
    main()
