"""The first non-null vector of a column: what decides between the dense and the sparse path.

``DataFrame.head()`` stops reading its partition after one row. Where the rows come out of a Python RDD (in a
classic session, ``createDataFrame`` of local rows or of an RDD, not cached), the Python worker that produces them
is then closed instead of reused, and its replacement imports torch again on the fit's next task: one to two
seconds per fit. There the first partitions are read to their end instead, one job each until one holds a vector:
a frame built from the driver's rows is small. Cached frames, files and Spark Connect sessions use ``head()``.
"""

from __future__ import annotations

from pyspark.ml.linalg import SparseVector
from pyspark.sql import functions as F

from sparkml.data.checks import invalid_sparse_message
from sparkml.data.vector_columns import SPARSE_DENSITY
from sparkml.runtime.session_kind import is_connect


class UnreadableVector(ValueError):
    """pyspark's vector class refused the first vector (an invalid sparse vector built past its checks)."""


def first_vector(df, column: str):
    """The first non-null value of the vector column ``column`` of ``df``, or None where every value is null.
    Raises ``UnreadableVector`` where pyspark cannot read it."""
    vectors = df.select(column).where(F.col(column).isNotNull())
    first = vectors.limit(1)  # head(): one query, planned once for the check below and the collect
    if not reads_python_rows(first):
        try:
            rows = first.collect()
        except (TypeError, AssertionError) as e:  # pyspark's SparseVector refused the first vector
            raise UnreadableVector(str(e)) from e
        return rows[0][0] if rows else None
    rdd = vectors.rdd
    for partition in range(rdd.getNumPartitions()):
        found = rdd.context.runJob(rdd, _first_and_drain, [partition])
        if found:
            kind, value = found[0]
            if kind == "error":
                raise UnreadableVector(value)
            return value
    return None


def first_layout(df, column: str):
    """(whether the first vector of ``column`` chooses the sparse path, its size or None where every value is
    null); a ValueError naming the column where pyspark cannot read it."""
    try:
        v = first_vector(df, column)
    except UnreadableVector as e:
        raise ValueError(invalid_sparse_message(column, "its first vector", str(e))) from e
    return is_sparse(v), None if v is None else v.size


def is_sparse(vector) -> bool:
    """Whether a first vector chooses the sparse path: a SparseVector with fewer than ``SPARSE_DENSITY`` of its
    entries stored."""
    return isinstance(vector, SparseVector) and vector.size > 0 and len(vector.indices) < SPARSE_DENSITY * vector.size


def reads_python_rows(df) -> bool:
    """Whether computing ``df`` runs a Python RDD that is not cached (its plan reads an existing RDD and no cached
    relation): a classic session only. The optimized plan it reads is ``df``'s own, which ``df.collect()`` then
    reuses."""
    if is_connect(df.sparkSession):
        return False
    plan = df._jdf.queryExecution().optimizedPlan().toString()
    return "LogicalRDD" in plan and "InMemoryRelation" not in plan


def _first_and_drain(rows):
    """A partition's first row's value, after reading the partition to its end (so its workers are reused)."""
    first = None
    try:
        for row in rows:
            if first is None:
                first = row[0]
    except (TypeError, AssertionError) as e:  # a later invalid vector is the conversion's to report
        if first is None:
            return [("error", str(e))]
    return [] if first is None else [("vector", first)]
