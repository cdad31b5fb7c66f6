"""``classWeight``: per-class weights on the classifiers, as scikit-learn's ``class_weight``.

Each row's weight in the objective is its ``weightCol`` value (1 without one) times the weight of its
class, so a fit with ``classWeight`` is the fit with that product as its weight column:

* a mapping ``{label: weight}``: those weights; a class the mapping leaves out weighs 1;
* ``"balanced"``: ``n / (k * n_c)`` for class c, with n the rows, k the classes present and n_c the rows
  of class c (scikit-learn's rule, which counts rows, not their ``weightCol`` weights): every class
  then carries the same total weight.

The Param holds ``"balanced"`` or the mapping with float labels; MLlib has no such Param, so it is
saved beside MLlib's Params, not among them (``base.params.TORCH_PARAM_NAMES``).

Refused, each by a ValueError naming ``classWeight``: when the Param is set, a key that is not a class
index (negative, fractional, NaN or infinite) or a weight that is negative or not finite; at the
conversion job, which reads every label anyway (``check_labels``), a key that is not a label of the
data (scikit-learn refuses it too) and weights of 0 that leave fewer than two classes with weight.
"""

from __future__ import annotations

import numpy as np

from sparkml.params.converters import BALANCED


def conversion_key(setting):
    """The setting as a conversion argument (hashable, compared by value): None, "balanced" or sorted pairs."""
    if setting is None or setting == BALANCED:
        return setting
    return tuple(sorted(setting.items()))


def resolve(setting, df, label_col):
    """{label: weight} for ``setting`` (``conversion_key``'s form) on ``df``, or None: ``"balanced"``
    counts the rows of each label (one Spark job)."""
    if setting is None:
        return None
    if setting != BALANCED:
        return dict(setting)
    from pyspark.sql import functions as F

    counts = {
        float(row[0]): int(row[1])
        for row in df.where(F.col(label_col).isNotNull()).groupBy(F.col(label_col).cast("double")).count().collect()
    }
    n, k = sum(counts.values()), len(counts)
    return {c: n / (k * n_c) for c, n_c in counts.items()}


def weighted(weight, label, weights):
    """The Column ``weight`` times the weight of ``label``'s class in ``weights`` (1 for a class not in it)."""
    from pyspark.sql import functions as F

    if not weights:
        return weight
    factor = F.lit(1.0)
    for c, w in weights.items():
        factor = F.when(label == F.lit(c), F.lit(float(w))).otherwise(factor)
    return weight * factor


def _listed(labels, most=10):
    """'0, 1, 2' for a few labels, the first ``most`` and their number for many."""
    text = ", ".join(f"{c:g}" for c in labels[:most])
    return text if len(labels) <= most else f"{text}, ... ({len(labels)} labels)"


def check_labels(weights, histograms, label_col):
    """ValueError naming ``classWeight`` when ``weights`` ({label: weight}, resolved) names a label that no
    row holds, or when its weights of 0 leave fewer than two classes with positive weight (a classifier
    needs two). ``histograms``: (the rows of each label 0, 1, ..., their weights, class weights included),
    the conversion's (``statistics.label_histograms``); None when the labels are not all class indices,
    which the estimators' label checks refuse (``base.validation``)."""
    if not weights or histograms is None:
        return
    counts, weighted = histograms
    labels = [float(c) for c in np.flatnonzero(counts)]
    absent = sorted(c for c in weights if c >= len(counts) or not counts[int(c)])
    if absent:
        names = (
            f"label {absent[0]:g}, which is not a label"
            if len(absent) == 1
            else f"labels {_listed(absent)}, which are not labels"
        )
        raise ValueError(f"classWeight names {names} of the data (labels of column {label_col!r}: {_listed(labels)})")
    zeroed = [c for c in labels if weights.get(c, 1.0) == 0]
    kept = [float(c) for c in np.flatnonzero(weighted > 0)]
    if zeroed and len(kept) < 2:
        which = f"label{'s' if len(zeroed) > 1 else ''} {_listed(zeroed)}"
        left = f"a single class ({kept[0]:g})" if kept else "no class"
        raise ValueError(
            f"classWeight gives weight 0 to {which} of column {label_col!r}, which leaves {left} with positive "
            f"weight: a classifier needs at least two classes with positive weight"
        )
