"""The normal equations' Gram sums computed by the conversion (``TrainingData.prepare(gram=True)``).

A = sum_i w_i a_i a_i^T and b = sum_i w_i y_i a_i (a_i = (x_i, 1), x_i as stored: float32 by default) against
numpy on the same rows, dense and sparse, weighted; no rows stored (no dataset directory on the executors);
the rows stored as before above ``GRAM_MAX_FEATURES`` features and with fold ids; a LinearRegression fit
that makes no Spark job but its first-vector check and its conversion, and matches MLlib's.
"""

import numpy as np
import pytest
from pyspark.ml.linalg import Vectors
from support.data_helpers import labeled_frame
from support.helpers import executor_datasets

import sparkml
from sparkml.data import conversion_plan
from sparkml.data.gram import GramPlan
from sparkml.data.training_data import TrainingData
from sparkml.regression import LinearRegression


@pytest.fixture(scope="module")
def arrays():
    rng = np.random.default_rng(3)
    n, d = 700, 6
    x = rng.normal(size=(n, d)) * np.linspace(0.5, 3.0, d)
    x[rng.random((n, d)).argsort(axis=1) >= 2] = 0.0  # two values a row: the sparse path as SparseVectors
    y = x @ np.linspace(1.0, -1.0, d) + 0.4 + rng.normal(scale=0.3, size=n)
    w = rng.uniform(0.2, 2.0, size=n)
    return x, y, w


def _frame(spark, arrays, sparse):
    x, y, w = arrays
    rows = [Vectors.sparse(len(r), {j: v for j, v in enumerate(r) if v}) if sparse else Vectors.dense(r) for r in x]
    from pyspark.sql import Row

    data = [Row(features=f, label=float(t), weight=float(s)) for f, t, s in zip(rows, y, w)]
    return spark.createDataFrame(data).repartition(3).cache()


def _reference(arrays, dtype):
    x, y, w = arrays
    a = np.column_stack([x.astype(dtype).astype(np.float64), np.ones(len(x))])
    return (a * w[:, None]).T @ a, (a * w[:, None]).T @ y


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_conversion_computes_the_gram_sums_and_stores_no_rows(spark, arrays, sparse, dtype):
    df = _frame(spark, arrays, sparse)
    data = TrainingData.prepare(df, "features", "label", "weight", dtype=dtype, gram=GramPlan())
    try:
        assert data.sparse == sparse and data.blocks == [] and not data.stored
        assert data.dataset_id not in executor_datasets(spark)
        gram, xty, zz = data.gram
        ref_gram, ref_xty = _reference(arrays, dtype)
        np.testing.assert_allclose(gram, ref_gram, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(xty, ref_xty, rtol=1e-12, atol=1e-9)
        x, y, w = arrays
        assert zz == pytest.approx(float(w @ (y * y)), rel=1e-12)
        assert data.summary.rows == len(arrays[1])  # the statistics are the conversion's as before
    finally:
        data.release()
        df.unpersist()


def test_more_features_than_the_limit_or_fold_ids_store_the_rows(spark, arrays, monkeypatch):
    df = _frame(spark, arrays, sparse=False)
    from pyspark.sql import functions as F

    try:
        with_folds = TrainingData.prepare(df, "features", "label", gram=GramPlan(), fold=F.lit(0))
        monkeypatch.setattr(conversion_plan, "GRAM_MAX_FEATURES", 5)  # 6 features
        wide = TrainingData.prepare(df, "features", "label", gram=GramPlan())
        for data in (with_folds, wide):
            assert data.gram is None and data.stored and data.blocks
            assert data.dataset_id in executor_datasets(spark)
            data.release()
            assert data.dataset_id not in executor_datasets(spark)
    finally:
        df.unpersist()


@pytest.mark.parametrize("strategy", ["sync", "auto"])
def test_a_normal_equations_fit_runs_one_job_and_matches_mllib(spark, arrays, strategy):
    """The conversion alone: the input is small, so its one task reads the first vector (``conversion_plan``); no
    Gram pass, no job deleting blocks."""
    import pyspark.ml.regression as mr

    x, y, w = arrays
    df = labeled_frame(spark, x, y, w, partitions=3).cache()
    df.count()
    params = dict(weightCol="w", regParam=0.05, elasticNetParam=0.5)
    sparkml.release_conversions(spark)  # else the fit's conversion cache may release earlier tests' in its thread
    sc = spark.sparkContext
    group = f"normal-fit-{strategy}"
    sc.setJobGroup(group, group)
    try:
        ours = LinearRegression(strategy=strategy, **params).fit(df)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    theirs = mr.LinearRegression(**params).fit(df)
    assert len(sc.statusTracker().getJobIdsForGroup(group)) == 1
    np.testing.assert_allclose(ours.coefficients.toArray(), theirs.coefficients.toArray(), rtol=1e-5, atol=1e-6)
    assert ours.intercept == pytest.approx(theirs.intercept, rel=1e-5, abs=1e-6)
    df.unpersist()
    sparkml.release_conversions(spark)


@pytest.mark.parametrize(
    "family, link, offset",
    [("poisson", None, False), ("poisson", "sqrt", True), ("gamma", None, False), ("binomial", "probit", False)],
)
def test_the_irls_start_from_the_conversion_is_its_first_pass(spark, arrays, family, link, offset):
    """``GramPlan.irls_start``: the sums of IRLS's first pass over the stored rows (``IRLSPass(initial=True)``),
    the offset as the last stored column; the rows stay stored for the later passes."""
    from pyspark.sql import functions as F

    from sparkml.gpu.glm import IRLSPass, family_of, link_of
    from sparkml.regression import GeneralizedLinearRegression

    x, y, w = arrays
    label = {"poisson": np.round(np.abs(y)), "gamma": np.abs(y) + 0.5, "binomial": (y > 0).astype(float)}[family]
    df = labeled_frame(spark, x, label, w, partitions=3).withColumn("o", F.rand(1) * 0.3).cache()
    params = dict(family=family, weightCol="w", **({"link": link} if link else {}))
    params.update({"offsetCol": "o"} if offset else {})
    estimator = GeneralizedLinearRegression(strategy="sync", **params)
    conversion = estimator._conversion(df)
    assert conversion["gram"].rows
    data = TrainingData.prepare(df, **conversion)
    try:
        assert data.stored and data.blocks and data.gram is not None
        strategy = estimator._make_strategy(data, None)
        first = IRLSPass(family_of(family), link_of(family, link, None), initial=True)
        (zz, deviance, invalid), xtz, gram = strategy.loss_gradient_hessian(np.zeros(x.shape[1] + offset + 1), first)
        ours_gram, ours_xtz, ours_zz = data.gram
        np.testing.assert_allclose(ours_gram, gram, rtol=1e-11, atol=1e-9)
        np.testing.assert_allclose(ours_xtz, xtz, rtol=1e-11, atol=1e-9)
        assert ours_zz == pytest.approx(float(zz), rel=1e-11) and deviance == 0 and invalid == 0
    finally:
        data.release()
        df.unpersist()
