"""The conversion's query planned while the first vector is read (``sparkml.data.conversion_plan``): the dense plan
made in the second thread is the one that runs on dense input; sparse input, or more features than the Gram sums
allow, plans again and forgets the first plan (no cached RDD left registered); a refused first vector leaves none.
A small input in one block reads no first vector: its conversion task chooses the path, as the driver would."""

import threading

import numpy as np
import pytest
from pyspark.ml.linalg import SparseVector, Vectors, VectorUDT
from pyspark.sql.types import DoubleType, StructField, StructType

from sparkml.data import conversion_plan
from sparkml.data.gram import GRAM_MAX_FEATURES, GramPlan
from sparkml.data.training_data import TrainingData

SCHEMA = StructType([StructField("label", DoubleType()), StructField("features", VectorUDT())])


@pytest.fixture
def plans(monkeypatch):
    """(sparse, gram is not None, thread name) of each ``conversion_plan.plan`` call."""
    calls, plan = [], conversion_plan.plan

    def recording(df, columns, sparse, gram):
        calls.append((sparse, gram is not None, threading.current_thread().name))
        return plan(df, columns, sparse, gram)

    monkeypatch.setattr(conversion_plan, "plan", recording)
    return calls


def _persistent(spark):
    """The ids of the persisted RDDs, once the fits that returned (an earlier test's) have released theirs
    (``data.background_release``): their unpersisting would otherwise land between two calls."""
    from sparkml.data import background_release

    background_release.wait()
    return set(spark.sparkContext._jsc.getPersistentRDDs().keys())


def _frame(spark, rows):
    return spark.createDataFrame(rows, ["label", "features"]).repartition(2).cache()


def test_dense_input_runs_the_plan_made_while_the_first_vector_was_read(spark, plans):
    rng = np.random.default_rng(0)
    df = _frame(spark, [(float(i % 2), Vectors.dense(rng.normal(size=3))) for i in range(60)])
    df.count()
    data = TrainingData.prepare(df, "features", "label", gram=GramPlan(rows=True))
    try:
        assert plans == [(False, True, "sparkml-conversion-plan")]
        assert not data.sparse and data.gram is not None and data.summary.rows == 60
    finally:
        data.release()


def test_sparse_input_or_too_many_features_plan_again_and_forget_the_first_plan(spark, plans, monkeypatch):
    sparse = _frame(spark, [(float(i % 2), SparseVector(40, {i % 40: 1.0, (i + 7) % 40: 2.0})) for i in range(60)])
    dense = _frame(spark, [(float(i % 2), Vectors.dense([float(i), 1.0, -float(i) / 3])) for i in range(60)])
    sparse.count(), dense.count()
    before = _persistent(spark)
    data = TrainingData.prepare(sparse, "features", "label")
    try:
        assert [p[:2] for p in plans] == [(False, False), (True, False)] and data.sparse
        assert _persistent(spark) - before == {data.handles.id()}  # the dense plan's RDD is not registered
    finally:
        data.release()
    del plans[:]
    monkeypatch.setattr(conversion_plan, "GRAM_MAX_FEATURES", 2)  # 3 features: no Gram sums, the rows stored
    data = TrainingData.prepare(dense, "features", "label", gram=GramPlan())
    try:
        assert [p[:2] for p in plans] == [(False, True), (False, False)]
        assert data.gram is None and data.stored and data.blocks
    finally:
        data.release()
    assert _persistent(spark) == before


def test_a_refused_first_vector_leaves_no_plan_behind(spark, plans, monkeypatch):
    df = _frame(spark, [(float(i % 2), Vectors.dense([float(i), 1.0])) for i in range(20)])
    df.count()
    before = _persistent(spark)

    def refused(df, column):
        raise ValueError(f"column {column!r}: its first vector is not a valid vector")

    monkeypatch.setattr(conversion_plan, "first_layout", refused)
    with pytest.raises(ValueError, match="first vector is not a valid vector"):
        TrainingData.prepare(df, "features", "label")
    assert [p[:2] for p in plans] == [(False, False)]  # the dense plan was made, then forgotten
    assert _persistent(spark) == before


def _blocks(data):
    """(x, y, w) of the one block of ``data``, read back on the executor, and whether it is CSR."""
    dataset_id = data.dataset_id

    def read(handles):
        import torch

        from sparkml.data import block_store

        for row in handles:
            if row[1]:
                part = block_store.open_partition(dataset_id, row[0], "cpu", torch.float64)
                x = part.block.rows(0, part.n_rows).to(torch.float64).numpy()
                yield x.tolist(), part.y.double().numpy().tolist(), part.w.double().numpy().tolist()

    ((x, y, w),) = data.handles.mapPartitions(read).collect()
    return np.array(x), np.array(y), np.array(w)


