"""Label checks of each model, from the statistics of the conversion pass (before any iteration).

The generic checks (nulls, NaN or infinite values, ragged vectors, negative weights, an empty
dataset) run in ``sparkml.data``; these are the ones that depend on the model.
"""


def classification_labels(summary, label_col, family="auto"):
    """Number of classes; ValueError unless labels are 0..K-1 with at least two classes present."""
    if not summary.label_integral or summary.label_min < 0:
        raise ValueError(
            f"label column {label_col!r} must hold class indices 0, 1, ..., K-1; "
            f"found {'negative' if summary.label_min < 0 else 'non-integer'} labels "
            f"(min {summary.label_min:g}, max {summary.label_max:g}); index string labels with StringIndexer"
        )
    num_classes = int(summary.label_max) + 1
    if family == "binomial" and num_classes > 2:
        raise ValueError(
            f"label column {label_col!r} has labels up to {summary.label_max:g}, but family='binomial' "
            f"needs labels in {{0, 1}}; use family='multinomial' or 'auto'"
        )
    present = int((summary.class_weights > 0).sum()) if len(summary.class_weights) else 0
    if present < 2:
        raise ValueError(
            f"label column {label_col!r} has a single class ({summary.label_max:g}): "
            f"a classifier needs at least two classes with positive weight"
        )
    return max(num_classes, 2)


def binary_labels(summary, label_col, model="LinearSVC"):
    """ValueError unless labels are exactly 0/1 and both are present."""
    if not summary.label_integral or summary.label_min < 0 or summary.label_max > 1:
        raise ValueError(
            f"{model} is a binary classifier: label column {label_col!r} must hold 0 or 1; "
            f"found labels in [{summary.label_min:g}, {summary.label_max:g}]"
        )
    return classification_labels(summary, label_col, "binomial")
