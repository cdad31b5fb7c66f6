"""The Params' type converters, without pyspark: pyspark.ml's ``TypeConverters`` mirrored (the same values pass,
with the same messages) and this library's own (``OneOf``, ``to_gamma``, ``to_memory_size``, ``to_class_weight``).
Each Param's declaration names its converter (``sparkml.params.declared``); the pyspark Param and the saved-file
reader both use it, so a value is refused alike when set and when loaded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from sparkml.params import mllib_structs as structs

# ---- pyspark.ml.param.TypeConverters, without pyspark: the same values pass, with the same messages ----------


def _is_numeric(value):
    # pyspark's rule: Python ints and floats and numpy's 64-bit ones (a bool is not one; neither is np.float32)
    return type(value) in (int, float, np.float64, np.int64)


def _can_convert_to_list(value):
    return type(value) in (list, tuple, range, np.ndarray)


def to_int(value):
    if _is_numeric(value) and float(value).is_integer():
        return int(value)
    raise TypeError(f"Could not convert {value} to int")


def to_float(value):
    if _is_numeric(value):
        return float(value)
    raise TypeError(f"Could not convert {value} to float")


def to_boolean(value):
    if isinstance(value, bool):
        return value
    raise TypeError(f"Boolean Param requires value of type bool. Found {type(value)}.")


def to_string(value):
    if isinstance(value, str):
        return value
    raise TypeError(f"Could not convert {type(value)} to string type")


def to_list_float(value):
    if _can_convert_to_list(value):
        value = value.tolist() if isinstance(value, np.ndarray) else list(value)
        if all(map(_is_numeric, value)):
            return [float(v) for v in value]
    raise TypeError(f"Could not convert {value} to list of floats")


def to_list_string(value):
    if _can_convert_to_list(value):
        value = value.tolist() if isinstance(value, np.ndarray) else list(value)
        if all(isinstance(v, str) for v in value):
            return list(value)
    raise TypeError(f"Could not convert {value} to list of strings")


def _json_floats(values):
    """The values of MLlib's JSON vector or matrix: numbers, or the strings "NaN", "Infinity", "-Infinity"."""
    if not isinstance(values, list) or not all(_is_numeric(v) or isinstance(v, str) for v in values):
        raise TypeError(f"Could not convert {values} to a list of numbers")
    return [float(v) for v in values]


def _linalg(kind, value):
    """A vector or matrix Param as MLlib's JSON writes it, checked (``mllib_structs``)."""
    try:
        struct = structs.from_json(value, _json_floats)
        problem = structs.problem(kind, struct)
    except structs.Malformed as e:
        problem = str(e)
    if problem:
        raise TypeError(f"Could not convert {value} to {kind} ({problem})")
    return struct


def to_vector(value):
    """A vector Param as MLlib's JSON writes it ({"type": 1, "values": [...]}, or sparse with size and
    indices), or a list of numbers."""
    if isinstance(value, list):
        value = {"type": 1, "values": to_list_float(value)}
    if not isinstance(value, dict) or "values" not in value:
        raise TypeError(f"Could not convert {value} to vector")
    return _linalg("vector", value)


def to_matrix(value):
    """A matrix Param as MLlib's JSON writes it ({"class": "matrix", "type": 1, "numRows", "numCols",
    "values", "isTransposed"}, or sparse with colPtrs and rowIndices)."""
    if not isinstance(value, dict) or value.get("class") != "matrix" or "values" not in value:
        raise TypeError(f"Could not convert {value} to matrix")
    return _linalg("matrix", value)


@dataclass(frozen=True)
class OneOf:
    """A Param type converter: the value as a string, or ValueError naming the Param and the choices
    (``allowed``: a tuple, or a function returning one, read at each conversion)."""

    name: str
    allowed: Any

    def __call__(self, value):
        value = to_string(value)
        choices = self.allowed() if callable(self.allowed) else self.allowed
        if value not in choices and not (self.name == "device" and value.startswith("cuda:")):
            raise ValueError(f"{self.name} must be one of {', '.join(choices)}; got {value!r}")
        return value


def to_gamma(value):
    """KernelSVC's ``gamma``: 'scale', 'auto' or a finite number > 0 (a number written as a string is read)."""
    problem = f"gamma must be 'scale', 'auto' or a finite number > 0; got {value!r}"
    if isinstance(value, str):
        if value in ("scale", "auto"):
            return value
        try:
            value = float(value)
        except ValueError:
            raise ValueError(problem) from None
    try:
        value = to_float(value)
    except TypeError:
        raise TypeError(problem) from None
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(problem)
    return value


_MEMORY_UNITS = {"": 1 << 20, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


def memory_bytes(text):
    """Bytes of a memory size as Spark writes its memory settings: a number and a unit k, m, g, t or p, optionally
    followed by b (``512m``, ``8g``, ``1.5gb``), or b alone for bytes; a bare number is MiB, as Spark reads
    ``spark.executor.memory``."""
    import re

    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([bkmgtp]?)b?\s*", str(text), re.IGNORECASE)
    if not match:
        raise ValueError(f"not a memory size: {text!r} (write it as Spark's memory settings do: 512m, 8g)")
    return int(float(match.group(1)) * _MEMORY_UNITS[match.group(2).lower()])


def to_memory_size(value):
    """KernelSVC's ``kernelBlockMemory``: 'auto' or a memory size (``memory_bytes``) of at least 1 byte."""
    value = to_string(value)
    if value != "auto" and memory_bytes(value) < 1:
        raise ValueError(f"kernelBlockMemory must be 'auto' or a size of at least 1 byte; got {value!r}")
    return value


BALANCED = "balanced"  # classWeight: n / (k * n_c) for class c (``sparkml.data.class_weight``)


def to_class_weight(value):
    """``classWeight``: ``"balanced"``, or a mapping of labels (non-negative integers, as floats) to finite
    non-negative weights; a ValueError naming ``classWeight`` otherwise. A saved mapping's labels come back from
    JSON as strings and are converted again."""
    if isinstance(value, str):
        if value.strip().lower() != BALANCED:
            raise ValueError(f"classWeight must be 'balanced' or a mapping of label to weight; got {value!r}")
        return BALANCED
    if not isinstance(value, Mapping) or not value:
        raise ValueError(f"classWeight must be 'balanced' or a non-empty mapping of label to weight; got {value!r}")
    out = {}
    for label, weight in value.items():
        try:
            c, w = float(label), float(weight)
        except (TypeError, ValueError):
            raise ValueError(f"classWeight maps labels to weights, both numbers; got {label!r}: {weight!r}") from None
        if not (math.isfinite(c) and c >= 0 and c.is_integer()):
            raise ValueError(f"classWeight's labels are class indices (0, 1, 2, ...), finite; got {label!r}")
        if not (math.isfinite(w) and w >= 0):
            raise ValueError(f"classWeight's weights must be finite and non-negative; got {weight!r} for label {c:g}")
        out[c] = w
    return out
