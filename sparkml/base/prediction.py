"""Vectorized ``transform`` for the linear models: Arrow batches through torch, no per-row Python.

The features column goes through ``vector_to_array`` (dense, float64) into a scalar UDF that scores
a whole Arrow batch with ``sparkml.gpu.prediction`` (``sparkml.compat.vectorized_udf``: Spark's
``arrow_udf`` where it has one) and returns a struct of the output columns; the vector outputs come back as
``VectorUDT`` through ``array_to_vector``. The output columns, their
names and types are MLlib's: ``rawPrediction`` and ``probability`` (vectors), ``prediction`` (double).
The linear models use this path only where MLlib's own transform is not available; KernelSVC always
does. A kernel model's margins K(X, L) (P theta^T) run tile by tile (``sparkml.gpu.kernels.kernel_matmul``)
on the model's ``device`` ('auto': the executor's GPU when torch sees one), with the landmarks and the
coefficients moved there once per Python worker, not once per batch.

Spark 4.3 feeds Arrow UDFs columnar input by default
(``spark.sql.execution.arrow.pythonUDF.columnarInput.enabled``), and that path fails with
UNSUPPORTED_DATATYPE on any plan whose scan carries a vector column, e.g. a features column read from
Parquet, whatever the UDF reads. ``transform`` therefore switches the setting off in the dataset's
session (once, logged at INFO): the row path it falls back to is the one Spark used before 4.3.
"""

import logging

import numpy as np
from pyspark.ml.functions import array_to_vector, vector_to_array
from pyspark.sql import functions as F

from sparkml.batch_scoring import fingerprint as _fingerprint
from sparkml.batch_scoring import scores as _scores
from sparkml.compat import require_connect_ml, vectorized_udf

_RESULT_TYPE = "struct<raw: array<double>, prob: array<double>, pred: double>"
COLUMNAR_INPUT = "spark.sql.execution.arrow.pythonUDF.columnarInput.enabled"


def use_row_input_for_arrow_udfs(dataset):
    """Turn off Spark 4.3's columnar input to Arrow UDFs in ``dataset``'s session (module docstring)."""
    try:
        spark = dataset.sparkSession
        if str(spark.conf.get(COLUMNAR_INPUT)).lower() != "true":
            return
        spark.conf.set(COLUMNAR_INPUT, "false")
    except Exception:  # a Spark without the setting
        return
    logging.getLogger(__name__).info(
        "set %s=false: Spark's columnar input to Arrow UDFs cannot carry vector columns", COLUMNAR_INPUT
    )


def transform_linear(
    dataset,
    features_col,
    outputs,
    kind,
    coef,
    intercept,
    raw_threshold=0.0,
    thresholds=None,
    feature_map=None,
    platt=None,
    kernel_block=False,
    device="cpu",
    pairs=None,
    num_classes=None,
):
    """Add MLlib's output columns to ``dataset``.

    ``outputs`` maps 'raw' / 'prob' / 'pred' to output column names (empty names are skipped, as in
    MLlib). ``kind`` is 'logistic', 'svc' or 'regression'. ``coef`` (K, d) and ``intercept`` (K,)
    are the model's; binary models have K = 1. ``feature_map`` (a ``sparkml.gpu.feature_maps`` spec): score
    the kernel features of the rows (KernelSVC) instead of the rows; with ``kernel_block``, a Nystroem map's
    kernel block K(X, L) (``coef`` then has the projection folded in).
    ``platt`` (K, 2): the probability column is Platt-scaled decision values (KernelSVC). ``pairs``: the
    problems are one-vs-one pairs of ``num_classes`` classes, whose votes make the raw prediction (KernelSVC).
    ``device``: where a kernel model scores ('auto': CUDA when the executor's torch sees a GPU); the
    linear models score on the CPU (a batch's product costs less than its copy to a GPU).
    """
    if features_col not in dataset.columns:  # MLlib's error, raised eagerly (MLflow's autolog probes for it)
        from pyspark.errors import IllegalArgumentException

        raise IllegalArgumentException(
            f"[FIELD_NOT_FOUND] No such struct field `{features_col}` in "
            f"{', '.join(f'`{c}`' for c in dataset.columns)}. SQLSTATE: 42704"
        )
    require_connect_ml(dataset.sparkSession)
    use_row_input_for_arrow_udfs(dataset)
    coef = np.ascontiguousarray(np.atleast_2d(coef), dtype=np.float64)
    intercept = np.ascontiguousarray(np.atleast_1d(intercept), dtype=np.float64)
    thresholds = None if thresholds is None else np.asarray(thresholds, dtype=np.float64)
    fingerprint = None if feature_map is None else _fingerprint(feature_map, coef, intercept)

    def scores(features):
        return _scores(
            features,
            kind,
            coef,
            intercept,
            raw_threshold,
            thresholds,
            features_col,
            feature_map,
            platt,
            kernel_block,
            fingerprint,
            device,
            pairs,
            num_classes,
        )

    score = vectorized_udf(scores, _RESULT_TYPE)

    tmp = "__sparkml_scores"
    out = dataset.withColumn(tmp, score(vector_to_array(F.col(features_col), "float64")))
    for key, name in outputs.items():
        if not name:
            continue
        col = F.col(f"{tmp}.{key}")
        out = out.withColumn(name, col if key == "pred" else array_to_vector(col))
    return out.drop(tmp)
