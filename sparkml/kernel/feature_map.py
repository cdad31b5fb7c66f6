"""KernelSVC's feature map: fitted on the driver, applied to each partition on its executor.

``fit_feature_map`` returns the typed spec (``sparkml.gpu.feature_maps``), the shape of the
features' second moment that preconditions Newton-CG (``optim.preconditioner``), and where a landmark search
trained a stand-in classifier on the chosen landmarks, its decision functions (a start for the fit's Newton):

* Nystroem: landmarks L (``kernel.landmarks``) and K_LL^-1/2 in K_LL's eigenbasis, keeping the r
  directions with lambda >= ``NYSTROEM_RCOND`` lambda_max (``sparkml.gpu.nystroem``). The
  executors compute only K(X_p, L) (``block_features``); the projection is the blocks' right
  factor (``sparkml.gpu.factored``), so phi is never formed.
* Random Fourier features: frequencies and phases drawn from the seed (``sparkml.gpu.fourier``);
  the executors compute z(X_p) itself.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

import numpy as np

from sparkml.gpu.feature_maps import FourierSpec, NystroemSpec, RowFeatures
from sparkml.kernel.landmarks import (
    GAIN_MAX_C,
    BlockRows,
    FrameRows,
    choose_landmarks,
    grow_landmarks,
    landmark_target,
)
from sparkml.kernel.params import RFF_DEFAULT_FEATURES

if TYPE_CHECKING:
    from sparkml.data.statistics import DatasetSummary

logger = logging.getLogger("sparkml")

# Nystroem directions kept: |lambda| >= this * max |lambda| of K_LL (bounds the projection for float32 products)
NYSTROEM_RCOND = 1e-6


def fit_feature_map(est, data, summary, gamma):
    """(spec, preconditioner shape, start) for ``est``'s Params (a ``KernelSVC``) on ``data`` (a ``TrainingData``).

    The landmarks come from the rows of positive weight (k-means weighted by it): ``weightCol`` times
    ``classWeight``, as the training rows weigh; sampled from the conversion's blocks where they are dense and
    stored, else from its DataFrame (``_training_rows``). The
    shape is (None, s) with s the diagonal of the rows' average phi phi^T in K_LL's eigenbasis
    (Nystroem), or None (random Fourier features: Jacobi). ``start``: None, or (classes, alpha (k, m), b (k,)):
    the landmark search's stand-in classifiers of those landmarks (``grow_landmarks``), one per class of
    ``classes`` against the rest, f(x) = K(x, L) alpha + b (``start_coefficients`` maps them to the features)."""
    import torch

    from sparkml.gpu.fourier import RandomFourierMap
    from sparkml.gpu.nystroem import NystroemMap

    kernel = est.getKernel()
    m = est.getNumLandmarks() if est.isDefined(est.numLandmarks) else None
    if est.getMethod() == "rff":
        rff = RandomFourierMap(kernel, summary.n_features, m or RFF_DEFAULT_FEATURES, gamma=gamma, seed=est.getSeed())
        return FourierSpec(kernel, rff.frequencies.numpy(), rff.offsets.numpy()), None, None
    training = _training_rows(est, data)
    start = None
    if m is None:
        landmarks, rows, start = _grown_landmarks(est, training, summary, gamma)
    else:
        landmarks, rows = choose_landmarks(training, summary, m, est.getLandmarkSelection(), est.getSeed())
    check_kernel_reaches(kernel, landmarks, gamma, est.getDegree(), est.getCoef0(), summary)
    nystroem = NystroemMap(
        kernel,
        landmarks,
        rcond=NYSTROEM_RCOND,
        gamma=gamma,
        degree=est.getDegree(),
        coef0=est.getCoef0(),
        eigh_dtype=torch.float32 if est.getDtype() == "float32" else torch.float64,  # the features' precision
    )
    if rows is None:  # landmarks sampled from the rows: their average phi phi^T is diag(lambda) / m
        s = nystroem.gram_spectrum()[1].numpy() / len(landmarks)
    else:  # k-means centres: the diagonal of the sampled rows' average phi phi^T
        s = (nystroem.transform(torch.from_numpy(rows)) ** 2).mean(0).numpy()
    spec = NystroemSpec(kernel, landmarks, nystroem.projection.numpy(), gamma, est.getDegree(), est.getCoef0())
    return spec, (None, s), start


def start_coefficients(spec, start, classes, fit_intercept, pairs=None):
    """(k, m' + 1) coefficients on ``spec``'s Nystroem features whose decision functions are ``start``'s
    (``fit_feature_map``) for the problems of ``classes`` (each class against the rest) or, with one-vs-one ``pairs``,
    half the difference of the two classes' (f_a - f_b) / 2: about +1 on a's rows and -1 on b's; None where
    ``start`` lacks a problem's classes or there is no intercept to carry its b. K(x, L) R theta = K(x, L) alpha is
    met by theta = R^+ alpha = (R^T R)^-1 R^T alpha (R the projection, full column rank: exact where alpha is in its
    range, the closest else; the normal equations in float64, a quarter of an SVD-based least squares' time: 0.04 s
    against 0.15 s at 1000 landmarks)."""
    if start is None or not fit_intercept:
        return None
    stand_in_classes, alpha, b = start
    alpha, b = np.asarray(alpha, dtype=np.float64), np.asarray(b, dtype=np.float64)
    index = {float(c): i for i, c in enumerate(stand_in_classes)}
    if pairs is not None:
        if any(a not in index or c not in index for a, c in pairs):
            return None
        first, second = [index[a] for a, _ in pairs], [index[c] for _, c in pairs]
        alpha, b = (alpha[first] - alpha[second]) / 2, (b[first] - b[second]) / 2
    elif [float(c) for c in stand_in_classes] != [float(c) for c in classes]:
        return None
    projection = np.asarray(spec.projection, dtype=np.float64)
    theta = np.linalg.solve(projection.T @ projection, projection.T @ alpha.T).T
    return np.concatenate([theta, b[:, None]], axis=1)


# the landmarks whose kernel is checked (``check_kernel_reaches``): enough pairs, a negligible cost
_CHECKED_LANDMARKS = 500


def check_kernel_reaches(kernel, landmarks, gamma, degree, coef0, summary):
    """ValueError naming ``gamma`` when the kernel between the landmarks (up to 500 of them) is useless in
    float64: every value between two distinct landmarks 0 (the RBF kernel exp(-gamma ||x - x'||^2) underflows:
    every row's features would be 0 away from its own landmark, and NaN where rounding makes gamma ||x - x'||^2
    negative) or any value not finite (the polynomial kernel (gamma x . x' + coef0)^degree overflows)."""
    from sparkml.kernel.params import resolve_gamma

    sample = np.asarray(landmarks[:_CHECKED_LANDMARKS], dtype=np.float64)
    if len(sample) < 2:
        return
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        if kernel == "rbf":
            sq = (sample * sample).sum(1)
            dist = np.maximum(sq[:, None] + sq[None, :] - 2.0 * sample @ sample.T, 0.0)
            distinct = dist > 0
            values = np.exp(-gamma * dist[distinct])
            useless = bool(distinct.any()) and not np.any(values > 0)
            problem = "underflows to 0 between every two landmarks (exp(-gamma ||x - x'||^2))"
        else:
            dot = gamma * (sample @ sample.T) + coef0
            values = dot**degree if kernel == "polynomial" else np.tanh(dot)
            useless = not np.all(np.isfinite(values))
            problem = "is not finite between the landmarks"
    if useless:
        raise ValueError(
            f"gamma={gamma:g} is too large for these features: the {kernel} kernel {problem}, so the model could "
            f"only predict NaN or a constant; gamma='scale' gives {resolve_gamma('scale', summary):.4g} here"
        )


FEATURE_MAP_PART = "feature-map"
_SPECS = {"nystroem": NystroemSpec, "rff": FourierSpec}


def checkpointed_feature_map(checkpoint, fit):
    """``fit()`` (``fit_feature_map``'s spec, shape and start); with ``checkpoint`` (``optim.checkpoint``) the spec
    and shape a killed fit saved there when there is one, else ``fit()``'s, saved there first: a resumed fit trains
    on the features its checkpointed rounds were computed on, and skips the landmark search. A checkpointed fit
    starts its rounds from 0 (no start), so that a resumed one takes up the same rounds."""
    if checkpoint is None:
        return fit()
    saved = checkpoint.load_part(FEATURE_MAP_PART)
    if saved is not None:
        cls = _SPECS[saved["method"]]
        spec = cls(**{f.name: saved[f.name] for f in dataclasses.fields(cls)})
        return spec, None if "spectrum" not in saved else (None, saved["spectrum"]), None
    spec, shape, _ = fit()
    state = {"method": spec.method, **{f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}}
    if shape is not None:
        state["spectrum"] = np.asarray(shape[1], dtype=np.float64)
    checkpoint.save_part(FEATURE_MAP_PART, state)
    return spec, shape, None


_LANDMARK_WEIGHT = "__sparkml_landmark_weight"


def _training_rows(est, data):
    """Where the landmarks are sampled from: the conversion's blocks (``BlockRows``: one Python job over the stored
    rows, 0.1 to 0.2 s at 100k rows on 2 cores against 0.3 to 0.4 s for the DataFrame's pass) where
    ``row_sample.samples_blocks``, else its source DataFrame with the training weights (``FrameRows``)."""
    from sparkml.data.row_sample import samples_blocks

    if samples_blocks(data):
        return BlockRows(data)
    dataset, weight_col = _weighted(data.source, est._weight_col(), est.getLabelCol(), data.class_weights)
    return FrameRows(dataset, est.getFeaturesCol(), est.getLabelCol(), weight_col)


def _weighted(dataset, weight_col, label_col, class_weights):
    """(dataset, its weight column): as given without ``class_weights``, else with a column of the weights
    times the class weights."""
    if not class_weights:
        return dataset, weight_col
    from pyspark.sql import functions as F

    from sparkml.data.class_weight import weighted

    weight = F.col(weight_col).cast("double") if weight_col else F.lit(1.0)
    column = weighted(weight, F.col(label_col).cast("double"), class_weights)
    return dataset.withColumn(_LANDMARK_WEIGHT, column), _LANDMARK_WEIGHT


def _grown_landmarks(est, training: BlockRows | FrameRows, summary: DatasetSummary, gamma):
    """(landmarks, rows, start): ``grow_landmarks`` for ``est``'s Params, up to ``landmark_target`` of the rows, at
    most maxLandmarks, and the stand-in's classifiers on the landmarks kept (``fit_feature_map``'s start) where it
    was trained on them. Memory does not bound them: the kernel blocks that do not fit an executor are computed per
    pass (``sparkml.kernel.block_budget``)."""
    from sparkml.gpu.landmark_gain import HeldOutHinge
    from sparkml.gpu.nystroem import residual_fraction

    cap = max(1, est.getMaxLandmarks())
    args = {"gamma": gamma, "degree": est.getDegree(), "coef0": est.getCoef0()}
    present = [float(c) for c, w in enumerate(summary.class_weights) if w > 0]
    # one-vs-rest problems, whichever multiClass the solve runs, unweighted: the stand-in only prices the landmarks
    classes = [1.0] if len(summary.class_weights) == 2 else present
    kernel = {"kind": est.getKernel(), **args}

    stand_ins = []

    def gain(train, train_labels, probe, probe_labels):
        reg = max(est.getRegParam(), 1.0 / (GAIN_MAX_C * len(train)))  # the stand-in's own rows: no free fit
        stand_ins.append(HeldOutHinge(train, train_labels, probe, probe_labels, classes, reg, kernel))
        return stand_ins[-1]

    landmarks, rows, trail = grow_landmarks(
        training,
        summary,
        est.getLandmarkSelection(),
        est.getSeed(),
        lambda lm, probe: residual_fraction(est.getKernel(), lm, probe, **args),
        est.getLandmarkTol(),
        cap,
        gain=gain,
        gain_tol=est.getLandmarkGainTol(),
    )
    target = landmark_target(summary.rows, cap)
    logger.info(
        "KernelSVC: numLandmarks unset: %d landmarks (by landmarks, the relative residual trace and the stand-in "
        "classifier's held-out hinge: %s; landmarkTol %g, landmarkGainTol %g, at most %d for %d rows)",
        len(landmarks),
        ", ".join(_step_text(m, r, h, summary.rows) for m, r, h in trail),
        est.getLandmarkTol(),
        est.getLandmarkGainTol(),
        target,
        summary.rows,
    )
    decision = stand_ins[0].decision(landmarks) if stand_ins else None
    start = None if decision is None else (classes, decision[0].numpy(), decision[1].numpy())
    return landmarks, rows, start


def _step_text(m, residual, hinge, rows):
    """One step of the landmark search as the fit logs it."""
    if residual is None:
        return f"{m}: {'every row' if m == rows else 'the target'}"
    return f"{m}: {residual:.4f}" + ("" if hinge is None else f" / {hinge:.4f}")


def block_features(spec):
    """The function ``TrainingData.derive`` applies to a partition's rows on its executor: their Nystroem kernel
    block K(rows, L) (the projection is the right factor, shipped apart), or their random Fourier features
    (``sparkml.gpu.feature_maps.RowFeatures``, picklable into a broadcast)."""
    return RowFeatures(spec)
