"""Drop-in pyspark.ml linear models and kernel SVMs trained data-parallel on Spark with PyTorch kernels.

    from sparkml.classification import LogisticRegression, LinearSVC, KernelSVC
    from sparkml.regression import LinearRegression

Installed, the PyTorch math is ``sparkml.gpu`` and the batch jobs ``sparkml.jobs``: the wheel puts
them inside this package, so they claim no top-level names (``gpu``, ``jobs``) that another
distribution could hold. A source checkout keeps them beside this folder, as ``gpu/`` and ``jobs/``;
``_SourceCheckoutFinder`` resolves the same two names there, so code, tests and Spark's Python
workers import them alike from a checkout, an editable install or a wheel.
"""

import importlib.abc
import importlib.util
import os
import sys

__version__ = "0.1.0"

_SUBPACKAGES = ("gpu", "jobs")  # repository folders that the wheel installs as sparkml.<name>


class _SourceCheckoutFinder(importlib.abc.MetaPathFinder):
    """Finds ``sparkml.gpu`` and ``sparkml.jobs`` in ``root``/gpu and ``root``/jobs."""

    def __init__(self, root):
        self.root = root

    def find_spec(self, fullname, path=None, target=None):
        package, _, name = fullname.partition(".")
        if package != __name__ or name not in _SUBPACKAGES:
            return None
        location = os.path.join(self.root, name)
        return importlib.util.spec_from_file_location(
            fullname, os.path.join(location, "__init__.py"), submodule_search_locations=[location]
        )


def _install_finder():
    here = os.path.dirname(os.path.abspath(__file__))
    if all(os.path.isdir(os.path.join(here, n)) for n in _SUBPACKAGES):
        return  # an installed wheel: they are inside this package
    root = os.path.dirname(here)
    if all(os.path.isfile(os.path.join(root, n, "__init__.py")) for n in _SUBPACKAGES):
        if not any(isinstance(f, _SourceCheckoutFinder) for f in sys.meta_path):
            sys.meta_path.insert(0, _SourceCheckoutFinder(root))


_install_finder()


def release_conversions(spark=None):
    """Release the conversions kept for cached DataFrames (``sparkml.data.reuse``): of ``spark``'s session,
    or of every session when None. Their blocks are deleted on the executors now (those a running fit
    reads, when it ends). Returns how many there were."""
    from sparkml.data import reuse

    return reuse.release_all(spark)
