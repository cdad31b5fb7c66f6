"""A kernel feature map's data: what a fitted KernelSVC ships to executors and saves.

A spec holds plain values and float64 numpy arrays (picklable into a Spark closure, storable as
Parquet) and rebuilds its map with ``make()``:

* ``NystroemSpec``: phi(x) = k(x, L) P, landmarks L (m, d), projection P (m, r) (``nystroem``);
* ``FourierSpec``: z(x) = sqrt(2/D) cos(x W + b), frequencies W (d, D), offsets b (D,) (``fourier``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .fourier import RandomFourierMap
from .nystroem import NystroemMap

__all__ = ["FourierSpec", "NystroemSpec", "input_features", "make_feature_map"]


class _Spec:
    _arrays: ClassVar[tuple[str, ...]] = ()  # the fields held as float64 C-order arrays

    def __post_init__(self):
        # C order whatever the source (a loaded DenseMatrix is column-major): the same BLAS summation
        # order, so a loaded model scores bit for bit as the fitted one
        for name in self._arrays:
            object.__setattr__(self, name, np.ascontiguousarray(getattr(self, name), dtype=np.float64))


@dataclass(frozen=True, eq=False)
class NystroemSpec(_Spec):
    kernel: str
    landmarks: np.ndarray  # (m, d)
    projection: np.ndarray  # (m, r): K_LL^-1/2 in K_LL's truncated eigenbasis
    gamma: float
    degree: int
    coef0: float
    method = "nystroem"
    _arrays = ("landmarks", "projection")

    @property
    def n_features_in(self):
        return int(self.landmarks.shape[1])

    @property
    def kernel_args(self):
        return {"gamma": self.gamma, "degree": self.degree, "coef0": self.coef0}

    def make(self):
        return NystroemMap(self.kernel, self.landmarks, projection=self.projection, **self.kernel_args)


@dataclass(frozen=True, eq=False)
class FourierSpec(_Spec):
    kernel: str
    frequencies: np.ndarray  # (d, D)
    offsets: np.ndarray  # (D,)
    method = "rff"
    _arrays = ("frequencies", "offsets")

    @property
    def n_features_in(self):
        return int(self.frequencies.shape[0])

    def make(self):
        return RandomFourierMap(self.kernel, frequencies=self.frequencies, offsets=self.offsets)


def make_feature_map(spec):
    """The ``NystroemMap`` or ``RandomFourierMap`` that ``spec`` describes."""
    return spec.make()


def input_features(spec):
    """d, the size of the vectors the map takes."""
    return spec.n_features_in
