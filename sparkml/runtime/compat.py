"""Every difference between the Spark lines this library supports, in one place.

Supported: pyspark 3.5.x, 4.0.x and 4.1 or newer (below 5), in classic sessions; Spark Connect where the
server has Connect ML (4.0 or newer). Each difference is found by looking for the feature, not by
comparing version strings; only the supported range itself is a version check:

- ``arrow_udf`` (scalar UDFs over ``pyarrow`` arrays) is new in 4.1; before it, scoring goes through a
  ``pandas_udf`` that hands the same Arrow array to the same scoring function (``vectorized_udf``).
- ``DataFrame.toArrow()`` is new in 4.0; a 3.5 classic session collects the same Arrow batches
  through ``_collect_as_arrow`` (``to_arrow``).
- ``SparkSession.createDataFrame`` takes a ``pyarrow.Table`` since 4.0, the release that added
  ``toArrow``; on 3.5 the table goes through pandas with its Arrow schema (``from_arrow``).
- Connect ML (pyspark.ml estimators and models fitted and loaded through a Spark Connect server) is new
  in 4.0; a Connect session on 3.5 is refused with one error that names the version
  (``require_connect_ml``).
- ``pyspark.ml.util._remove_dfs_dir`` is new in 4.1; 4.0's Connect server takes the same request through
  its ML helper object (``remove_dfs_dir``).
- ``inheritable_thread_target`` takes the session (to carry its tags into the thread) since 4.0; 3.5's takes
  the function only (``thread_target``).

Nothing here imports pyspark at module level, so ``sparkml.gpu`` and the executors' torch code stay
importable where pyspark is not installed.
"""

import re
from typing import cast

SUPPORTED = ((3, 5), (5, 0))  # [lowest, first unsupported)
SUPPORTED_RANGE = ">=3.5, <5"
INSTALL_HINT = (
    "install a supported pyspark (`pip install 'sparkml-torch[spark]'` for a local Spark), or use "
    "a platform whose Spark is in that range (Databricks Runtime 14.3 LTS or newer, EMR 7 or "
    "newer, Dataproc image 2.2 or newer)"
)


