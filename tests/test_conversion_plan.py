"""The conversion's query planned while the first vector is read (``sparkml.data.conversion_plan``): the dense plan
made in the second thread is the one that runs on dense input; sparse input, or more features than the Gram sums
allow, plans again and forgets the first plan (no cached RDD left registered); a refused first vector leaves none."""

import threading

import numpy as np
import pytest
from pyspark.ml.linalg import SparseVector, Vectors

from sparkml.data import conversion_plan
from sparkml.data.gram import GramPlan
from sparkml.data.training_data import TrainingData


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
