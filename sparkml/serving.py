"""Scoring a saved model without Spark: pandas rows in, MLlib's output columns out.

A model saved by this library (``model.save(path)``: MLlib's layout, ``metadata/`` JSON and ``data/`` Parquet)
is read here with pyarrow alone, and scored by the same function a Spark task runs (``batch_scoring.scores``:
numpy and torch on the CPU), so the outputs are ``transform``'s. This is MLflow's ``python_function`` flavor
of the models (``sparkml.mlflow.log_model``): MLflow loads it through ``_load_pyfunc``, the flavor's
loader module, and no model object is pickled.

What each saved class scores with (its ``_transform``'s arguments), read from its data row and Params:

* ``LogisticRegressionModel``: margins x B^T + b; binary: raw [-m, m], probability, prediction at MLlib's
  ``threshold`` (as a margin: log(t / (1 - t))); multinomial: softmax, argmax (``thresholds`` scale it);
* ``LinearSVCModel``: raw [-m, m], prediction m > ``threshold``;
* ``LinearRegressionModel``: prediction x . beta + b;
* ``KernelSVCModel``: the kernel features of x (Nystroem: K(x, L) with the projection folded into the
  coefficients; random Fourier features), then as LinearSVC, Platt's probability when fitted with one.
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

OUTPUTS = {"raw": "rawPrediction", "prob": "probability", "pred": "prediction"}


def _vector(v) -> np.ndarray:
    """An MLlib VectorUDT struct (type 0 sparse / 1 dense, size, indices, values) as a float64 array."""
    values = np.asarray(v["values"], dtype=np.float64)
    if v["type"] == 1:
        return values
    out = np.zeros(int(v["size"]))
    out[np.asarray(v["indices"], dtype=np.int64)] = values
    return out


def _matrix(m) -> np.ndarray:
    """An MLlib MatrixUDT struct (type 0 sparse CSC / 1 dense column-major, or transposed) as a 2-D array."""
    rows, cols, values = int(m["numRows"]), int(m["numCols"]), np.asarray(m["values"], dtype=np.float64)
    if m["type"] == 1:
        return values.reshape((rows, cols)) if m["isTransposed"] else values.reshape((cols, rows)).T
    ptrs, index = np.asarray(m["colPtrs"], dtype=np.int64), np.asarray(m["rowIndices"], dtype=np.int64)
    if m["isTransposed"]:  # CSR: colPtrs are row pointers
        out = np.zeros((rows, cols))
        for r in range(rows):
            out[r, index[ptrs[r] : ptrs[r + 1]]] = values[ptrs[r] : ptrs[r + 1]]
        return out
    out = np.zeros((rows, cols))
    for c in range(cols):
        out[index[ptrs[c] : ptrs[c + 1]], c] = values[ptrs[c] : ptrs[c + 1]]
    return out


def _read(path):
    """(metadata dict, the data row as a dict) of a model saved at the local ``path``."""
    (meta_file,) = glob.glob(os.path.join(path, "metadata", "part-*"))
    with open(meta_file) as f:
        metadata = json.loads(f.readline())
    files = sorted(glob.glob(os.path.join(path, "data", "*.parquet")))
    rows = pa.concat_tables([pq.read_table(f) for f in files]).to_pylist()
    if len(rows) != 1:
        raise ValueError(f"{path}: expected one data row, found {len(rows)}")
    return metadata, rows[0]


def _param(metadata, name, default=None):
    for key in ("paramMap", "defaultParamMap"):
        if name in metadata.get(key, {}):
            return metadata[key][name]
    return default


@dataclass
class Scorer:
    """What ``batch_scoring.scores`` needs for one model, and the columns it outputs."""

    model_class: str
    kind: str
    coef: np.ndarray
    intercept: np.ndarray
    outputs: tuple[str, ...]
    raw_threshold: float = 0.0
    thresholds: np.ndarray | None = None
    feature_map: Any = None
    platt: np.ndarray | None = None
    kernel_block: bool = False
    pairs: list | None = None  # one-vs-one KernelSVC: the class pairs of its problems
    num_classes: int | None = None
    _fingerprint: str | None = None  # of a kernel model's arrays: hashed once, not per request

    @property
    def n_features(self) -> int:
        from sparkml.gpu.feature_maps import input_features

        return int(self.coef.shape[1]) if self.feature_map is None else input_features(self.feature_map)

    def score(self, x) -> dict[str, np.ndarray]:
        """{output name: array} for the rows of ``x`` (n, d): ``prediction`` (n,), ``rawPrediction`` and
        ``probability`` (n, k) where the model has them."""
        from sparkml.batch_scoring import fingerprint, scores

        x = np.ascontiguousarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.n_features:
            raise ValueError(f"features must be rows of {self.n_features} numbers; got an array of shape {x.shape}")
        n, d = x.shape
        features = pa.ListArray.from_arrays(pa.array(np.arange(0, n * d + 1, d, dtype=np.int32)), pa.array(x.ravel()))
        if self.feature_map is not None and self._fingerprint is None:
            self._fingerprint = fingerprint(self.feature_map, self.coef, self.intercept)
        out = scores(
            features,
            self.kind,
            self.coef,
            self.intercept,
            self.raw_threshold,
            self.thresholds,
            "features",
            self.feature_map,
            self.platt,
            self.kernel_block,
            self._fingerprint,
            "cpu",
            self.pairs,
            self.num_classes,
        )
        result = {}
        for key in ("raw", "prob", "pred"):
            if OUTPUTS[key] not in self.outputs:
                continue
            column = out.field(key)
            result[OUTPUTS[key]] = (
                column.to_numpy(zero_copy_only=False)
                if key == "pred"
                else np.asarray(column.flatten().to_numpy(zero_copy_only=False)).reshape(n, -1)
            )
        return result


def load(path) -> Scorer:
    """The ``Scorer`` of the model this library saved at the local ``path``."""
    from sparkml.batch_scoring import kernel_scoring_inputs, logistic_raw_threshold
    from sparkml.gpu.feature_maps import FourierSpec, NystroemSpec

    metadata, row = _read(path)
    cls = metadata["class"].rsplit(".", 1)[-1]
    if cls == "LogisticRegressionModel":
        multinomial = bool(row["isMultinomial"])
        raw_threshold = logistic_raw_threshold(_param(metadata, "threshold", 0.5))
        thresholds = _param(metadata, "thresholds") if "thresholds" in metadata.get("paramMap", {}) else None
        return Scorer(
            cls,
            "logistic",
            _matrix(row["coefficientMatrix"]),
            _vector(row["interceptVector"]),
            ("rawPrediction", "probability", "prediction"),
            raw_threshold=0.0 if multinomial else raw_threshold,
            thresholds=None if not multinomial or thresholds is None else np.asarray(thresholds, dtype=np.float64),
        )
    if cls == "LinearSVCModel":
        return Scorer(
            cls,
            "svc",
            _vector(row["coefficients"])[None, :],
            np.array([float(row["intercept"])]),
            ("rawPrediction", "prediction"),
            raw_threshold=float(_param(metadata, "threshold", 0.0)),
        )
    if cls == "LinearRegressionModel":
        return Scorer(
            cls,
            "regression",
            _vector(row["coefficients"])[None, :],
            np.array([float(row["intercept"])]),
            ("prediction",),
        )
    if cls == "KernelSVCModel":
        coef = _matrix(row["coefficientMatrix"])
        platt = None if row["platt"] is None else _matrix(row["platt"])
        outputs = (
            ("rawPrediction", "probability", "prediction") if platt is not None else ("rawPrediction", "prediction")
        )
        spec: FourierSpec | NystroemSpec
        if row["method"] == "rff":
            spec = FourierSpec(row["kernel"], _matrix(row["basis"]).T, _vector(row["offsets"]))
        else:
            spec = NystroemSpec(
                row["kernel"],
                _matrix(row["basis"]),
                _matrix(row["projection"]),
                row["gamma"],
                row["degree"],
                row["coef0"],
            )
        coef, spec, kernel_block = kernel_scoring_inputs(spec, coef)  # as KernelSVCModel.transform scores
        threshold = float(_param(metadata, "threshold", 0.0))
        intercepts = _vector(row["interceptVector"])
        pairs = None if row.get("pairs") is None else [tuple(p) for p in _matrix(row["pairs"]).tolist()]
        return Scorer(
            cls, "svc", coef, intercepts, outputs, threshold, None, spec, platt, kernel_block, pairs, row["numClasses"]
        )
    raise ValueError(f"{path}: a {metadata['class']} is not a model this library scores without Spark")


class PandasModel:
    """MLflow's ``python_function`` model: ``predict(df)`` of a pandas DataFrame whose ``features`` column holds
    each row's feature values (a list or array), returning a DataFrame of the model's output columns
    (``prediction``; ``rawPrediction`` and ``probability`` as lists, where the model has them)."""

    def __init__(self, scorer: Scorer):
        self.scorer = scorer

    def predict(self, model_input, params=None):
        import pandas as pd

        if not isinstance(model_input, pd.DataFrame) or "features" not in model_input.columns:
            raise ValueError("the input must be a DataFrame with a 'features' column of feature value lists")
        x = np.array([np.asarray(v, dtype=np.float64) for v in model_input["features"]])
        x = x.reshape(len(model_input), -1) if len(model_input) else np.zeros((0, self.scorer.n_features))
        out = self.scorer.score(x)
        return pd.DataFrame({k: (list(v) if v.ndim == 2 else v) for k, v in out.items()}, index=model_input.index)


def _load_pyfunc(path):
    """MLflow's entry point for the ``python_function`` flavor logged by ``sparkml.mlflow.log_model``."""
    return PandasModel(load(path))
