"""The ``ScoringSpec`` of a model directory, read with pyarrow alone (no pyspark): what ``sparkml.serving`` scores.

A model saved by this library (``model.save(path)``: MLlib's layout, ``metadata/`` JSON and ``data/`` Parquet),
or by MLlib for the three linear models, is checked as ``Model.load`` checks it (``sparkml.saved.model_files``, the
same checks and messages): a damaged or foreign directory is a ``ModelFileError`` (a ValueError) naming the file
and the problem, and nothing in the files is imported, evaluated or unpickled. Each saved class's spec is the one
its model builds (``_build_scoring_spec``), from its data row and Params:

* ``LogisticRegressionModel``: coefficientMatrix, interceptVector; binary: MLlib's ``threshold`` as a margin,
  log(t / (1 - t)); multinomial: ``thresholds``;
* ``LinearSVCModel``: coefficients, intercept, ``threshold`` on the margin;
* ``LinearRegressionModel``: coefficients, intercept;
* ``KernelSVCModel``: the feature map (Nystroem landmarks and projection, folded; random Fourier frequencies
  and offsets), coefficientMatrix, interceptVector, ``threshold``, Platt's pairs, the one-vs-one pairs.
"""

from __future__ import annotations

import numpy as np

from sparkml.gpu.glm import family_of, link_of
from sparkml.params.mllib_structs import matrix_array as _matrix
from sparkml.params.mllib_structs import vector_array as _vector
from sparkml.saved.classes import SAVED
from sparkml.saved.model_files import LocalFiles, SavedModel
from sparkml.scoring.kinds import KINDS
from sparkml.scoring.spec import ScoringSpec, kernel_spec, logistic_raw_threshold


def binary_logistic_threshold(params) -> float:
    """MLlib's binary threshold (pyspark's ``getThreshold``): from ``thresholds`` (t0, t1) when set, as
    1 / (1 + t0 / t1), else ``threshold``."""
    thresholds = params.get("thresholds")
    if thresholds is not None:
        t0, t1 = thresholds
        return 1.0 / (1.0 + t0 / t1) if t1 != 0 else 0.0  # t0 / 0 = inf in the JVM
    return params.get("threshold", 0.5)


def _kernel_svc(row, params) -> ScoringSpec:
    from sparkml.gpu.feature_maps import FourierSpec, NystroemSpec

    feature_map: FourierSpec | NystroemSpec
    if row["method"] == "rff":
        feature_map = FourierSpec(row["kernel"], _matrix(row["basis"]).T, _vector(row["offsets"]))
    else:
        feature_map = NystroemSpec(
            row["kernel"], _matrix(row["basis"]), _matrix(row["projection"]), row["gamma"], row["degree"], row["coef0"]
        )
    pairs = None if row.get("pairs") is None else [tuple(p) for p in _matrix(row["pairs"]).tolist()]
    return kernel_spec(
        KINDS["svc" if pairs is None else "svc_one_vs_one"],
        feature_map,
        _matrix(row["coefficientMatrix"]),
        _vector(row["interceptVector"]),
        raw_threshold=float(params.get("threshold", 0.0)),
        platt=None if row["platt"] is None else _matrix(row["platt"]),
        pairs=pairs,
        num_classes=int(row["numClasses"]),
    )


def _spec(cls, row, params) -> ScoringSpec:
    if cls == "LogisticRegressionModel":
        multinomial = bool(row["isMultinomial"])
        thresholds = params.get("thresholds") if multinomial else None
        return ScoringSpec(
            KINDS["logistic"],
            _matrix(row["coefficientMatrix"]),
            _vector(row["interceptVector"]),
            raw_threshold=0.0 if multinomial else logistic_raw_threshold(binary_logistic_threshold(params)),
            thresholds=thresholds,
            num_classes=int(row["numClasses"]),
        )
    if cls == "LinearSVCModel":
        return ScoringSpec(
            KINDS["svc"],
            _vector(row["coefficients"]),
            np.array([float(row["intercept"])]),
            raw_threshold=float(params.get("threshold", 0.0)),
            num_classes=2,
        )
    if cls == "GeneralizedLinearMixedModelModel":
        raise ValueError("a GeneralizedLinearMixedModelModel scores with its tables: sparkml.scoring.mixed_file")
    if cls == "LinearRegressionModel":
        return ScoringSpec(KINDS["regression"], _vector(row["coefficients"]), np.array([float(row["intercept"])]))
    if cls == "GeneralizedLinearRegressionModel":
        variance_power = float(params.get("variancePower", 0.0))
        link = link_of(params.get("family", "gaussian"), params.get("link"), params.get("linkPower"), variance_power)
        return ScoringSpec(
            KINDS["regression"],
            _vector(row["coefficients"]),
            np.array([float(row["intercept"])]),
            link=link.name,
            link_power=link.power,
            family=family_of(params.get("family", "gaussian"), variance_power).name,
            variance_power=variance_power,
            offset_col=params.get("offsetCol") or None,
        )
    return _kernel_svc(row, params)  # KernelSVCModel: SAVED holds no other class


def read_saved(path) -> SavedModel:
    """The checked metadata and data row of the model saved at the local ``path`` (module docstring)."""
    return LocalFiles(path).read({c.saved_class: c.sparkml_class for c in SAVED.values()}, SAVED.__getitem__)


def spec_of(saved: SavedModel) -> ScoringSpec:
    """The ``ScoringSpec`` of a checked model directory of one of the classes a ``ScoringSpec`` describes (all but
    the mixed model, whose tables ``sparkml.scoring.mixed_file`` reads)."""
    return _spec(saved.spec.name, saved.row, saved.params)


def read_spec(path) -> tuple[str, ScoringSpec]:
    """(class name, ``ScoringSpec``) of the model saved at the local ``path``, after the checks ``Model.load``
    makes (module docstring)."""
    saved = read_saved(path)
    return saved.spec.name, spec_of(saved)
