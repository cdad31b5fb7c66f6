"""Synthetic data shared by the parity tests: features on different scales, dense or sparse."""
import numpy as np
from pyspark.ml.linalg import SparseVector, Vectors

N_ROWS, N_FEATURES = 1200, 6
SCALES = np.array([1.0, 3.0, 0.2, 10.0, 1.0, 0.5])
SHIFTS = np.array([0.0, 1.0, -2.0, 5.0, 0.3, 0.0])


def design(seed, sparse):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N_ROWS, N_FEATURES)) * SCALES + SHIFTS
    if sparse:
        x *= rng.random(size=x.shape) < 0.3  # ~30% non-zeros: the CSR path
    return x


def rows_to_df(spark, x, y, w, sparse, partitions=3):
    def vec(row):
        if sparse:
            nz = np.flatnonzero(row)
            return SparseVector(len(row), nz.tolist(), row[nz].tolist())
        return Vectors.dense(row)

    data = [(vec(r), float(t), float(v)) for r, t, v in zip(x, y, w)]
    return spark.createDataFrame(data, ["features", "label", "weight"]).repartition(partitions).cache()


def binary(spark, sparse, seed=1):
    rng = np.random.default_rng(seed + 100)
    x = design(seed, sparse)
    beta = np.array([0.8, -0.4, 2.0, 0.1, -1.0, 0.0])
    p = 1 / (1 + np.exp(-(x @ beta - 0.5)))
    y = (rng.random(N_ROWS) < p).astype(float)
    return rows_to_df(spark, x, y, rng.uniform(0.2, 3.0, N_ROWS), sparse)


def multiclass(spark, sparse, seed=2, k=3):
    rng = np.random.default_rng(seed + 100)
    x = design(seed, sparse)
    B = rng.normal(size=(k, N_FEATURES))
    m = ((x - x.mean(0)) / x.std(0)) @ B.T
    p = np.exp(m - m.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    y = np.array([rng.choice(k, p=pi) for pi in p], dtype=float)
    return rows_to_df(spark, x, y, rng.uniform(0.2, 3.0, N_ROWS), sparse)


def regression(spark, sparse, seed=3):
    rng = np.random.default_rng(seed + 100)
    x = design(seed, sparse)
    y = x @ np.array([1.5, -0.3, 4.0, 0.05, 0.0, 2.0]) + 3.0 + rng.normal(scale=0.8, size=N_ROWS)
    return rows_to_df(spark, x, y, rng.uniform(0.2, 3.0, N_ROWS), sparse)
