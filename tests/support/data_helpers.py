"""The data the tests fit on, generated in one place: seeded numpy arrays and the Spark DataFrames
(or pandas tables) built from them.

pyspark (and pandas) are imported inside the builders that need them, so the numpy generators
import where no pyspark is installed (tests/test_optim_svc_path.py needs no Spark).
"""

import math

import numpy as np


def _schema(*fields):
    """A StructType of (name, type) pairs, each type a pyspark type or "vector" / "double" / "long"."""
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql.types import DoubleType, LongType, StructField, StructType

    named = {"vector": VectorUDT, "double": DoubleType, "long": LongType}
    return StructType([StructField(name, named[kind]() if isinstance(kind, str) else kind) for name, kind in fields])


# ---- id, features, label (binary), label3 (3 classes), y (real): the model-level tests --------------------


def linear_frame(spark, n=600, d=4, partitions=3, seed=7):
    """id, features (dense, d), label (binary), label3 (3 classes), y (regression target); cached."""
    from pyspark.ml.linalg import Vectors

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * np.linspace(1.0, 3.0, d) + np.linspace(-1.0, 1.0, d)
    w = np.linspace(1.5, -1.0, d)
    m = x @ w / 2 + 0.3
    label = (m + rng.logistic(size=n) > 0).astype(float)
    scores = np.stack([m, -m, 0.5 * x[:, 0]], axis=1) + rng.gumbel(size=(n, 3))
    label3 = scores.argmax(axis=1).astype(float)
    y = x @ w + 0.7 + rng.normal(scale=0.5, size=n)
    rows = [(i, Vectors.dense(x[i]), float(label[i]), float(label3[i]), float(y[i])) for i in range(n)]
    schema = _schema(("id", "long"), ("features", "vector"), ("label", "double"), ("label3", "double"), ("y", "double"))
    return spark.createDataFrame(spark.sparkContext.parallelize(rows, partitions), schema).cache()


def connect_rows(n=800, d=4, seed=11):
    """(id, features as a list, label, label3, y) rows: plain Python values, which a Spark Connect
    session can take (no RDD, no Python-side vectors)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * np.linspace(1.0, 2.0, d)
    w = np.linspace(1.0, -1.0, d)
    m = x @ w + 0.2
    label = (m + rng.logistic(size=n) > 0).astype(float)
    label3 = np.stack([m, -m, x[:, 0]], 1).__add__(rng.gumbel(size=(n, 3))).argmax(1).astype(float)
    y = x @ w + 0.5 + rng.normal(scale=0.3, size=n)
    return [(i, x[i].tolist(), float(label[i]), float(label3[i]), float(y[i])) for i in range(n)]


def connect_frame(spark, partitions=3):
    """``connect_rows`` as id, features (a vector column), label, label3, y: built the same way in a
    classic and in a Spark Connect session."""
    from pyspark.ml.functions import array_to_vector
    from pyspark.sql import functions as F

    df = spark.createDataFrame(connect_rows(), "id long, x array<double>, label double, label3 double, y double")
    return df.select("id", array_to_vector(F.col("x")).alias("features"), "label", "label3", "y").repartition(
        partitions, "id"
    )


def label_and_target_frame(spark, n=600, partitions=4, seed=5):
    """features (4 of different scales), label (binary) and y (real) of one linear score; cached."""
    from pyspark.ml.linalg import Vectors

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 4)) * [1.0, 3.0, 0.5, 2.0] + [0.0, 1.0, -1.0, 0.5]
    m = x @ [0.8, -0.3, 1.5, 0.2] - 0.1
    label = (m + rng.logistic(size=n) > 0).astype(float)
    y = m + rng.normal(scale=0.2, size=n)
    rows = [(Vectors.dense(x[i]), float(label[i]), float(y[i])) for i in range(n)]
    schema = _schema(("features", "vector"), ("label", "double"), ("y", "double"))
    return spark.createDataFrame(spark.sparkContext.parallelize(rows, partitions), schema).cache()


def raw_columns_frame(spark, n=600, partitions=3, seed=11):
    """id, three raw double columns a, b, c (no vector yet), label (binary), label3 (3 classes), y (real);
    cached."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3)) * [1.0, 2.0, 0.5] + [0.5, -1.0, 0.0]
    m = x @ [1.2, -0.6, 2.0] + 0.2
    label = (m + rng.logistic(size=n) > 0).astype(float)
    label3 = np.digitize(m + rng.normal(scale=0.5, size=n), [-1.0, 1.0]).astype(float)
    y = x @ [0.8, 1.5, -2.0] + 3.0 + rng.normal(scale=0.3, size=n)
    rows = [(i, *map(float, x[i]), float(label[i]), float(label3[i]), float(y[i])) for i in range(n)]
    return spark.createDataFrame(
        spark.sparkContext.parallelize(rows, partitions),
        "id long, a double, b double, c double, label double, label3 double, y double",
    ).cache()


