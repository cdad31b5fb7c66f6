"""Executors get the library from a packed environment shipped with ``spark.archives`` (tests/support/archives_run.py):
on ``local-cluster`` (two executor JVMs) whose default Python has neither sparkml nor torch, a fit with
``allreduce`` and with ``sync`` and a KernelSVC transform run in the unpacked archive's Python and give
MLlib's model and the model's own scores."""

import os
import subprocess
import sys

import numpy as np
import pytest
from support import archives_run, background

# a fresh environment with torch, packed and unpacked on two executors: about 8 minutes of the two cores, the
# largest run of all; in make test-full (the other system tests ship the library by the checkout's PYTHONPATH)
pytestmark = [pytest.mark.cluster, pytest.mark.system, pytest.mark.full]
pytest.importorskip("venv_pack", reason="the packed environment is made with venv-pack (the test extra)")


def background_runs():
    argv = [sys.executable, archives_run.__file__, background.scratch_dir("archives-")]
    return {
        "archives": background.Run(argv, env=background.python_env(sys.executable), group="local-cluster", timeout=1200)
    }


@pytest.fixture(scope="module")
def shipped():
    return background.json_results("archives", background_runs())


def test_the_executors_python_lacks_the_library_without_the_archive(shipped, tmp_path):
    """The packed environment's interpreter is the machine's Python: alone, it imports neither."""
    base = shipped["base_python"]
    for module in ("torch", "sparkml"):
        out = subprocess.run(
            [base, "-c", f"import {module}"],
            cwd=str(tmp_path),
            capture_output=True,
            text=True,
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
            timeout=120,
        )
        assert out.returncode != 0 and "ModuleNotFoundError" in out.stderr, (module, out.stderr[-500:])


def test_every_task_imports_sparkml_and_torch_from_the_unpacked_archive(shipped):
    assert len(shipped["tasks"]) == 2
    for task in shipped["tasks"]:
        env = os.path.join(task["cwd"], "environment")
        assert task["executable"] == os.path.join(env, "bin", "python")
        for module in ("torch", "sparkml"):
            assert task[module].startswith(os.path.join(env, "lib")), (module, task)


def test_allreduce_and_sync_fit_mllibs_model_on_the_executors(shipped):
    stock = np.array([*shipped["stock"]["coefficients"], shipped["stock"]["intercept"]])
    for strategy in ("allreduce", "sync"):
        ours = np.array([*shipped[strategy]["coefficients"], shipped[strategy]["intercept"]])
        np.testing.assert_allclose(ours, stock, rtol=0, atol=1e-6, err_msg=strategy)


def test_kernel_svc_transform_on_the_executors_equals_its_own_scores(shipped):
    kernel = shipped["kernel"]
    assert kernel["rows"] == 2000 and kernel["largest_raw_difference"] <= 1e-9
    assert kernel["accuracy"] >= 0.9
