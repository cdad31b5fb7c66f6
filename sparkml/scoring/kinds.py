"""The output columns and the model kinds, declared once: adding an output or a kind touches this module only.

``OUTPUTS``: the columns a model adds, MLlib's names and types (``rawPrediction`` and ``probability``
vectors, ``prediction`` a double). ``KINDS``: how each kind maps the (n, K) margins M of its problems to
them (``sparkml.gpu.prediction`` holds the math, in float64 so scores match MLlib's):

* ``logistic``: binary (K = 1, m = M[:, 0]): raw [-m, m], probability [1 - s(m), s(m)] with s the sigmoid,
  prediction 1 iff m > raw threshold; multinomial: raw M, probability MLlib's softmax (+-inf and NaN
  margins as MLlib's), prediction MLlib's argmax of M, or of the probabilities divided by ``thresholds``;
* ``svc``: binary: raw [-m, m], prediction 1 iff m > threshold; one-vs-rest: raw M, prediction the argmax;
  with Platt pairs (a_k, b_k), probability sigmoid(a_k M_k + b_k) (binary [1 - q, q], else normalized);
* ``svc_one_vs_one``: raw the pairs' votes plus confidences (``one_vs_one_scores``), prediction the argmax;
  with Platt pairs, probability the pairs' sigmoids coupled (``pairwise_coupling``);
* ``regression``: prediction g^-1(m), g the spec's link, kept in its family's range (gaussian and identity:
  the margin); a generalized linear model's margins include the row's offset.

The DataFrame path, the executors' batches, the stacked scoring and serving read these tables and name no kind
or output themselves.
"""

from __future__ import annotations

import torch

from sparkml.gpu.glm import Link, family_of
from sparkml.gpu.prediction import (
    binary_logistic_probability,
    mllib_argmax,
    one_vs_one_scores,
    platt_probability,
    softmax_probability,
)
from sparkml.scoring.spec import Kind, Output, ScoringSpec

OUTPUTS: dict[str, Output] = {
    o.key: o
    for o in (
        Output("raw", "rawPrediction", "rawPredictionCol", vector=True),
        Output("prob", "probability", "probabilityCol", vector=True),
        Output("pred", "prediction", "predictionCol", vector=False),
    )
}


def _binary(m, raw_threshold):
    """raw [-m, m] and prediction 1 iff m > ``raw_threshold`` of binary margins ``m`` (n,)."""
    return torch.stack([-m, m], dim=1), (m > raw_threshold).to(torch.float64)


def _platt(margins, spec):
    return {} if spec.platt is None else {"prob": platt_probability(margins, torch.from_numpy(spec.platt))}


def _logistic(margins, spec: ScoringSpec):
    if margins.shape[1] == 1:
        m = margins[:, 0]
        raw, pred = _binary(m, spec.raw_threshold)
        p = binary_logistic_probability(m)
        return {"raw": raw, "prob": torch.stack([1 - p, p], dim=1), "pred": pred}
    prob = softmax_probability(margins)
    if spec.thresholds is not None:
        pred = mllib_argmax(prob / torch.from_numpy(spec.thresholds), nan_first_wins=False)
    else:
        pred = mllib_argmax(margins)
    return {"raw": margins, "prob": prob, "pred": pred}


def _svc(margins, spec: ScoringSpec):
    if margins.shape[1] == 1:
        raw, pred = _binary(margins[:, 0], spec.raw_threshold)
    else:  # one-vs-rest
        raw, pred = margins, torch.argmax(margins, dim=1).to(torch.float64)
    return {"raw": raw, "pred": pred, **_platt(margins, spec)}


def _svc_one_vs_one(margins, spec: ScoringSpec):
    raw = one_vs_one_scores(margins, spec.pairs, spec.num_classes)
    out = {"raw": raw, "pred": torch.argmax(raw, dim=1).to(torch.float64)}
    if spec.platt is not None:
        out["prob"] = platt_probability(margins, torch.from_numpy(spec.platt), spec.pairs, spec.num_classes)
    return out


def _regression(margins, spec: ScoringSpec):
    """The mean of a generalized linear model from its linear predictor, as MLlib's ``fitted``: the family's
    projection of g^-1(eta) (``sparkml.gpu.glm``); the margin itself for the gaussian family's identity link."""
    eta = margins[:, 0]
    if spec.family == "gaussian" and spec.link == "identity":
        return {"pred": eta}
    family = family_of(spec.family, spec.variance_power)
    return {"pred": family.project(Link(spec.link, spec.link_power).unlink(eta))}


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("logistic", ("raw", "prob", "pred"), _logistic),
        Kind("svc", ("raw", "prob", "pred"), _svc, platt_outputs=("prob",)),
        Kind("svc_one_vs_one", ("raw", "prob", "pred"), _svc_one_vs_one, platt_outputs=("prob",)),
        Kind("regression", ("pred",), _regression),
    )
}