@pytest.mark.parametrize(
    "first, dtype",
    [
        ("dense", "float64"),  # then sparse rows too, expanded into the dense block
        ("sparse", "float32"),  # then dense rows too, in the CSR block
    ],
)
def test_a_small_input_in_one_block_reads_no_first_vector_and_stores_what_the_driver_would(
    spark, plans, monkeypatch, first, dtype
):
    rng = np.random.default_rng(1)
    rows = []
    for i in range(40):
        values = rng.normal(size=6) * (rng.random(6) < 0.3)
        v = SparseVector(6, {j: float(values[j]) for j in np.flatnonzero(values)}) if i % 3 else Vectors.dense(values)
        rows.append((float(i % 2), v))
    first_vector = SparseVector(6, {2: 1.5}) if first == "sparse" else Vectors.dense([1.0, 0, 2.0, 0, -1.0, 0.5])
    rows[0] = (0.0, first_vector)
    df = spark.createDataFrame(rows, SCHEMA).cache()  # rows[0] first
    df.count()
    sc = spark.sparkContext
    group = f"one-block-{first}"
    sc.setJobGroup(group, group)
    try:
        one = TrainingData.prepare(df, "features", "label", dtype=dtype, max_partitions=1)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    try:
        assert len(sc.statusTracker().getJobIdsForGroup(group)) == 1  # the conversion: no first-vector job
        assert [p[0] for p in plans] == [None] and one.sparse == (first == "sparse")
        monkeypatch.setattr(conversion_plan, "STRUCT_INPUT_BYTES", 0)  # the same rows, the first vector read first
        two = TrainingData.prepare(df, "features", "label", dtype=dtype, max_partitions=1)
        try:
            assert [p[0] for p in plans[1:]] == [False] + [True] * one.sparse and two.sparse == one.sparse
            for a, b in zip(_blocks(one), _blocks(two)):
                np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(one.summary.mean, two.summary.mean)
            np.testing.assert_array_equal(one.summary.var_population, two.summary.var_population)
        finally:
            two.release()
    finally:
        one.release()
        df.unpersist()


def test_a_small_input_in_one_block_refuses_bad_vectors_as_the_driver_does(spark, monkeypatch):
    """Null vectors and vectors of two sizes, named as the two-job path names them; nothing left cached."""
    null = spark.createDataFrame([(0.0, None), (1.0, Vectors.dense([1.0, 2.0]))], SCHEMA)
    ragged = spark.createDataFrame([(0.0, Vectors.dense([1.0, 2.0])), (1.0, SparseVector(3, {0: 1.0}))], SCHEMA)
    before = _persistent(spark)
    for df, message in ((null, "null"), (ragged, "sizes|size")):
        errors = []
        for struct_bytes in (conversion_plan.STRUCT_INPUT_BYTES, 0):
            monkeypatch.setattr(conversion_plan, "STRUCT_INPUT_BYTES", struct_bytes)
            with pytest.raises(ValueError, match=message) as e:
                TrainingData.prepare(df, "features", "label", max_partitions=1)
            errors.append(str(e.value))
        assert errors[0] == errors[1]
    assert _persistent(spark) == before


def test_a_small_input_in_one_block_computes_the_gram_sums_where_its_size_allows(spark):
    """The task decides from its first vector's size (``gram.GRAM_MAX_FEATURES``): the sums and no rows stored, or
    (one feature more than the limit) the rows stored and no sums, as the driver decides on the two-job path."""
    rng = np.random.default_rng(2)
    for d in (3, GRAM_MAX_FEATURES + 1):
        x = rng.normal(size=(30, d))
        df = spark.createDataFrame([(float(i % 2), Vectors.dense(r)) for i, r in enumerate(x)], ["label", "features"])
        data = TrainingData.prepare(df, "features", "label", max_partitions=1, gram=GramPlan())
        try:
            assert data.summary.rows == 30 and not data.sparse
            if d == 3:
                assert data.gram is not None and not data.stored and not data.blocks
            else:
                assert data.gram is None and data.stored and len(data.blocks) == 1
                np.testing.assert_array_equal(_blocks(data)[0], x)
        finally:
            data.release()
