"""Shared fixtures: one local Spark session for the whole test run (2 cores here), and the data and
fitted linear models of the model-level tests (test_model_outputs, test_persistence)."""

import os
import sys

import pytest
from support.helpers import use_this_checkout

use_this_checkout()


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
        # most tests count conversions and the blocks left on the executors; test_conversion_reuse turns on
        # the reuse of conversions (on by default) for its own tests
        .config("spark.sparkml.conversionCache.enabled", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def data(spark):
    """``data_helpers.linear_frame``: id, features, label, label3, y (a module may define its own ``data``)."""
    from support.data_helpers import linear_frame

    df = linear_frame(spark)
    yield df
    df.unpersist()


@pytest.fixture(scope="module")
def fitted(data):
    """``fitted(kind, stock=False)``: our (or the stock) model of ``model_kinds.KINDS[kind]`` fitted on
    ``data``, once per module."""
    from support.model_kinds import KINDS

    cache = {}

    def get(kind, stock=False):
        key = (kind, stock)
        if key not in cache:
            k = KINDS[kind]
            cache[key] = (k.stock_estimator if stock else k.estimator)(**k.params).fit(data)
        return cache[key]

    return get


def pytest_collection_modifyitems(items):
    """The modules that await background runs go last, so the runs have the whole suite to finish in."""
    items.sort(key=lambda item: hasattr(getattr(item, "module", None), "background_runs"))


def pytest_collection_finish(session):
    """Start the subprocess runs of the selected modules (tests/support/background.py) while the rest runs."""
    from support import background

    modules = {item.module for item in session.items if hasattr(item, "module")}
    for module in sorted(modules, key=lambda m: m.__name__):
        runs = getattr(module, "background_runs", None)
        if runs is not None:
            background.start(runs())


def pytest_sessionfinish(session):
    from support import background

    background.stop_all()
