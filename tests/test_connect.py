"""Every estimator fits and transforms in a Spark Connect session (no SparkContext, no RDDs).

The Connect session runs in a subprocess (tests/support/connect_fits.py: a local Connect server is its
own JVM); its coefficients and predictions are compared with the same fits in the classic session.
"""

import sys

import numpy as np
import pytest
from support import background, connect_fits
from support.data_helpers import connect_frame

from sparkml.runtime import compat

pytest.importorskip("grpc", reason="Spark Connect needs pyspark[connect] (grpcio)")
pytestmark = [
    pytest.mark.compat,  # CI runs the Connect session on pyspark 4.0 (make test-compat)
    pytest.mark.system,
    pytest.mark.full,  # and make test-full on this line
    pytest.mark.skipif(
        not compat.has_connect_ml(),
        reason="Spark Connect ML is new in Spark 4.0; a Connect session on 3.5 is refused (test_compat.py)",
    ),
]


def background_runs():
    """The Connect session's fits, started with the test run (tests/support/background.py)."""
    if not compat.has_connect_ml():
        return {}
    argv = [sys.executable, connect_fits.__file__, background.scratch_dir("connect-")]
    return {"connect": background.Run(argv, env=background.python_env(sys.executable))}


@pytest.fixture(scope="module")
def connect_results():
    return background.json_results("connect", background_runs())


@pytest.fixture(scope="module")
def classic_frame(spark):
    return connect_frame(spark).cache()


@pytest.mark.parametrize("name,est,params", connect_fits.FITS, ids=[f[0] for f in connect_fits.FITS])
def test_connect_fit_and_transform_match_classic(connect_results, classic_frame, name, est, params):
    got = connect_results[name]
    model = connect_fits.estimator(est, params).fit(classic_frame)
    ref = np.array(connect_fits.coefficients(model))
    np.testing.assert_allclose(got["coef"], ref, rtol=0, atol=1e-8 * max(1.0, np.linalg.norm(ref)))
    preds = [r[0] for r in model.transform(classic_frame).orderBy("id").select("prediction").limit(20).collect()]
    np.testing.assert_allclose(got["predictions"], preds, rtol=0, atol=1e-8)


@pytest.mark.parametrize("name", [f[0] for f in connect_fits.FITS if f[1] != "KernelSVC"])
def test_connect_transform_scores_in_the_jvm_with_mllibs_formulas(connect_results, name):
    """In Spark Connect too, a linear model's transform is the stock model's (loaded by the server): no
    Python node in the plan, every output column equal to MLlib's formulas to 1e-12."""
    scoring = connect_results[name]["scoring"]
    assert scoring["runs_python"] is False
    assert scoring["differences"] and max(scoring["differences"].values()) <= 1e-12, scoring["differences"]


def test_connect_save_and_load(connect_results):
    np.testing.assert_allclose(
        connect_results["saved_and_loaded"], connect_results["logistic-sync"]["coef"], rtol=0, atol=0
    )
    assert connect_results["second_save"] != "overwrote"


def test_connect_to_spark_through_a_shared_directory_leaves_it_empty(connect_results):
    """With ``$SPARKML_TEMP_DFS_PATH`` set, ``toSpark`` writes the stock model there, the server loads it, and
    the server deletes it (``compat.remove_dfs_dir``: pyspark's own call on 4.1+, the ML helper's on 4.0)."""
    shared = connect_results["shared_temp"]
    assert shared["class"] == "LogisticRegressionModel" and shared["left"] == []
    np.testing.assert_allclose(shared["coef"], connect_results["saved_and_loaded"], rtol=0, atol=0)


def test_connect_estimator_save_and_load(connect_results):
    assert connect_results["estimator_loaded"] == [True, 0.05, "allreduce"]
    assert connect_results["model_uid_is_estimator_uid"] is True


@pytest.mark.parametrize("case", [c[0] for c in connect_fits.SUMMARY_CASES])
def test_connect_summaries_are_mllibs(connect_results, case):
    """test_summary.py's walk in the Connect session: ``model.summary`` and ``evaluate(df)`` are
    pyspark.ml's classes and agree with pyspark.ml's fit in the same session to 1e-9."""
    got = connect_results["summaries"][case]
    for label in ("training", "evaluate"):
        assert got[label]["instances"] == [True, True]
        members = 12 if case == "glr_poisson" and label == "evaluate" else 15  # GLR's evaluation summary has 12
        assert got[label]["diffs"] == {} and got[label]["compared"] >= members, got[label]["diffs"]
    if case != "glr_poisson":  # IRLS reports numIterations, a member the walk compared
        np.testing.assert_allclose(*got["objectiveHistory"], rtol=1e-9, atol=1e-12)


def test_connect_interrupt_ends_a_barrier_fit_as_cancelled(connect_results):
    """``spark.interruptAll()`` (Connect's Cancel) mid-stage: ``FitCancelled`` within seconds, not a retried stage."""
    interrupted = connect_results["interrupted"]
    assert interrupted["error"].startswith("FitCancelled: LogisticRegression fit cancelled: "), interrupted
    assert "OPERATION_CANCELED" in interrupted["error"] and interrupted["seconds"] < 10, interrupted