def parse_version(text):
    """(major, minor, patch) from a version string such as '3.5.9', '4.1.0.dev1' or '3.5.2+databricks'."""
    m = re.match(r"\s*(\d+)\.(\d+)(?:\.(\d+))?", str(text))
    if not m:
        raise ValueError(f"cannot read a Spark version from {text!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def version_error(version):
    """The message for a pyspark outside the supported range (None when it is inside)."""
    if SUPPORTED[0] <= parse_version(version)[:2] < SUPPORTED[1]:
        return None
    return (
        f"sparkml-torch supports pyspark {SUPPORTED_RANGE} (Spark 3.5.x, 4.0.x and 4.1 or newer); "
        f"the pyspark imported here is {version}: {INSTALL_HINT}"
    )


def check_pyspark():
    """Raise ImportError, naming the supported range, when pyspark is missing or outside it."""
    try:
        import pyspark
    except ImportError as e:
        raise ImportError(
            f"sparkml-torch needs pyspark {SUPPORTED_RANGE}, which is not installed: {INSTALL_HINT}"
        ) from e
    message = version_error(pyspark.__version__)
    if message:
        raise ImportError(message)


def vectorized_udf(score, return_type):
    """A scalar UDF that scores a whole batch at once: ``score(features)`` takes the batch's column as a
    ``pyarrow`` array and returns a ``pyarrow.StructArray`` of ``return_type``.

    Spark 4.1 and newer pass the Arrow array straight through (``arrow_udf``). Before it, a
    ``pandas_udf`` receives the column (an array of doubles) as pandas objects; it is turned back into
    one Arrow array, and the struct's fields go back as a pandas DataFrame, which is how a pandas UDF
    returns a struct.
    """
    from pyspark.sql.pandas import functions as pandas_functions

    arrow_udf = getattr(pandas_functions, "arrow_udf", None)
    if arrow_udf is not None:
        return arrow_udf(score, return_type)
    from pyspark.sql.pandas.types import to_arrow_type
    from pyspark.sql.types import StructType, _parse_datatype_string

    spark_type = cast(StructType, _parse_datatype_string(return_type))  # a struct's DDL

    def through_pandas(column):
        import pyarrow as pa

        result = score(pa.array(column, type=pa.list_(pa.float64()), from_pandas=True))
        return pa.Table.from_arrays(result.flatten(), names=[f.name for f in spark_type.fields]).to_pandas()

    to_arrow_type(spark_type)  # refuse a type Arrow cannot carry now, not in the first task
    return pandas_functions.pandas_udf(through_pandas, spark_type)  # type: ignore[call-overload]  # stubs want functionType


def to_arrow(df):
    """The rows of ``df`` as one ``pyarrow.Table`` on the driver (``DataFrame.toArrow``, new in 4.0; a 3.5
    classic session collects the same Arrow batches)."""
    if hasattr(df, "toArrow"):
        return df.toArrow()
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    batches = df._collect_as_arrow()
    return pa.Table.from_batches(batches, schema=None if batches else to_arrow_schema(df.schema))


def from_arrow(spark, table):
    """A DataFrame of the ``pyarrow.Table`` ``table`` (fixed-size list columns become arrays)."""
    from pyspark.sql import DataFrame

    if hasattr(DataFrame, "toArrow"):  # 4.0 brought both directions
        return spark.createDataFrame(table)
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    fields = [
        pa.field(f.name, pa.list_(f.type.value_type), f.nullable) if pa.types.is_fixed_size_list(f.type) else f
        for f in table.schema
    ]
    table = table.cast(pa.schema(fields))
    # through Arrow whatever the session's setting (restored after): without it pyspark converts and checks
    # every value of every row in Python, and refuses numpy scalars inside the arrays
    key = "spark.sql.execution.arrow.pyspark.enabled"
    before = spark.conf.get(key)
    spark.conf.set(key, "true")
    try:
        return spark.createDataFrame(table.to_pandas(), schema=from_arrow_schema(table.schema))
    finally:
        spark.conf.set(key, before)


def has_connect_ml():
    """True when this pyspark fits and loads pyspark.ml models through a Spark Connect server (4.0+)."""
    import pyspark.ml.util as ml_util

    return hasattr(ml_util, "try_remote_fit")


def require_connect_ml(spark):
    """Refuse a Spark Connect session whose pyspark has no Connect ML (3.5), with the version in the error;
    classic sessions pass."""
    from sparkml.runtime.session_kind import is_connect

    if is_connect(spark) and not has_connect_ml():
        import pyspark

        raise RuntimeError(
            f"sparkml-torch needs Spark Connect ML, new in Spark 4.0, to run in a Spark Connect session; "
            f"this pyspark is {pyspark.__version__}. Use a classic session (SparkSession.builder.master(...) "
            f"or the platform's default) on Spark 3.5, or Spark 4.0 or newer for Spark Connect"
        )


def remove_dfs_dir(path, spark):
    """Delete ``path`` through the Spark Connect server's file system (the server wrote it there)."""
    import pyspark.ml.util as ml_util

    remove = getattr(ml_util, "_remove_dfs_dir", None)
    if remove is not None:
        return remove(path, spark)
    from pyspark.ml.wrapper import JavaWrapper

    JavaWrapper(java_obj=ml_util.ML_CONNECT_HELPER_ID)._call_java("handleOverwrite", path, True)
    return None


def thread_target(spark, f):
    """``f`` wrapped to run in another thread with the caller's Spark local properties (job group, scheduler
    pool) and, from 4.0, the session's tags: pyspark's ``inheritable_thread_target``, given the session where it
    takes one."""
    import inspect

    from pyspark import inheritable_thread_target

    if "SparkSession" in str(inspect.signature(inheritable_thread_target)):
        return inheritable_thread_target(spark)(f)
    return inheritable_thread_target(f)
