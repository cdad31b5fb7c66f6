"""The Spark lines this library supports (sparkml/runtime/compat.py): the version gate at import, and each
feature's fallback run on this pyspark against the path it replaces (the same numbers).

The tests marked ``compat`` also run on 3.5 and 4.0 (``make test-compat``). The two that force the ``pandas_udf``
scoring path do not: before 4.1 it is the only path, and test_model_outputs and test_kernel_svc score through it
there. Nor does the refusal of an unsupported pyspark at import: ``make wheel-demo`` checks it from the wheel on every
line; the wheel without pyspark at all is checked on the oldest line only (``WHEEL_ONCE``)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pyspark
import pytest
from support.helpers import ROOT

from sparkml.runtime import compat

INSTALLED = bool(os.environ.get("SPARKML_TESTS_INSTALLED"))  # make test-compat: the built wheel, not this checkout
# the installed wheel without pyspark is the same on every Spark line: checked from the wheel on the oldest line only
# (the newest runs it from this checkout in make test)
WHEEL_ONCE = pytest.mark.skipif(
    INSTALLED and compat.parse_version(pyspark.__version__) >= (4, 0, 0),
    reason="the wheel without pyspark is checked on the oldest compatibility line",
)


@pytest.mark.compat
@pytest.mark.skipif(not INSTALLED, reason="make test-compat tests the wheel installed in its own environment")
def test_the_compatibility_run_tests_the_installed_wheel(spark):
    import sparkml

    def where(_):
        import sparkml

        yield sparkml.__file__

    for path in [sparkml.__file__, *spark.sparkContext.parallelize(range(2), 2).mapPartitions(where).collect()]:
        assert os.sep + "site-packages" + os.sep in path and not path.startswith(ROOT + os.sep + "sparkml"), path


@pytest.mark.compat
@pytest.mark.parametrize(
    "version,supported",
    [
        ("3.4.4", False),
        ("3.5.0", True),
        ("3.5.9", True),
        ("3.5.2+databricks", True),
        ("4.0.0.dev2", True),
        ("4.1.0", True),
        ("4.3.0", True),
        ("5.0.0", False),
        ("2.4.8", False),
    ],
)
def test_supported_range(version, supported):
    message = compat.version_error(version)
    assert (message is None) == supported
    if not supported:
        assert version in message and ">=3.5, <5" in message


def _python(code, tmp_path, fake_pyspark=None):
    """Run ``code`` in a fresh interpreter importing this checkout; ``fake_pyspark``: the __init__.py of a
    pyspark package put first on the path (None: hide pyspark entirely)."""
    path = [] if INSTALLED else [ROOT]
    if fake_pyspark is not None:
        (tmp_path / "pyspark").mkdir()
        (tmp_path / "pyspark" / "__init__.py").write_text(fake_pyspark)
        path.insert(0, str(tmp_path))
    prelude = textwrap.dedent(f"""
        import sys
        sys.path[:0] = {path!r}
        if {fake_pyspark is None!r}:
            class _NoPyspark:
                def find_spec(self, name, path=None, target=None):
                    if name == "pyspark" or name.startswith("pyspark."):
                        raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            sys.meta_path.insert(0, _NoPyspark())
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        cwd=str(tmp_path),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_an_unsupported_pyspark_is_refused_at_import_naming_the_range(tmp_path):
    out = _python("import sparkml.classification", tmp_path, fake_pyspark="__version__ = '3.4.1'\n")
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError") and "3.4.1" in last and ">=3.5, <5" in last, out.stderr[-2000:]


@pytest.mark.compat
@WHEEL_ONCE
def test_without_pyspark_the_code_a_task_runs_imports_and_runs_under_a_stand_in_context(tmp_path):
    out = _python(
        """
        import sparkml.scoring.batch, sparkml.scoring.stack, sparkml.data.convert, sparkml.optim.newton
        import sparkml.strategies.composed, sparkml.strategies.gossip, sparkml.strategies.ssp
        from sparkml.runtime import task_context
        from sparkml.strategies.partition_sums import set_torch_threads
        import torch

        class StandIn:
            def partitionId(self):
                return 3

            def cpus(self):
                return 2

        with task_context.use(StandIn()):
            assert task_context.current().partitionId() == 3
            set_torch_threads(torch)
        print("task code ok", torch.get_num_threads())
    """,
        tmp_path,
    )
    assert out.stdout.strip() == "task code ok 2", out.stderr[-2000:]


@pytest.mark.compat
@WHEEL_ONCE
def test_without_pyspark_the_torch_code_imports_and_the_estimators_say_what_to_install(tmp_path):
    out = _python(
        """
        import sparkml.gpu.losses, sparkml.gpu.kernels
        print("gpu ok")
        import sparkml.regression
    """,
        tmp_path,
    )
    assert out.stdout.strip() == "gpu ok", out.stderr[-2000:]
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError") and "sparkml-torch[spark]" in last and ">=3.5, <5" in last, last


@pytest.mark.compat
def test_connect_ml_is_detected_by_feature_on_the_lines_that_have_it():
    import pyspark

    assert compat.has_connect_ml() == (compat.parse_version(pyspark.__version__) >= (4, 0, 0))


