"""What a Spark task runs to score one Arrow batch of features: pyarrow, numpy and torch only, no pyspark.

``scores`` turns a batch of feature vectors into MLlib's output columns (raw prediction, probability,
prediction) for a linear model, or for a kernel model through its feature map on ``device``; the driver side
(``sparkml.base.prediction``) wraps it in a vectorized UDF. A kernel model's feature map and coefficients are
moved to the device once per Python worker and model (keyed by ``fingerprint``), not once per batch.
"""

import hashlib
import warnings
from typing import Any

import numpy as np
import pyarrow as pa

# (fingerprint, device) -> (feature map, coefficients^T, intercepts) there, most recent last
_DEVICE_MAPS: dict[tuple[str, str], tuple[Any, Any, Any]] = {}
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
    import torch

    from sparkml import task_context
    from sparkml.gpu.prediction import linear_margins

    device = torch.device(task_context.device(device).device)
    fm, coef_t, icpt = _scoring_state(feature_map, coef, intercept, fingerprint, device)
    x = x.to(device)
    if kernel_block:
        margins = fm.kernel_product(x, coef_t).add_(icpt)
    else:
        margins = linear_margins(fm.transform(x), coef_t.T, icpt)
    return margins.cpu()


def scores(
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
    pairs=None,
    num_classes=None,
):
    """Score one Arrow batch; returns a StructArray (raw, probability, prediction). ``pairs``: one-vs-one
    problems of ``num_classes`` classes, voted (``sparkml.gpu.prediction.one_vs_one_scores``)."""
    import torch

    from sparkml.gpu.prediction import (
        binary_logistic_probability,
        linear_margins,
        mllib_argmax,
        one_vs_one_scores,
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
    if pairs is not None:
        raw = one_vs_one_scores(margins, pairs, num_classes)
        pred = torch.argmax(raw, dim=1).to(torch.float64)
    elif kind == "regression":
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
        prob = softmax_probability(margins)  # multinomial logistic: MLlib's, +-inf and NaN margins included
        if kind != "logistic":  # one-vs-rest
            pred = torch.argmax(raw, dim=1).to(torch.float64)
        elif thresholds is not None:
            pred = mllib_argmax(prob / torch.from_numpy(thresholds), nan_first_wins=False)
        else:
            pred = mllib_argmax(raw)
    if platt is not None:
        prob = platt_probability(margins, torch.from_numpy(platt), pairs, num_classes)

    def vectors(t):
        if t is None:
            return pa.nulls(n, pa.list_(pa.float64()))
        k = t.shape[1]
        return pa.ListArray.from_arrays(
            pa.array(np.arange(0, n * k + 1, k, dtype=np.int32)), pa.array(t.numpy().ravel())
        )

    return pa.StructArray.from_arrays([vectors(raw), vectors(prob), pa.array(pred.numpy())], ["raw", "prob", "pred"])


def logistic_raw_threshold(threshold):
    """MLlib's binary ``threshold`` on the probability as a threshold on the margin: log(t / (1 - t))."""
    t = float(threshold)
    return np.inf if t >= 1 else (-np.inf if t <= 0 else float(np.log(t / (1 - t))))


def kernel_scoring_inputs(spec, coef):
    """(coefficients, feature map spec, whether they apply to the kernel block) a kernel model scores with.
    Nystroem: the margins phi(X) theta^T = K(X, L) (P theta^T) with P the (m, r) projection, so P is folded
    into the coefficients once and a row costs m multiply-adds after its kernel row instead of m r; the spec
    the executors get then carries the landmarks without P (at 4000 landmarks, P is 128 MB that every task
    would unpickle for nothing). Random Fourier features: as they are."""
    import dataclasses

    from sparkml.gpu.feature_maps import NystroemSpec

    if isinstance(spec, NystroemSpec):
        folded = np.ascontiguousarray(coef @ np.asarray(spec.projection, dtype=np.float64).T)
        return folded, dataclasses.replace(spec, projection=np.empty((len(spec.landmarks), 0))), True
    return coef, spec, False


def fingerprint(feature_map, coef, intercept):
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
