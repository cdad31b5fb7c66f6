"""A kernel feature map rebuilt from its data: what a fitted KernelSVC ships to executors and saves.

``spec`` is a dict of plain values and numpy arrays (picklable into a Spark closure, storable as
Parquet):

* ``{"method": "nystroem", "kernel", "landmarks" (m, d), "projection" (m, m), "gamma", "degree", "coef0"}``
  (``gpu.nystroem``);
* ``{"method": "rff", "kernel", "frequencies" (d, D), "offsets" (D,)}`` (``gpu.fourier``).
"""
from __future__ import annotations

from .fourier import RandomFourierMap
from .nystroem import NystroemMap

__all__ = ["make_feature_map", "input_features"]


def make_feature_map(spec):
    """The ``NystroemMap`` or ``RandomFourierMap`` that ``spec`` describes."""
    if spec["method"] == "nystroem":
        return NystroemMap(spec["kernel"], spec["landmarks"], projection=spec["projection"], gamma=spec["gamma"],
                           degree=spec["degree"], coef0=spec["coef0"])
    if spec["method"] == "rff":
        return RandomFourierMap(spec["kernel"], frequencies=spec["frequencies"], offsets=spec["offsets"])
    raise ValueError(f"unknown feature map method {spec['method']!r}")


def input_features(spec):
    """d, the size of the vectors the map takes."""
    return int(spec["landmarks"].shape[1] if spec["method"] == "nystroem" else spec["frequencies"].shape[0])
