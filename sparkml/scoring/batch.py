"""What a Spark task runs to score one batch of rows with a ``ScoringSpec``: pyarrow, numpy and torch only, no
pyspark (it imports on a machine without Spark).

``score_batch`` turns an Arrow batch of feature vectors into a struct of the model's output columns (the keys of
``sparkml.scoring.kinds.OUTPUTS``: a vector output as a list of doubles per row, the others as doubles); the
driver side (``sparkml.scoring.dataframe``) wraps it in a vectorized UDF. ``score_rows`` does the same for an
(n, d) numpy array (serving). Both compute the margins M = z(X) W^T + b (``margins``) and hand them to the
spec's kind. A kernel model's feature map and coefficients are moved to its device once per Python worker and
model (keyed by the spec's ``fingerprint``), not once per batch, and its margins run tile by tile there
(``sparkml.gpu.kernels.kernel_matmul`` through the map's ``kernel_product``).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pyarrow as pa

from sparkml.scoring.spec import ScoringSpec

# (fingerprint, device) -> (feature map, coefficients^T, intercepts) there, most recent last
_DEVICE_MAPS: dict[tuple[str, str], tuple[Any, Any, Any]] = {}
_DEVICE_MAPS_KEPT = 4


def _device_state(spec: ScoringSpec, device):
    """The feature map and the coefficients on ``device``, built once per Python worker and model: every
    batch and every task that reuses the worker scores with the same landmark tensor."""
    import torch

    from sparkml.gpu.feature_maps import make_feature_map

    key = (spec.fingerprint, str(device))
    state = _DEVICE_MAPS.pop(key, None)
    if state is None:
        state = (
            make_feature_map(spec.feature_map).to(device),
            torch.from_numpy(spec.coefficients).T.contiguous().to(device),
            torch.from_numpy(spec.intercepts).to(device),
        )
    _DEVICE_MAPS[key] = state
    while len(_DEVICE_MAPS) > _DEVICE_MAPS_KEPT:
        _DEVICE_MAPS.pop(next(iter(_DEVICE_MAPS)))
    return state


def margins(x, spec: ScoringSpec):
    """(n, K) float64 margins of the rows ``x`` (an (n, d) tensor) on the CPU. A linear model: X W^T + b. A
    kernel model, computed on the spec's device (resolved on the executor): the kernel block's product with
    the folded coefficients (``kernel_block``, Nystroem), or the explicit features' (random Fourier)."""
    import torch

    from sparkml.gpu.prediction import linear_margins

    if spec.feature_map is None:
        return linear_margins(x, torch.from_numpy(spec.coefficients), torch.from_numpy(spec.intercepts))
    from sparkml.runtime import task_context

    device = torch.device(task_context.device(spec.device).device)
    fm, coef_t, intercepts = _device_state(spec, device)
    x = x.to(device)
    if spec.kernel_block:
        out = fm.kernel_product(x, coef_t).add_(intercepts)
    else:
        out = linear_margins(fm.transform(x), coef_t.T, intercepts)
    return out.cpu()


def outputs_of(margins, spec: ScoringSpec, keys=None) -> dict[str, Any]:
    """{key: tensor} of the output ``keys`` (default: all the spec's) from the model's (n, K) ``margins``."""
    values = spec.kind.score(margins, spec)
    return {k: values[k] for k in (spec.outputs if keys is None else keys)}


def _arrow(t, n):
    """A tensor as an Arrow column: (n, k) as lists of k doubles, (n,) as doubles."""
    a = t.numpy()
    if a.ndim == 1:
        return pa.array(a)
    k = a.shape[1]
    return pa.ListArray.from_arrays(pa.array(np.arange(0, n * k + 1, k, dtype=np.int32)), pa.array(a.ravel()))


def score_batch(features, spec: ScoringSpec, keys=None, column="features") -> pa.StructArray:
    """Score one Arrow batch (a list array of the rows' feature values): a StructArray with one field per
    output key (default: all the spec's). A null row or a row of another size is a ValueError naming
    ``column``."""
    import torch

    if features.null_count:
        raise ValueError(f"features column {column!r} has null rows; cannot score them")
    n, d = len(features), spec.n_features
    if n and (np.asarray(features.value_lengths()) != d).any():
        raise ValueError(f"features column {column!r} has vectors whose size is not {d}")
    with warnings.catch_warnings():  # Arrow's buffer is read-only; the scores never write to it
        warnings.simplefilter("ignore", UserWarning)
        x = torch.from_numpy(features.flatten().to_numpy(zero_copy_only=False).reshape(n, d))
    values = outputs_of(margins(x, spec), spec, keys)
    return pa.StructArray.from_arrays([_arrow(v, n) for v in values.values()], list(values))


def score_rows(x: np.ndarray, spec: ScoringSpec, keys=None, offset=None) -> dict[str, np.ndarray]:
    """{key: array} of the output ``keys`` (default: all the spec's) for the (n, d) float64 rows ``x``:
    (n, k) for a vector output, (n,) otherwise. ``offset`` (n,): added to the margins (a generalized linear
    model's ``offsetCol``)."""
    import torch

    m = margins(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64)), spec)
    if offset is not None:
        m = m + torch.from_numpy(np.ascontiguousarray(offset, dtype=np.float64))[:, None]
    values = outputs_of(m, spec, keys)
    return {k: v.numpy() for k, v in values.items()}
