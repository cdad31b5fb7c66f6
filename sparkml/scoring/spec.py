"""What a fitted model scores with, as one frozen value: ``ScoringSpec``, and the ``Kind`` and ``Output`` it names.

A model of K problems (K = 1 for a binary or a regression model) scores a row x through its margins

    m(x) = W z(x) + b,    W (K, p) ``coefficients``, b (K,) ``intercepts``,

with z(x) = x for a linear model, or a kernel feature map's features of x (``feature_map``: a
``sparkml.gpu.feature_maps`` spec). For a Nystroem map z(x) = k(x, L) P, so W z(x) = k(x, L) (P W^T): the
projection P is folded into the coefficients once (``kernel_spec``) and the executors compute only the kernel
block k(x, L) (``kernel_block``), m multiply-adds per row after its kernel row instead of m r. The ``kind``
(``sparkml.scoring.kinds``) turns the margins into the output columns.

Every path that scores reads this one value: the DataFrame path (``sparkml.scoring.dataframe``), the executors'
Arrow batches (``sparkml.scoring.batch``), the stacked scoring of several models (``sparkml.scoring.stack``) and
the pandas / MLflow path (``sparkml.serving``, built from a model directory by ``sparkml.scoring.model_file``).
The spec holds plain values and float64 numpy arrays (picklable into a Spark closure) and imports neither pyspark
nor torch; its ``fingerprint`` is computed once, where it is built, and travels with it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Output:
    """An output column: ``key`` names it in a batch's struct and in a kind's results; ``column`` is MLlib's
    default name (the one serving returns), ``param`` the model Param that names it in a DataFrame; a ``vector``
    output is (n, k) per batch (a ``VectorUDT`` column), else (n,) (a double column)."""

    key: str
    column: str
    param: str
    vector: bool


@dataclass(frozen=True)
class Kind:
    """A model kind: the output keys it fills, in column order, and ``score(margins, spec)``, which maps the
    (n, K) float64 margins to {key: tensor} ((n, k) for a vector output, (n,) otherwise). ``platt_outputs``:
    the keys it fills only where the spec holds Platt pairs."""

    name: str
    outputs: tuple[str, ...]
    score: Callable[[Any, ScoringSpec], dict[str, Any]]
    platt_outputs: tuple[str, ...] = ()


def _float_array(a, ndim):
    a = np.asarray(a, dtype=np.float64)
    return np.ascontiguousarray(np.atleast_2d(a) if ndim == 2 else np.atleast_1d(a))


@dataclass(frozen=True, eq=False)
class ScoringSpec:
    """What a fitted model scores with (module docstring). Arrays are float64, C order, treated as read-only.

    ``raw_threshold``: a binary classifier predicts 1 iff m > raw_threshold (logistic: the probability threshold
    t as a margin, ``logistic_raw_threshold``). ``thresholds`` (K,): a multinomial logistic model's, which scale
    the probabilities before the argmax. ``platt`` (K, 2): Platt's (a_k, b_k) per problem, for probabilities.
    ``pairs``: the class pairs (a, b) of one-vs-one problems of ``num_classes`` classes. ``link`` (with
    ``link_power`` for the "power" link), ``family`` and ``variance_power``: a generalized linear model's, whose
    prediction is the family's projection of g^-1(margin + offset) (gaussian and identity: the margin itself);
    ``offset_col``: the input column of its offsets, or None. ``device``: where a kernel
    model's margins are computed ('auto': CUDA when the executor's torch sees a GPU); a linear model scores on
    the CPU (a batch's product costs less than its copy to a GPU). ``fingerprint``: a digest of the feature map,
    coefficients and intercepts, the key under which an executor keeps them on its device.
    """

    kind: Kind
    coefficients: np.ndarray
    intercepts: np.ndarray
    raw_threshold: float = 0.0
    thresholds: np.ndarray | None = None
    feature_map: Any = None
    kernel_block: bool = False
    platt: np.ndarray | None = None
    pairs: tuple[tuple[float, float], ...] | None = None
    num_classes: int | None = None
    link: str = "identity"
    family: str = "gaussian"
    variance_power: float = 0.0
    link_power: float = 1.0
    offset_col: str | None = None
    device: str = "cpu"
    fingerprint: str = field(init=False, repr=False)

    def __post_init__(self):
        def put(name, value):
            object.__setattr__(self, name, value)

        put("coefficients", _float_array(self.coefficients, 2))
        put("intercepts", _float_array(self.intercepts, 1))
        put("raw_threshold", float(self.raw_threshold))
        if self.thresholds is not None:
            put("thresholds", _float_array(self.thresholds, 1))
        if self.platt is not None:
            put("platt", _float_array(self.platt, 2).reshape(-1, 2))
        if self.pairs is not None:
            put("pairs", tuple((float(a), float(b)) for a, b in self.pairs))
        if self.num_classes is not None:
            put("num_classes", int(self.num_classes))
        if len(self.intercepts) != len(self.coefficients):
            raise ValueError(
                f"{len(self.coefficients)} coefficient rows and {len(self.intercepts)} intercepts: one per problem"
            )
        put("fingerprint", fingerprint(self.feature_map, self.coefficients, self.intercepts))

    @property
    def n_features(self) -> int:
        """d, the size of the feature vectors the model takes."""
        if self.feature_map is None:
            return int(self.coefficients.shape[1])
        return int(self.feature_map.n_features_in)

    @property
    def outputs(self) -> tuple[str, ...]:
        """The output keys this model fills: its kind's, less those that need Platt pairs it does not have."""
        skip = self.kind.platt_outputs if self.platt is None else ()
        return tuple(k for k in self.kind.outputs if k not in skip)


def kernel_spec(kind, feature_map, coefficients, intercepts, **fields) -> ScoringSpec:
    """The ``ScoringSpec`` of a kernel model whose margins are z(x) theta^T + b with z the ``feature_map``'s
    features. Nystroem: phi(X) theta^T = K(X, L) (P theta^T), so P is folded into the coefficients and the spec
    carries the landmarks without P (at 4000 landmarks P is 128 MB that every task would unpickle for nothing);
    random Fourier features: as they are."""
    coefficients = _float_array(coefficients, 2)
    projection = getattr(feature_map, "projection", None)
    if projection is None:
        return ScoringSpec(kind, coefficients, intercepts, feature_map=feature_map, **fields)
    folded = coefficients @ np.asarray(projection, dtype=np.float64).T
    landmarks_only = dataclasses.replace(feature_map, projection=np.empty((len(feature_map.landmarks), 0)))
    return ScoringSpec(kind, folded, intercepts, feature_map=landmarks_only, kernel_block=True, **fields)


def logistic_raw_threshold(threshold) -> float:
    """MLlib's binary ``threshold`` t on the probability as a threshold on the margin: log(t / (1 - t))."""
    t = float(threshold)
    return np.inf if t >= 1 else (-np.inf if t <= 0 else float(np.log(t / (1 - t))))


def fingerprint(feature_map, coefficients, intercepts) -> str:
    """A digest of the arrays a model scores with: its feature map's kind, kernel and arrays (if any), the
    coefficients and the intercepts."""
    head = None
    if feature_map is not None:
        head = (type(feature_map).__name__, feature_map.kernel, getattr(feature_map, "kernel_args", None))
    digest = hashlib.blake2b(repr(head).encode(), digest_size=16)
    for name in getattr(feature_map, "_arrays", ()):
        digest.update(getattr(feature_map, name).tobytes())
    digest.update(coefficients.tobytes())
    digest.update(intercepts.tobytes())
    return digest.hexdigest()
