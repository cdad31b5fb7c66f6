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

__all__ = ["FourierSpec", "NystroemSpec", "RowFeatures", "input_features", "make_feature_map"]


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


class RowFeatures:
    """rows -> their features under ``spec``, as a partition's blocks are derived on its executor: a Nystroem
    spec's kernel block K(rows, L) (its projection, the blocks' right factor applied per product, is not kept
    here), or a Fourier spec's z(rows). Picklable (a broadcast carries it); the landmarks, or the map, are made
    once per process for each device and dtype the rows come in."""

    def __init__(self, spec):
        nystroem = isinstance(spec, NystroemSpec)
        self.kernel = (spec.kernel, spec.landmarks, spec.kernel_args) if nystroem else None
        self.fourier = None if nystroem else spec
        self._made = {}

    def __getstate__(self):
        return {"kernel": self.kernel, "fourier": self.fourier}

    def __setstate__(self, state):
        self.kernel, self.fourier, self._made = state["kernel"], state["fourier"], {}

    def __call__(self, rows):
        import torch

        from .kernels import kernel_matrix

        if self.kernel is not None:
            kind, landmarks, args = self.kernel
            key = (rows.device, rows.dtype)
            if key not in self._made:
                self._made[key] = torch.as_tensor(landmarks).to(device=rows.device, dtype=rows.dtype)
            return kernel_matrix(kind, rows, self._made[key], **args)
        if rows.device not in self._made:  # one map per device, its casts cached
            assert self.fourier is not None
            self._made[rows.device] = self.fourier.make().to(rows.device)
        return self._made[rows.device].transform(rows)
