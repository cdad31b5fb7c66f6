"""Shared fixtures: one local Spark session for the whole test run (2 cores here)."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


@pytest.fixture(scope="session")
def spark():
    pyspark = pytest.importorskip("pyspark")  # noqa: F841  (gpu-only machines have no pyspark)
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("sparkml-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def pytest_collection_modifyitems(items):
    """The modules that await background runs go last, so the runs have the whole suite to finish in."""
    items.sort(key=lambda item: hasattr(getattr(item, "module", None), "background_runs"))


def pytest_collection_finish(session):
    """Start the subprocess runs of the selected modules (tests/background.py) while the rest runs."""
    import background

    modules = {item.module for item in session.items if hasattr(item, "module")}
    for module in sorted(modules, key=lambda m: m.__name__):
        runs = getattr(module, "background_runs", None)
        if runs is not None:
            background.start(runs())


def pytest_sessionfinish(session):
    import background

    background.stop_all()