@pytest.mark.compat
def test_a_connect_session_without_connect_ml_is_refused_naming_the_version(monkeypatch):
    import pyspark

    from sparkml.classification import LogisticRegression

    class Session:  # stands in for a Spark Connect session: what is_connect looks at is the module
        __module__ = "pyspark.sql.connect.session"

    class Frame:
        __module__ = "pyspark.sql.connect.dataframe"
        sparkSession = Session()

    monkeypatch.setattr(compat, "has_connect_ml", lambda: False)
    with pytest.raises(
        RuntimeError,
        match=r"Spark Connect ML, new in Spark 4\.0.*this pyspark is " + pyspark.__version__.replace(".", r"\."),
    ):
        LogisticRegression().fit(Frame())


@pytest.fixture
def without_arrow_udf(monkeypatch):
    """This pyspark with no ``arrow_udf`` (as on 3.5 and 4.0): scoring falls back to the pandas UDF."""
    from pyspark.sql.pandas import functions as pandas_functions

    monkeypatch.delattr(pandas_functions, "arrow_udf", raising=False)


@pytest.mark.parametrize("kind", ["lr_binary", "lr_multinomial", "svc", "linreg"])
def test_pandas_udf_scoring_equals_mllibs_formulas(data, fitted, kind, without_arrow_udf, monkeypatch):
    from support.model_kinds import KINDS
    from support.scoring_reference import largest_differences, runs_python

    from sparkml.base.model import ConvertsToStock

    monkeypatch.setattr(ConvertsToStock, "_stock_for", lambda self, spark: None)  # score in Python workers
    model = fitted(kind).copy()
    model._scoring = None
    out = model.transform(data)
    assert runs_python(out) and "ArrowEvalPython" in out._jdf.queryExecution().executedPlan().toString()
    diffs = largest_differences(model, out)
    assert set(diffs) == set(KINDS[kind].columns) and max(diffs.values()) <= 1e-12, diffs


def test_pandas_udf_scoring_of_a_kernel_model_equals_its_row_by_row_scores(spark, without_arrow_udf):
    """KernelSVC always scores in Python workers: through the pandas UDF, one-vs-rest over 3 classes with
    Platt probabilities, the same numbers as the model's own single-row predictRaw / predictProbability."""
    from sklearn import datasets
    from support.data_helpers import labeled_frame

    from sparkml.classification import KernelSVC

    x, y = datasets.make_blobs(n_samples=240, centers=3, cluster_std=2.0, random_state=3)
    frame = labeled_frame(spark, x, y.astype(float))
    model = KernelSVC(gamma=0.5, numLandmarks=60, probability=True, maxIter=30).fit(frame)
    rows = model.transform(frame).select("features", "rawPrediction", "probability", "prediction").collect()
    assert len(rows) == 240
    for r in rows:
        np.testing.assert_allclose(
            r.rawPrediction.toArray(), model.predictRaw(r.features).toArray(), rtol=1e-9, atol=1e-9
        )
        np.testing.assert_allclose(
            r.probability.toArray(), model.predictProbability(r.features).toArray(), rtol=1e-9, atol=1e-9
        )
        assert r.prediction == model.predict(r.features)


@pytest.mark.compat
@pytest.mark.parametrize("rows", [0, 57])
def test_to_arrow_without_dataframe_to_arrow_collects_the_same_table(spark, monkeypatch, rows):
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    df = (
        spark.range(rows)
        .select(
            F.col("id"),
            F.array(F.col("id").cast("double"), F.lit(0.5)).alias("x"),
            (F.col("id") % 3).cast("double").alias("label"),
        )
        .repartition(3)
    )
    want = df.toArrow() if hasattr(DataFrame, "toArrow") else None
    monkeypatch.delattr(DataFrame, "toArrow", raising=False)
    got = compat.to_arrow(df)
    assert got.num_rows == rows and got.column_names == ["id", "x", "label"]
    assert sorted(got.column("id").to_pylist()) == list(range(rows))
    if want is not None:
        assert got.schema.equals(want.schema)
        assert got.sort_by("id").equals(want.sort_by("id"))


@pytest.mark.compat
def test_from_arrow_without_dataframe_to_arrow_builds_the_same_frame(spark, monkeypatch):
    """A ``pyarrow.Table`` with a fixed-size list column (the jobs' generated data) as a DataFrame: through
    ``createDataFrame(table)`` (4.0+) and through pandas (3.5), the same schema and rows."""
    import pyarrow as pa
    from pyspark.sql import DataFrame

    x = np.arange(15.0).reshape(5, 3)
    table = pa.table(
        {
            "features": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), 3),
            "label": pa.array([0.0, 1.0, 0.0, 1.0, 1.0]),
        }
    )
    frames = [compat.from_arrow(spark, table)] if hasattr(DataFrame, "toArrow") else []
    monkeypatch.delattr(DataFrame, "toArrow", raising=False)
    arrow = "spark.sql.execution.arrow.pyspark.enabled"
    for setting in ("true", "false"):  # the session's Arrow setting must not matter (nor change)
        spark.conf.set(arrow, setting)
        frames.append(compat.from_arrow(spark, table))
        assert spark.conf.get(arrow) == setting
    spark.conf.set(arrow, "true")  # the tests' session default
    for df in frames:
        assert df.schema.simpleString() == "struct<features:array<double>,label:double>"
        rows = df.collect()
        np.testing.assert_array_equal([r.features for r in rows], x)
        assert [r.label for r in rows] == [0.0, 1.0, 0.0, 1.0, 1.0]
