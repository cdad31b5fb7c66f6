"""GPU scheduling on a cluster (tests/support/gpu_scheduling_run.py, in the background): each task computes on the GPU
Spark assigned it, and an ``allreduce`` fit reports each rank's device to the driver's log. On a machine without
CUDA the choice is computed and reported, and the fit runs on the CPU, as ``device="auto"`` does."""

import json
import os
import sys

import pytest
from support import background
from support.helpers import ROOT, SUPPORT


def background_runs():
    scratch = background.scratch_dir("gpu-scheduling-")
    return {
        "gpu scheduling": background.Run(
            [
                sys.executable,
                os.path.join(SUPPORT, "gpu_scheduling_run.py"),
                os.path.join(scratch, "out.json"),
                scratch,
            ],
            env=background.python_env(sys.executable),
            cwd=ROOT,
            group="local-cluster",
            timeout=600,
        )
    }


@pytest.mark.cluster
@pytest.mark.system
def test_each_task_computes_on_the_gpu_spark_assigned_it():
    run = background.result("gpu scheduling", background_runs())
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    with open(run.args[2]) as f:
        out = json.load(f)
    tasks = out["tasks"]
    assert sorted(a for t in tasks for a in t["addresses"]) == ["0", "1"]  # one GPU each, not the same one
    for t in tasks:
        (address,) = t["addresses"]
        assert t["gpu"] == f"cuda:{address}" and t["device"] == "cpu", t
        assert f"Spark assigned GPU {address}" in t["why"] and "torch sees no CUDA device" in t["why"]
    lines = out["device_lines"]
    assert len(lines) == 2, lines
    assert {("rank 0" in line, "rank 1" in line) for line in lines} == {(True, False), (False, True)}
    assert sorted("Spark assigned GPU 0" in line for line in lines) == [False, True], lines
    assert all("computed on cpu" in line for line in lines), lines
    assert out["max_coefficient_difference"] < 1e-6
