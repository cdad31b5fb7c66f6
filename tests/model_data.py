"""Small synthetic data sets and output comparisons shared by the model-level tests
(test_persistence, test_model_outputs, test_pipeline)."""
import numpy as np
from pyspark.ml.linalg import Vectors, VectorUDT
from pyspark.sql.types import DoubleType, LongType, StructField, StructType

SCHEMA = StructType([StructField("id", LongType()), StructField("features", VectorUDT()),
                     StructField("label", DoubleType()), StructField("label3", DoubleType()),
                     StructField("y", DoubleType())])


def linear_frame(spark, n=600, d=4, partitions=3, seed=7):
    """id, features (dense, d), label (binary), label3 (3 classes), y (regression target)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * np.linspace(1.0, 3.0, d) + np.linspace(-1.0, 1.0, d)
    w = np.linspace(1.5, -1.0, d)
    m = x @ w / 2 + 0.3
    label = (m + rng.logistic(size=n) > 0).astype(float)
    scores = np.stack([m, -m, 0.5 * x[:, 0]], axis=1) + rng.gumbel(size=(n, 3))
    label3 = scores.argmax(axis=1).astype(float)
    y = x @ w + 0.7 + rng.normal(scale=0.5, size=n)
    rows = [(i, Vectors.dense(x[i]), float(label[i]), float(label3[i]), float(y[i])) for i in range(n)]
    return spark.createDataFrame(spark.sparkContext.parallelize(rows, partitions), SCHEMA).cache()


def output_arrays(df, columns, order="id"):
    """{column: float64 array (n, k) or (n,)} of the collected output columns, rows sorted by ``order``."""
    rows = df.select(order, *columns).orderBy(order).collect()
    out = {}
    for c in columns:
        values = [r[c] for r in rows]
        out[c] = np.array([v.toArray() if hasattr(v, "toArray") else v for v in values], dtype=np.float64)
    return out


def assert_same_outputs(ours, theirs, columns, atol, order="id"):
    """The output columns of two transformed DataFrames agree within ``atol``, row by row."""
    a, b = output_arrays(ours, columns, order), output_arrays(theirs, columns, order)
    for c in columns:
        assert a[c].shape == b[c].shape, c
        np.testing.assert_allclose(a[c], b[c], rtol=0, atol=atol, err_msg=c)


def output_fields(df, columns):
    """(name, dataType) of the given output columns, in the DataFrame's order."""
    return [(f.name, f.dataType) for f in df.schema.fields if f.name in columns]
