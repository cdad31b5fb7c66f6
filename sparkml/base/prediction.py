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

import hashlib
import logging
import warnings

import numpy as np
import pyarrow as pa
from pyspark.ml.functions import array_to_vector, vector_to_array
from pyspark.sql import functions as F

from sparkml.compat import require_connect_ml, vectorized_udf

_DEVICE_MAPS = {}  # (fingerprint, device) -> (feature map, coefficients^T, intercepts) there, most recent last
_DEVICE_MAPS_KEPT = 4


def _scoring_state(feature_map, coef, intercept, fingerprint, device):
    """The feature map and the coefficients on ``device``, built once per Python worker and model: every
    batch and every task that reuses the worker scores with the same landmark tensor."""
    import torch

    from sparkml.gpu.feature_maps import make_feature_map

    key = (fingerprint, str(device))
    state = _DEVICE_MAPS.pop(key, None)
    if state is None:
        state = (
            make_feature_map(feature_map).to(device),
            torch.from_numpy(coef).T.contiguous().to(device),
            torch.from_numpy(intercept).to(device),
        )
    _DEVICE_MAPS[key] = state
    while len(_DEVICE_MAPS) > _DEVICE_MAPS_KEPT:
        _DEVICE_MAPS.pop(next(iter(_DEVICE_MAPS)))
    return state


def _kernel_margins(x, feature_map, coef, intercept, kernel_block, fingerprint, device):
    """(n, K) float64 margins of a kernel model, computed on ``device`` (resolved on the executor) and
    returned on the CPU: the kernel block's product with the folded coefficients (``kernel_block``,
    Nystroem) or the explicit features' (random Fourier)."""
    from sparkml.gpu import resolve_device
    from sparkml.gpu.prediction import linear_margins

    device = resolve_device(device)
    fm, coef_t, icpt = _scoring_state(feature_map, coef, intercept, fingerprint, device)
    x = x.to(device)
    if kernel_block:
        margins = fm.kernel_product(x, coef_t).add_(icpt)
    else:
        margins = linear_margins(fm.transform(x), coef_t.T, icpt)
    return margins.cpu()


def _scores(
    features,
    kind,
    coef,
    intercept,
    raw_threshold,
    thresholds,
    features_col,
    feature_map=None,
    platt=None,
    kernel_block=False,
    fingerprint=None,
    device="cpu",
):
    """Score one Arrow batch; returns a StructArray (raw, probability, prediction)."""
    import torch

    from sparkml.gpu.prediction import (
        binary_logistic_probability,
        linear_margins,
        platt_probability,
        softmax_probability,
    )

    if features.null_count:
        raise ValueError(f"features column {features_col!r} has null rows; cannot score them")
    from sparkml.gpu.feature_maps import input_features

    n, d = len(features), coef.shape[1] if feature_map is None else input_features(feature_map)
    if n and (np.asarray(features.value_lengths()) != d).any():
        raise ValueError(f"features column {features_col!r} has vectors whose size is not {d}")
    with warnings.catch_warnings():  # Arrow's buffer is read-only; the scores never write to it
        warnings.simplefilter("ignore", UserWarning)
        x = torch.from_numpy(features.flatten().to_numpy(zero_copy_only=False).reshape(n, d))
    if feature_map is not None:
        margins = _kernel_margins(x, feature_map, coef, intercept, kernel_block, fingerprint, device)
    else:
        margins = linear_margins(x, torch.from_numpy(coef), torch.from_numpy(intercept))
    prob = None
    if kind == "regression":
        raw, pred = None, margins[:, 0]
    elif margins.shape[1] == 1:  # binary: raw = [-m, m]
        m = margins[:, 0]
        raw = torch.stack([-m, m], dim=1)
        pred = (m > raw_threshold).to(torch.float64)
        if kind == "logistic":
            p = binary_logistic_probability(m)
            prob = torch.stack([1 - p, p], dim=1)
    else:
        raw = margins
        prob = softmax_probability(margins)
        scaled = prob / torch.from_numpy(thresholds) if thresholds is not None else raw
        pred = torch.argmax(scaled, dim=1).to(torch.float64)
    if platt is not None:
        prob = platt_probability(margins, torch.from_numpy(platt))

    def vectors(t):
        if t is None:
            return pa.nulls(n, pa.list_(pa.float64()))
        k = t.shape[1]
        return pa.ListArray.from_arrays(
            pa.array(np.arange(0, n * k + 1, k, dtype=np.int32)), pa.array(t.numpy().ravel())
        )

    return pa.StructArray.from_arrays([vectors(raw), vectors(prob), pa.array(pred.numpy())], ["raw", "prob", "pred"])


def _fingerprint(feature_map, coef, intercept):
    """A digest of what a kernel model scores with: the key of the executors' ``_DEVICE_MAPS``."""
    digest = hashlib.blake2b(
        repr((type(feature_map).__name__, feature_map.kernel, getattr(feature_map, "kernel_args", None))).encode(),
        digest_size=16,
    )
    for name in feature_map._arrays:
        digest.update(getattr(feature_map, name).tobytes())
    digest.update(coef.tobytes())
    digest.update(intercept.tobytes())
    return digest.hexdigest()


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
):
    """Add MLlib's output columns to ``dataset``.

    ``outputs`` maps 'raw' / 'prob' / 'pred' to output column names (empty names are skipped, as in
    MLlib). ``kind`` is 'logistic', 'svc' or 'regression'. ``coef`` (K, d) and ``intercept`` (K,)
    are the model's; binary models have K = 1. ``feature_map`` (a ``sparkml.gpu.feature_maps`` spec): score
    the kernel features of the rows (KernelSVC) instead of the rows; with ``kernel_block``, a Nystroem map's
    kernel block K(X, L) (``coef`` then has the projection folded in).
    ``platt`` (K, 2): the probability column is Platt-scaled decision values (KernelSVC).
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
