"""The first vector of a column, which decides between the dense and the sparse path (``sparkml.data.first_vector``):
read without closing the Python worker that produced it, whatever the frame is built from."""

import os
import time

import pytest
from pyspark.ml.linalg import SparseVector, Vectors, VectorUDT
from pyspark.sql.types import DoubleType, StructField, StructType

from sparkml.classification import LogisticRegression
from sparkml.data.first_vector import UnreadableVector, first_vector, reads_python_rows

SCHEMA = StructType([StructField("label", DoubleType()), StructField("f", VectorUDT())])
pytestmark = pytest.mark.compat  # reads the query plan, whose printing each Spark line owns

ROWS = [(float(i % 2), Vectors.dense([float(i), 1.0 - i])) for i in range(40)]


def python_workers():
    """The live Python workers of this test session's Spark: the processes its worker daemon (a child of the JVM,
    itself a child of this process) forked."""
    cmd, parent = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    line = f.read()
                with open(f"/proc/{entry}/stat") as f:
                    state, ppid = f.read().rsplit(")", 1)[1].split()[:2]
            except OSError:  # ended meanwhile
                continue
            if state != "Z":
                cmd[int(entry)], parent[int(entry)] = line, int(ppid)
    jvms = {pid for pid, ppid in parent.items() if ppid == os.getpid()}
    daemons = {pid for pid, ppid in parent.items() if ppid in jvms and b"daemon" in cmd[pid]}
    return {pid for pid, ppid in parent.items() if ppid in daemons}


def closed_workers(before, seconds=3.0):
    """The workers of ``before`` that have ended, waiting up to ``seconds`` for one to end."""
    deadline = time.monotonic() + seconds
    while True:
        closed = before - python_workers()
        if closed or time.monotonic() > deadline:
            return closed
        time.sleep(0.05)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads the workers from /proc")
def test_python_row_frames_are_read_to_the_end_and_keep_their_workers(spark):
    df = spark.createDataFrame(ROWS, ["label", "features"])
    assert reads_python_rows(df)
    spark.sparkContext.parallelize(range(2), 2).count()
    # head() stops reading the Python rows: the worker that produced them is closed
    before = python_workers()
    assert before, "no Python worker of this session found"
    df.select("features").head()
    assert closed_workers(before), "head() closed no worker: this test could not see a closed one"
    before = python_workers()
    assert first_vector(df, "features") == Vectors.dense([0.0, 1.0])
    LogisticRegression(maxIter=5).fit(df)
    assert not closed_workers(before), "a worker was closed"


def test_the_first_vector_of_every_kind_of_frame(spark, tmp_path):
    df = spark.createDataFrame(ROWS, ["label", "features"])
    df.write.parquet(str(tmp_path / "rows"))
    from_file = spark.read.parquet(str(tmp_path / "rows"))
    cached = spark.createDataFrame(ROWS, ["label", "features"]).cache()
    assert not reads_python_rows(from_file) and not reads_python_rows(cached)
    for frame in (df, cached):
        assert first_vector(frame, "features") == Vectors.dense([0.0, 1.0])
    assert first_vector(from_file, "features") == from_file.first()["features"]  # the files' order
    cached.unpersist()
    # the first partitions hold only null vectors: the first vector is in a later one
    later = spark.createDataFrame([(0.0, None)] * 10 + [(1.0, SparseVector(3, [1], [2.0]))], SCHEMA)
    assert later.rdd.getNumPartitions() > 1
    assert first_vector(later.repartition(1), "f") == SparseVector(3, [1], [2.0])
    assert first_vector(later, "f") == SparseVector(3, [1], [2.0])
    assert first_vector(later.where("label = 0"), "f") is None


def _unsorted(_):
    """A sparse vector past pyspark's checks (VectorUDT.serialize takes it as is): indices not increasing."""
    import numpy as np

    raw = object.__new__(SparseVector)
    raw.size, raw.indices, raw.values = 4, np.array([2, 1], np.int32), np.array([1.0, 1.0])
    return [(0.0, raw), (1.0, Vectors.dense([1.0, 0.0, 0.0, 0.0]))]


@pytest.mark.parametrize("source", ["python-rows", "file"])
def test_an_unreadable_first_vector_is_named(spark, tmp_path, source):
    df = spark.createDataFrame(spark.sparkContext.parallelize([0], 1).flatMap(_unsorted), SCHEMA)
    if source == "file":
        df.write.parquet(str(tmp_path / "rows"))
        df = spark.read.parquet(str(tmp_path / "rows"))
    assert reads_python_rows(df) == (source == "python-rows")
    with pytest.raises(UnreadableVector, match="increasing|indices"):
        first_vector(df, "f")
    # the file is small, so the fit reads its first vector in the conversion task (``conversion_plan``), which counts
    # it among the invalid ones; Spark cannot size the frame over Python rows, whose first vector the driver reads
    which = "its first vector" if source == "python-rows" else "1 of its vectors"
    with pytest.raises(ValueError, match=f"features column 'f' holds invalid sparse vectors \\({which}\\)"):
        LogisticRegression(featuresCol="f").fit(df)
