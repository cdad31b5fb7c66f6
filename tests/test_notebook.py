"""examples/quickstart.ipynb runs headless (nbclient) in local mode and reaches its results.

tests/support/notebook_run.py executes it in a subprocess (its kernel starts its own local[2] JVM; the test
session's Spark is not used), started in the background when the run is collected (tests/support/background.py)
since it spends its minute mostly waiting on that JVM. A failing cell (the notebook asserts its own
results too) fails the test with the cell's error; the results are read back from the executed
notebook's outputs.
"""

import ast
import os
import sys

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

from support import background  # noqa: E402
from support.helpers import ROOT, SUPPORT  # noqa: E402

NOTEBOOK = os.path.join(ROOT, "examples", "quickstart.ipynb")
_SCRATCH = {}


def _paths():
    if "dir" not in _SCRATCH:
        _SCRATCH["dir"] = background.scratch_dir("notebook-")
    return os.path.join(_SCRATCH["dir"], "executed.ipynb"), os.path.join(_SCRATCH["dir"], "work")


def background_runs():
    out, workdir = _paths()
    return {
        "quickstart notebook": background.Run(
            [sys.executable, os.path.join(SUPPORT, "notebook_run.py"), out, workdir],
            env=background.python_env(sys.executable),
            cwd=_SCRATCH["dir"],
            timeout=900,
        )
    }


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


@pytest.mark.system
def test_quickstart_runs_headless():
    run = background.result("quickstart notebook", background_runs())
    out, workdir = _paths()
    assert run.returncode == 0, (run.stdout + run.stderr)[-5000:]
    nb = nbformat.read(out, as_version=4)
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
    assert not os.path.exists(os.path.join(workdir, "mlruns"))
