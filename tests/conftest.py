"""Shared fixtures: one local Spark session for the whole test run (2 cores here), and the data and
fitted linear models of the model-level tests (test_model_outputs, test_persistence)."""

import importlib.util
import json
import os
import sys

import pytest
from support.helpers import use_this_checkout

use_this_checkout()

if os.environ.get("PYTEST_XDIST_WORKER"):
    # ``pytest -n 2``: each worker's Spark session (and its executors, which inherit the driver's environment) keeps
    # its training blocks and scratch files in a temporary directory of its own, so one worker's counts of the
    # blocks on its executors never see the other's
    import tempfile

    _worker_tmp = os.path.join(tempfile.gettempdir(), f"sparkml-tests-{os.environ['PYTEST_XDIST_WORKER']}")
    os.makedirs(_worker_tmp, exist_ok=True)
    os.environ["TMPDIR"] = tempfile.tempdir = _worker_tmp


@pytest.fixture(scope="session")
def spark():
    pyspark = pytest.importorskip("pyspark")  # noqa: F841  (gpu-only machines have no pyspark)
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # The Python workers fork from the library's daemon, which has imported torch and the library
    # (sparkml.worker_daemon). Their tasks may run functions of tests/support: the JVM reads PYTHONPATH when it
    # starts, the tests' own subprocesses keep theirs.
    python_path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.dirname(os.path.abspath(__file__)), python_path]))
    try:
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
            .config("spark.python.daemon.module", "sparkml.worker_daemon")
            .getOrCreate()
        )
    finally:
        if python_path is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = python_path
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def conversions_not_kept(request):
    """Every fit of the module converts its DataFrame and releases the blocks when it ends: for the modules that
    count conversions or the blocks left on the executors (``pytestmark = pytest.mark.usefixtures(...)``).
    Elsewhere the session keeps the conversions of cached DataFrames between fits, as a user's session does
    (``sparkml.data.reuse``)."""
    if importlib.util.find_spec("pyspark") is None:  # a GPU machine without Spark runs the torch-only tests
        yield
        return
    import sparkml
    from sparkml.data.reuse import ENABLED_KEY

    spark = request.getfixturevalue("spark")
    sparkml.release_conversions(spark)
    spark.conf.set(ENABLED_KEY, "false")
    yield
    spark.conf.unset(ENABLED_KEY)


@pytest.fixture(scope="session")
def data(spark):
    """``data_helpers.linear_frame``: id, features, label, label3, y (a module may define its own ``data``); one
    frame for the session, which the tests only read."""
    from support.data_helpers import linear_frame

    df = linear_frame(spark)
    yield df
    df.unpersist()


@pytest.fixture(scope="session")
def fitted(data):
    """``fitted(kind, stock=False)``: our (or the stock) model of ``model_kinds.KINDS[kind]`` fitted on
    ``data``, once per session (tests read them, and ``copy`` one to change its Params)."""
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
    """Start the subprocess runs of the modules with selected system tests (tests/support/background.py) while the
    rest runs. Every test that awaits a background run is marked ``system``: the fast tier starts none."""
    from support import background

    modules = {item.module for item in session.items if hasattr(item, "module") and item.get_closest_marker("system")}
    for module in sorted(modules, key=lambda m: m.__name__):
        runs = getattr(module, "background_runs", None)
        if runs is not None:
            background.start(runs())


_JOBS = {}  # test id -> Spark jobs its setup and call started in the test session (gathered where reported)
_STARTED = {}  # test id -> the session's job count as its setup began (in the process that runs it)


def _jobs_started():
    """How many Spark jobs the test session has started so far (0 before it exists)."""
    if "pyspark" not in sys.modules:
        return 0
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    return 0 if sc is None else sc._jsc.sc().dagScheduler().nextJobId()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    _STARTED[item.nodeid] = _jobs_started()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Counts each test's Spark jobs, its setup's and its call's (on a small machine a test's time is mostly its jobs'
    fixed cost), carried in its call's report, which ``pytest -n`` workers send to the process that reports."""
    outcome = yield
    if call.when == "call":
        before, after = _STARTED.pop(item.nodeid, 0), _jobs_started()
        if after >= before:
            outcome.get_result().user_properties.append(("spark_jobs", after - before))


def pytest_runtest_logreport(report):
    if report.when == "call":
        for name, value in report.user_properties:
            if name == "spark_jobs":
                _JOBS[report.nodeid] = value


def pytest_terminal_summary(terminalreporter):
    """The tests that start the most Spark jobs, and how long each background run took (the system tier's time is
    mostly theirs)."""
    from support import background

    counted = {nodeid: jobs for nodeid, jobs in _JOBS.items() if jobs}
    if counted:
        terminalreporter.write_sep("=", f"most Spark jobs per test ({sum(counted.values())} in all)")
        for nodeid, jobs in sorted(counted.items(), key=lambda kv: -kv[1])[:15]:
            terminalreporter.write_line(f"{jobs:6d} {nodeid}")
    runs = background.durations()
    if runs:
        terminalreporter.write_sep("=", "background runs")
        for seconds, name in runs:
            terminalreporter.write_line(f"{seconds:8.1f}s {name}")


def pytest_sessionfinish(session):
    from support import background

    path = os.environ.get("SPARKML_TEST_JOBS_FILE")
    if path and not os.environ.get("PYTEST_XDIST_WORKER"):  # each test's Spark jobs, for finding where time goes
        with open(path, "w") as out:
            json.dump(_JOBS, out, indent=0)

    background.stop_all()
