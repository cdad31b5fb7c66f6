"""Execute examples/quickstart.ipynb headless (nbclient) and write the executed notebook.

    python tests/support/notebook_run.py OUT.ipynb WORKDIR

The kernel is this interpreter (a kernel spec written beside OUT names sys.executable), started in
WORKDIR, so nothing lands in the checkout; it starts its own local[2] JVM. The executed notebook is
written also when a cell fails (the error is in that cell's outputs); the exit code is then 1.
"""

import json
import os
import sys

import nbclient
import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/support/ -> the root
NOTEBOOK = os.path.join(ROOT, "examples", "quickstart.ipynb")
KERNEL = "sparkml-quickstart-test"


def kernel_manager(kernels_dir):
    """A KernelManager for a kernel spec that runs sys.executable with local Spark's settings."""
    spec_dir = os.path.join(kernels_dir, KERNEL)
    os.makedirs(spec_dir, exist_ok=True)
    env = {
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYSPARK_SUBMIT_ARGS": "--conf spark.ui.enabled=false --conf spark.ui.showConsoleProgress=false pyspark-shell",
        "PYTHONPATH": os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p),
    }
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "sparkml quickstart test",
        "language": "python",
        "env": env,
    }
    with open(os.path.join(spec_dir, "kernel.json"), "w") as f:
        json.dump(spec, f)
    return KernelManager(kernel_name=KERNEL, kernel_spec_manager=KernelSpecManager(kernel_dirs=[kernels_dir]))


def main(out, workdir):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    os.makedirs(workdir, exist_ok=True)
    client = nbclient.NotebookClient(
        nb,
        km=kernel_manager(os.path.join(os.path.dirname(out), "kernels")),
        timeout=600,
        resources={"metadata": {"path": workdir}},
    )
    code = 0
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as e:
        print(e, file=sys.stderr)
        code = 1
    finally:
        nbformat.write(nb, out)
    return code


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