# ---- the parity tests' problems: features on different scales, dense or sparse ----------------------------

PARITY_ROWS, PARITY_FEATURES = 1200, 6
PARITY_SCALES = np.array([1.0, 3.0, 0.2, 10.0, 1.0, 0.5])
PARITY_SHIFTS = np.array([0.0, 1.0, -2.0, 5.0, 0.3, 0.0])


def _parity_design(seed, sparse):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(PARITY_ROWS, PARITY_FEATURES)) * PARITY_SCALES + PARITY_SHIFTS
    if sparse:
        x *= rng.random(size=x.shape) < 0.3  # ~30% non-zeros: the CSR path
    return x


def _parity_binary(sparse, seed=1):
    rng = np.random.default_rng(seed + 100)
    x = _parity_design(seed, sparse)
    beta = np.array([0.8, -0.4, 2.0, 0.1, -1.0, 0.0])
    p = 1 / (1 + np.exp(-(x @ beta - 0.5)))
    y = (rng.random(PARITY_ROWS) < p).astype(float)
    return x, y, rng.uniform(0.2, 3.0, PARITY_ROWS)


def _parity_multiclass(sparse, seed=2, k=3):
    rng = np.random.default_rng(seed + 100)
    x = _parity_design(seed, sparse)
    B = rng.normal(size=(k, PARITY_FEATURES))
    m = ((x - x.mean(0)) / x.std(0)) @ B.T
    p = np.exp(m - m.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    y = np.array([rng.choice(k, p=pi) for pi in p], dtype=float)
    return x, y, rng.uniform(0.2, 3.0, PARITY_ROWS)


def _parity_regression(sparse, seed=3):
    rng = np.random.default_rng(seed + 100)
    x = _parity_design(seed, sparse)
    y = x @ np.array([1.5, -0.3, 4.0, 0.05, 0.0, 2.0]) + 3.0 + rng.normal(scale=0.8, size=PARITY_ROWS)
    return x, y, rng.uniform(0.2, 3.0, PARITY_ROWS)


_PARITY = {"binary": _parity_binary, "multiclass": _parity_multiclass, "regression": _parity_regression}


def parity_arrays(kind, sparse):
    """(x, label, weight) of the parity problem ``kind`` (binary, multiclass or regression)."""
    return _PARITY[kind](sparse)


def parity_frame(spark, kind, sparse, partitions=3):
    """``parity_arrays`` as features (sparse vectors where ``sparse``), label, weight; cached."""
    from pyspark.ml.linalg import SparseVector, Vectors

    def vec(row):
        if sparse:
            nz = np.flatnonzero(row)
            return SparseVector(len(row), nz.tolist(), row[nz].tolist())
        return Vectors.dense(row)

    x, y, w = parity_arrays(kind, sparse)
    data = [(vec(r), float(t), float(v)) for r, t, v in zip(x, y, w)]
    return spark.createDataFrame(data, ["features", "label", "weight"]).repartition(partitions).cache()


# ---- label, features (, w) from arrays: the kernel tests ---------------------------------------------------


def imbalanced_arrays(n=600, d=3, seed=0):
    """(x, y): n normal rows in d dimensions, labels 0 and 1 drawn 3:1."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    y = (rng.random(n) < 0.25).astype(float)  # 1:3 classes
    return x, y


def labeled_frame(spark, x, y, w=None, partitions=None):
    """label, features (dense) and, given weights ``w``, a column w; repartitioned when ``partitions``
    is given, else in the rows' order (to compare with scikit-learn row by row)."""
    from pyspark.ml.linalg import Vectors

    fields = [("label", "double"), ("features", "vector")] + ([("w", "double")] if w is not None else [])
    rows = [(float(label), Vectors.dense(row)) for row, label in zip(x, y)]
    if w is not None:
        rows = [(*row, float(wi)) for row, wi in zip(rows, w)]
    df = spark.createDataFrame(rows, _schema(*fields))
    return df if partitions is None else df.repartition(partitions)


# ---- a few hand-made rows: the bad-input tests --------------------------------------------------------------

SMALL_ROWS = 40  # two partitions of 20 rows in ``rows_frame``


def small_rows():
    """SMALL_ROWS (features as a list, label, weight) rows with both classes and a little signal."""
    rows = []
    for i in range(SMALL_ROWS):
        x = [math.sin(i), math.cos(3 * i), (i % 7) / 7.0]
        rows.append((x, float((i % 2) ^ (x[0] > 0.8)), 1.0))
    return rows


def rows_frame(spark, rows, features_type="vector", label_type=None):
    """DataFrame (features, label, w) of (features, label, weight) rows in 2 partitions, keeping the row
    order (the first half of the rows -> partition 0). features_type: "vector" (dense), "sparse" or
    "array" (array<double>); label_type: a pyspark type, double by default."""
    from pyspark.ml.linalg import Vector, Vectors
    from pyspark.sql.types import ArrayType, DoubleType

    if features_type == "vector":
        ftype, conv = "vector", (lambda x: x if x is None or isinstance(x, Vector) else Vectors.dense(x))
    elif features_type == "sparse":
        ftype, conv = (
            "vector",
            (
                lambda x: (
                    x
                    if x is None or isinstance(x, Vector)
                    else Vectors.sparse(len(x), {j: v for j, v in enumerate(x) if v})
                )
            ),
        )
    else:
        ftype, conv = ArrayType(DoubleType()), (lambda x: x)
    schema = _schema(("features", ftype), ("label", label_type or "double"), ("w", "double"))
    data = [(conv(x), y, w) for x, y, w in rows]
    return spark.createDataFrame(spark.sparkContext.parallelize(data, 2), schema)


# ---- files for the jobs ----------------------------------------------------------------------------------


def generated_table(rows, n_features, seed, weighted=False):
    """jobs.datasets' generated binary problem as a pandas frame: columns c0, c1, ..., the label y and,
    when ``weighted``, a weight w alternating 1 and 2."""
    import pandas as pd

    from sparkml.jobs import datasets

    X, y = datasets.generate_arrays("binary", rows, n_features, seed=seed)
    pdf = pd.DataFrame(X, columns=[f"c{i}" for i in range(n_features)])
    pdf["y"] = np.asarray(y, dtype=float)
    if weighted:
        pdf["w"] = 1.0 + (np.arange(rows) % 2)
    return pdf


# ---- bound-constrained LogisticRegression and huber LinearRegression: test_bounds, test_huber ---------------


def bounds_frame(spark, n=2000, partitions=3, seed=21):
    """features (4, shifted, of different scales), label (binary), label3 (3 classes), w; cached. Both
    labels are noisy (no separation): with regParam > 0 every fit has one optimum."""
    from pyspark.ml.linalg import Vectors

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 4)) * [1.0, 2.0, 0.7, 1.5] + [0.5, -1.0, 0.2, 2.0]
    m = x @ [1.2, -0.6, 1.0, 0.4] - 0.8
    label = (rng.random(n) < 1 / (1 + np.exp(-m))).astype(float)
    label3 = (np.stack([m, -m, x[:, 0] - x[:, 2]], axis=1) + rng.gumbel(size=(n, 3))).argmax(axis=1).astype(float)
    w = rng.uniform(0.5, 2.0, n)
    rows = [(Vectors.dense(x[i]), float(label[i]), float(label3[i]), float(w[i])) for i in range(n)]
    schema = _schema(("features", "vector"), ("label", "double"), ("label3", "double"), ("w", "double"))
    return spark.createDataFrame(spark.sparkContext.parallelize(rows, partitions), schema).cache()


def huber_frame(spark, n=2000, partitions=3, seed=4):
    """features (4, shifted, of different scales), label y = x.beta + 1.5 + N(0, 0.5) with 5% outliers
    (+ N(0, 20)), w; cached."""
    from pyspark.ml.linalg import Vectors

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 4)) * [1.0, 2.0, 0.5, 1.5] + [0.5, -1.0, 0.0, 2.0]
    y = x @ [1.0, -0.5, 2.0, 0.3] + 1.5 + rng.normal(scale=0.5, size=n)
    outliers = rng.random(n) < 0.05
    y[outliers] += rng.normal(scale=20.0, size=int(outliers.sum()))
    w = rng.uniform(0.5, 2.0, n)
    rows = [(Vectors.dense(x[i]), float(y[i]), float(w[i])) for i in range(n)]
    schema = _schema(("features", "vector"), ("label", "double"), ("w", "double"))
    return spark.createDataFrame(spark.sparkContext.parallelize(rows, partitions), schema).cache()
