"""Scoring a saved model without Spark: pandas rows in, MLlib's output columns out.

A model saved by this library (``model.save(path)``: MLlib's layout, ``metadata/`` JSON and ``data/`` Parquet)
is read here with pyarrow alone, and scored by the same function a Spark task runs (``batch_scoring.scores``:
numpy and torch on the CPU), so the outputs are ``transform``'s. This is MLflow's ``python_function`` flavor
of the models (``sparkml.mlflow.log_model``): MLflow loads it through ``_load_pyfunc``, the flavor's
loader module, and no model object is pickled. pyspark is not needed.

``load`` checks the files as ``Model.load`` does (``sparkml.model_files``, the same checks and messages): a
damaged or foreign directory is a ``ModelFileError`` (a ValueError) naming the file and the problem, and
nothing in the files is imported, evaluated or unpickled.

What each saved class scores with (its ``_transform``'s arguments), read from its data row and Params:

* ``LogisticRegressionModel``: margins x B^T + b; binary: raw [-m, m], probability, prediction at MLlib's
  ``threshold`` (as a margin: log(t / (1 - t))); multinomial: MLlib's softmax, argmax (``thresholds`` scale it);
* ``LinearSVCModel``: raw [-m, m], prediction m > ``threshold``;
* ``LinearRegressionModel``: prediction x . beta + b;
* ``KernelSVCModel``: the kernel features of x (Nystroem: K(x, L) with the projection folded into the
  coefficients; random Fourier features), then as LinearSVC, Platt's probability when fitted with one.

The input rows: an (n, d) array, or a pandas ``features`` column of lists or arrays of d numbers. A row of
another length, a null row or a value that is not a number is a ValueError naming the column and the row; no
rows give empty outputs of the model's columns and types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from sparkml.mllib_structs import matrix_array as _matrix
from sparkml.mllib_structs import vector_array as _vector
from sparkml.model_files import LocalFiles, ModelFileError
from sparkml.saved_classes import SAVED

OUTPUTS = {"raw": "rawPrediction", "prob": "probability", "pred": "prediction"}
FEATURES = "features"


def feature_rows(rows, n_features, column=FEATURES) -> np.ndarray:
    """The (n, ``n_features``) float64 array of ``rows`` (an array, or a sequence of lists or arrays of
    numbers); ValueError naming ``column`` and the first row that is not a list of ``n_features`` numbers."""
    given = rows if isinstance(rows, np.ndarray) and rows.ndim == 2 else list(rows)
    try:
        x = _numeric(np.asarray(given) if len(given) else np.zeros((0, n_features)))
    except ValueError:  # ragged
        x = None
    if x is None or x.ndim != 2 or x.shape[1] != n_features:
        _refuse_row(given, n_features, column)
    return np.ascontiguousarray(x, dtype=np.float64)


def _numeric(a):
    """``a`` as a numeric array, or None where it holds something else than numbers (an object array of
    numbers converts)."""
    if a.dtype.kind in "iuf":
        return a
    if a.dtype.kind == "O" and all(_is_number(v) for v in a.flat):
        return a.astype(np.float64)
    return None


def _refuse_row(rows, n_features, column):
    """ValueError naming the first of ``rows`` that is not a flat list of ``n_features`` numbers."""
    expected = f"the model takes rows of {n_features} numbers"
    for i, row in enumerate(rows):
        problem = None
        if row is None:
            problem = "is null"
        elif not isinstance(row, (list, tuple, np.ndarray)):
            problem = f"is {row!r}, not a list of numbers"
        else:
            values = np.asarray(row, dtype=object)
            if values.ndim != 1:
                problem = "is not a flat list of numbers"
            elif _numeric(values) is None:
                problem = f"holds {next(v for v in values if not _is_number(v))!r}, not a number"
            elif len(values) != n_features:
                problem = f"has {len(values)} values"
        if problem:
            raise ValueError(f"features column {column!r}: row {i} {problem}; {expected}")
    raise ValueError(f"features column {column!r}: {expected}")


def _is_number(v):
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


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
    num_classes: int | None = None  # a classifier's: the width of rawPrediction and probability
    _fingerprint: str | None = None  # of a kernel model's arrays: hashed once, not per request

    @property
    def n_features(self) -> int:
        from sparkml.gpu.feature_maps import input_features

        return int(self.coef.shape[1]) if self.feature_map is None else input_features(self.feature_map)

    def score(self, x) -> dict[str, np.ndarray]:
        """{output name: array} for the rows of ``x`` ((n, d), or n rows of d numbers): ``prediction``
        (n,), ``rawPrediction`` and ``probability`` (n, k) where the model has them; n may be 0."""
        from sparkml.batch_scoring import fingerprint, scores

        x = feature_rows(x, self.n_features)
        n, d = x.shape
        if n == 0:
            return {name: np.zeros((0, self.num_classes or 0) if name != "prediction" else 0) for name in self.outputs}
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
            FEATURES,
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


def _binary_logistic_threshold(params):
    """MLlib's binary threshold (pyspark's ``getThreshold``): from ``thresholds`` (t0, t1) when set, as
    1 / (1 + t0 / t1), else ``threshold``."""
    thresholds = params.get("thresholds")
    if thresholds is not None:
        t0, t1 = thresholds
        return 1.0 / (1.0 + t0 / t1) if t1 != 0 else 0.0  # t0 / 0 = inf in the JVM
    return params.get("threshold", 0.5)


def load(path) -> Scorer:
    """The ``Scorer`` of the model this library (or MLlib: LogisticRegression, LinearSVC, LinearRegression)
    saved at the local ``path``, after the checks ``Model.load`` makes: ``ModelFileError`` (a ValueError)
    naming the file and the problem when the directory is damaged or not such a model."""
    from sparkml.batch_scoring import kernel_scoring_inputs, logistic_raw_threshold
    from sparkml.gpu.feature_maps import FourierSpec, NystroemSpec

    saved = LocalFiles(path).read({c.saved_class: c.sparkml_class for c in SAVED.values()}, SAVED.__getitem__)
    row, params, cls = saved.row, saved.params, saved.spec.name
    if cls == "LogisticRegressionModel":
        multinomial = bool(row["isMultinomial"])
        thresholds = params.get("thresholds") if multinomial else None
        return Scorer(
            cls,
            "logistic",
            _matrix(row["coefficientMatrix"]),
            _vector(row["interceptVector"]),
            ("rawPrediction", "probability", "prediction"),
            raw_threshold=0.0 if multinomial else logistic_raw_threshold(_binary_logistic_threshold(params)),
            thresholds=None if thresholds is None else np.asarray(thresholds, dtype=np.float64),
            num_classes=int(row["numClasses"]),
        )
    if cls == "LinearSVCModel":
        return Scorer(
            cls,
            "svc",
            _vector(row["coefficients"])[None, :],
            np.array([float(row["intercept"])]),
            ("rawPrediction", "prediction"),
            raw_threshold=float(params.get("threshold", 0.0)),
            num_classes=2,
        )
    if cls == "LinearRegressionModel":
        return Scorer(
            cls,
            "regression",
            _vector(row["coefficients"])[None, :],
            np.array([float(row["intercept"])]),
            ("prediction",),
        )
    coef = _matrix(row["coefficientMatrix"])  # KernelSVCModel
    platt = None if row["platt"] is None else _matrix(row["platt"])
    outputs = ("rawPrediction", "probability", "prediction") if platt is not None else ("rawPrediction", "prediction")
    spec: FourierSpec | NystroemSpec
    if row["method"] == "rff":
        spec = FourierSpec(row["kernel"], _matrix(row["basis"]).T, _vector(row["offsets"]))
    else:
        spec = NystroemSpec(
            row["kernel"], _matrix(row["basis"]), _matrix(row["projection"]), row["gamma"], row["degree"], row["coef0"]
        )
    coef, spec, kernel_block = kernel_scoring_inputs(spec, coef)  # as KernelSVCModel.transform scores
    threshold = float(params.get("threshold", 0.0))
    intercepts = _vector(row["interceptVector"])
    pairs = None if row.get("pairs") is None else [tuple(p) for p in _matrix(row["pairs"]).tolist()]
    return Scorer(
        cls, "svc", coef, intercepts, outputs, threshold, None, spec, platt, kernel_block, pairs, int(row["numClasses"])
    )


class PandasModel:
    """MLflow's ``python_function`` model: ``predict(df)`` of a pandas DataFrame whose ``features`` column holds
    each row's feature values (a list or array), returning a DataFrame of the model's output columns
    (``prediction``, float64; ``rawPrediction`` and ``probability``, lists, where the model has them), with
    the input's index. No rows: an empty DataFrame of those columns."""

    def __init__(self, scorer: Scorer):
        self.scorer = scorer

    def predict(self, model_input, params=None):
        import pandas as pd

        if not isinstance(model_input, pd.DataFrame) or FEATURES not in model_input.columns:
            raise ValueError("the input must be a DataFrame with a 'features' column of feature value lists")
        out = self.scorer.score(feature_rows(model_input[FEATURES], self.scorer.n_features))
        columns = {
            k: pd.Series(list(v) if v.ndim == 2 else v, index=model_input.index, dtype=object if v.ndim == 2 else None)
            for k, v in out.items()
        }
        return pd.DataFrame(columns, index=model_input.index)


def _load_pyfunc(path):
    """MLflow's entry point for the ``python_function`` flavor logged by ``sparkml.mlflow.log_model``: the
    checks of ``load``, then a ``PandasModel``."""
    return PandasModel(load(path))


__all__ = ["ModelFileError", "PandasModel", "Scorer", "load"]
