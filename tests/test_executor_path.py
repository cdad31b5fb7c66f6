"""The code a Spark task runs, driven without Spark (``benchmarks/bench_executor_path.py``): Arrow batches -> blocks ->
the ``allreduce`` optimizer on a one-rank barrier task (gloo on the CPU, NCCL on CUDA) -> the coefficients of
scipy's L-BFGS on the same objective; KernelSVC's per-task phases (Nystroem features on the device, Newton
rounds) -> a stationary point of the objective; scoring a batch -> the logistic formulas. On the CPU always,
and on CUDA where torch sees a GPU (the same checks, the same tolerances). Imports no pyspark."""

import os
import sys

import numpy as np
import pytest
import torch
from support.helpers import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import bench_executor_path as harness

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU"))]


@pytest.fixture(autouse=True)
def block_root(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path))


@pytest.fixture(scope="module")
def data():
    x, y, w = harness.classification_data(3000, 8, seed=4)
    return x, y, w, harness.logistic_reference(x, y, w, reg=0.01)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_allreduce_optimizer_on_a_barrier_task_reaches_scipys_optimum(data, device, dtype):
    x, y, w, reference = data
    xs = x.astype(np.float32).astype(np.float64) if dtype == "float32" else x  # what the blocks store
    exact = reference if dtype == "float64" else harness.logistic_reference(xs, y, w, reg=0.01)
    theta, summary, used, _ = harness.fit_logistic(x, y, w, reg=0.01, device=device, dtype=dtype)
    assert used.startswith(device) and summary.converged, summary.message
    np.testing.assert_allclose(theta, exact, rtol=0, atol=1e-6 * np.abs(exact).max())


def test_the_gpu_spark_assigns_is_the_device_the_task_computes_on(data):
    x, y, w, reference = data
    theta, _, used, _ = harness.fit_logistic(x, y, w, reg=0.01, device="auto", dtype="float64", gpus=["0"])
    # auto on a machine without CUDA computes on the CPU whatever Spark assigned; with CUDA on the GPU assigned
    assert used == ("cuda:0" if torch.cuda.is_available() else "cpu")
    np.testing.assert_allclose(theta, reference, rtol=0, atol=1e-6 * np.abs(reference).max())


@pytest.mark.parametrize("device", DEVICES)
def test_kernel_svc_task_phases_reach_the_newton_objectives_stationary_point(device):
    x, y, w = harness.classification_data(2000, 6, seed=5, classes=3)
    theta, phi, positive, summaries, used, _ = harness.fit_kernel_svc(x, y, w, landmarks=100, reg=1e-3, device=device)
    assert used.startswith(device) and len(summaries) == 3 and all(s.converged for s in summaries)
    grad = harness.squared_hinge_gradient(theta, phi, y, w, positive, reg=1e-3)
    assert np.abs(grad).max() < 1e-6, np.abs(grad).max()
    margins = np.hstack([phi, np.ones((len(phi), 1))]) @ theta.T
    assert np.mean(np.array(positive)[margins.argmax(axis=1)] == y) > 0.85


@pytest.mark.parametrize("device", DEVICES)
def test_scoring_a_batch_matches_the_logistic_formulas(data, device):
    x, _, _, theta = data
    raw, prob, pred = harness.score_logistic(x[:500], theta, device=device)
    m = x[:500] @ theta[:-1] + theta[-1]
    np.testing.assert_allclose(raw, np.stack([-m, m], axis=1), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(prob[:, 1], 1 / (1 + np.exp(-m)), rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(pred, (m > 0).astype(float))
