"""examples/quickstart.ipynb runs headless (nbclient) in local mode and reaches its results.

The kernel is this interpreter (a kernel spec written to tmp_path names sys.executable), started in a
temporary working directory, so nothing lands in the checkout; it starts its own local[2] JVM (the test
session's Spark is not used). A failing cell (the notebook asserts its own results too) fails the test
with nbclient's CellExecutionError; the results are then read back from the executed notebook's outputs.
"""
import ast
import json
import os
import sys

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

from helpers import ROOT  # noqa: E402

NOTEBOOK = os.path.join(ROOT, "examples", "quickstart.ipynb")
KERNEL = "sparkml-quickstart-test"


def kernel_manager(tmp_path):
    """A KernelManager for a kernel spec that runs sys.executable with local Spark's settings."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    spec_dir = tmp_path / "kernels" / KERNEL
    spec_dir.mkdir(parents=True)
    env = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "PYSPARK_SUBMIT_ARGS": "--conf spark.ui.enabled=false --conf spark.ui.showConsoleProgress=false "
                                  "pyspark-shell",
           "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)}
    spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "sparkml quickstart test", "language": "python", "env": env}
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    specs = KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")])
    return KernelManager(kernel_name=KERNEL, kernel_spec_manager=specs)


def cell_text(cell):
    """A code cell's stdout and text/plain results, joined."""
    parts = []
    for out in cell.get("outputs", []):
        if out["output_type"] == "stream" and out["name"] == "stdout":
            parts.append(out["text"])
        elif out["output_type"] == "execute_result":
            parts.append(out["data"].get("text/plain", ""))
    return "".join(parts)


def code_cell(nb, needle):
    """The one code cell whose source contains `needle`."""
    found = [c for c in nb.cells if c.cell_type == "code" and needle in c.source]
    assert len(found) == 1, needle
    return found[0]


def test_stored_notebook_is_clean_and_shows_the_swap():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code)  # stored without outputs
    assert nb.metadata.kernelspec.name == "python3"
    session = code[0].source
    assert "SparkSession.getActiveSession()" in session and 'builder.master("local[2]")' in session
    assert '# spark = SparkSession.builder.remote("sc://host:15002").getOrCreate()' in session
    swap = code_cell(nb, "from sparkml.classification import LogisticRegression\n").source
    assert "# from pyspark.ml.classification import LogisticRegression" in swap


def test_quickstart_runs_headless(tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    workdir = tmp_path / "work"
    workdir.mkdir()
    client = nbclient.NotebookClient(nb, km=kernel_manager(tmp_path), timeout=600,
                                     resources={"metadata": {"path": str(workdir)}})
    client.execute()  # CellExecutionError on the first failing cell

    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o["output_type"] == "error"]
    assert errors == []
    results = ast.literal_eval(cell_text(code_cell(nb, "results = {")).strip())
    assert results["cv_auc"] > 0.9 and results["test_auc"] > 0.9
    assert results["kernel_svc_accuracy"] > 0.9
    assert results["champion_version"] == 1
    assert results["same_predictions"] is True and results["same_coefficients"] is True

    # KernelSVC's table shows the probability column; the champion loads as pyspark.ml's pipeline stages
    assert "probability" in cell_text(code_cell(nb, "KernelSVC(kernel="))
    loaded = cell_text(code_cell(nb, "mlflow.spark.load_model(champion_uri)")).splitlines()[0]
    assert ast.literal_eval(loaded) == ["VectorAssembler", "StandardScalerModel", "LogisticRegressionModel"]
    assert "sparkml.linear.logistic_regression" in cell_text(code_cell(nb, "mlflow.spark.load_model(champion_uri)"))
    # the working directory got Spark's and MLflow's leftovers at most, never the checkout
    assert not (workdir / "mlruns").exists()
