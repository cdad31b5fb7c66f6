"""sparkml.landmarks: the class-stratified, partitioning-independent landmark sample."""
from types import SimpleNamespace

import numpy as np
from pyspark.ml.linalg import Vectors, VectorUDT
from pyspark.sql.types import DoubleType, StructField, StructType

from sparkml.landmarks import class_quotas, sample_landmarks

SCHEMA = StructType([StructField("label", DoubleType()), StructField("features", VectorUDT())])


def _data(n=600, d=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    y = (rng.random(n) < 0.25).astype(float)  # 1:3 classes
    return x, y


def _summary(x, y):
    return SimpleNamespace(rows=len(y), n_features=x.shape[1], class_weights=np.bincount(y.astype(int)).astype(float))


def test_sample_is_stratified_and_the_same_whatever_the_partitioning(spark):
    x, y = _data()
    rows = [(float(label), Vectors.dense(row)) for row, label in zip(x, y)]
    summary = _summary(x, y)
    quota = class_quotas(summary, 40)
    assert quota == {0.0: round(40 * np.mean(y == 0)), 1.0: round(40 * np.mean(y == 1))}
    one = sample_landmarks(spark.createDataFrame(rows, SCHEMA).coalesce(1), "features", "label", summary, quota, 3)
    many = sample_landmarks(spark.createDataFrame(rows[::-1], SCHEMA).repartition(5), "features", "label", summary,
                            quota, 3)
    np.testing.assert_array_equal(one[0], many[0])
    np.testing.assert_array_equal(one[1], many[1])
    picked, labels = one
    assert picked.dtype == np.float64 and picked.shape == (sum(quota.values()), 3)
    assert {c: int(np.sum(labels == c)) for c in quota} == quota
    # every picked row is a training row with its own label, none twice
    index = {tuple(row): label for row, label in zip(x, y)}
    assert all(index[tuple(row)] == label for row, label in zip(picked, labels))
    assert len({tuple(row) for row in picked}) == len(picked)
    other_seed = sample_landmarks(spark.createDataFrame(rows, SCHEMA), "features", "label", summary, quota, 4)[0]
    assert not np.array_equal(np.sort(other_seed, axis=0), np.sort(picked, axis=0))


def test_all_rows_when_the_quota_covers_the_data(spark):
    x, y = _data(n=30)
    frame = spark.createDataFrame([(float(label), Vectors.dense(row)) for row, label in zip(x, y)], SCHEMA)
    summary = _summary(x, y)
    picked, labels = sample_landmarks(frame, "features", "label", summary, class_quotas(summary, 100), 0)
    assert picked.shape == x.shape
    np.testing.assert_array_equal(np.sort(picked, axis=0), np.sort(x, axis=0))
    assert sorted(labels) == sorted(y)
