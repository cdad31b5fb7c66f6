"""The checks of a fit's data, and their messages, made before any iteration runs.

* The DataFrame's schema (``check_schema``): the columns exist and have usable types.
* The data (``check_conversion``): what the conversion pass counted on the executors (null, NaN
  or infinite values, ragged vectors, negative weights, an empty dataset, no weight), and the
  ``classWeight`` keys against the labels it counted (``data.class_weight.check_labels``).

Each raises ``ValueError`` naming the column and the problem. The Params' and labels' checks are the
estimators' (``sparkml.base.validation``).
"""

import re

from pyspark.ml.linalg import VectorUDT
from pyspark.sql.types import NumericType


def check_schema(df, features_col, label_col, weight_col, offset_col=None):
    """The columns exist; features is a Vector column, label, weight and offset numeric."""
    fields = {f.name: f.dataType for f in df.schema.fields}
    for role, col in (("features", features_col), ("label", label_col), ("weight", weight_col), ("offset", offset_col)):
        if col and col not in fields:
            raise ValueError(f"{role} column {col!r} is not in the DataFrame (columns: {', '.join(fields)})")
    if not isinstance(fields[features_col], VectorUDT):
        raise ValueError(
            f"features column {features_col!r} must be a pyspark.ml.linalg Vector column, got "
            f"{fields[features_col].simpleString()} (assemble columns with VectorAssembler)"
        )
    for role, col in (("label", label_col), ("weight", weight_col), ("offset", offset_col)):
        if col and not isinstance(fields[col], NumericType):
            raise ValueError(f"{role} column {col!r} must be numeric, got {fields[col].simpleString()}")


# the features arrive in the storage dtype: float32 holds no finite value beyond this
_FLOAT32_HINT = (
    "; in dtype='float32' (the default) a value beyond +-3.4e38 is infinite too: set dtype='float64' for such features"
)


def _problem_message(key, value, features_col, label_col, weight_col, offset_col=None, dtype=None):
    if key == "feature_sizes":  # value: the sizes seen (the other keys count rows)
        return ragged_features_message(features_col, value)
    if key == "nonfinite_features" and str(dtype) == "float32":
        return f"features column {features_col!r} has {value} NaN or infinite values{_FLOAT32_HINT}"
    return {
        "null_features": f"features column {features_col!r} has {value} null rows",
        "invalid_sparse_features": invalid_sparse_message(features_col, f"{value} of its vectors"),
        "nonfinite_features": f"features column {features_col!r} has {value} NaN or infinite values",
        "null_labels": f"label column {label_col!r} has {value} null values",
        "nonfinite_labels": f"label column {label_col!r} has {value} NaN or infinite values",
        "null_weights": f"weight column {weight_col!r} has {value} null values",
        "negative_weights": f"weight column {weight_col!r} has {value} negative values",
        "nonfinite_weights": f"weight column {weight_col!r} has {value} NaN or infinite values",
        "bad_offsets": f"offsetCol {offset_col!r} has {value} null, NaN or infinite values: offsets must be numbers",
    }[key]


def invalid_sparse_message(features_col, which, detail=""):
    """An invalid sparse vector (pyspark's and MLlib's SparseVector refuse them; built past their checks)."""
    return (
        f"features column {features_col!r} holds invalid sparse vectors ({which}): indices must be one per "
        f"value, in [0, size) and strictly increasing, the size >= 0" + (f"; {detail}" if detail else "")
    )


# what MLlib's SparseVector (Scala) refuses, as the dense path's vector_to_array meets it in the JVM
_JVM_INVALID_SPARSE = re.compile(
    r"requirement failed: ((?:Index -?\d+ follows -?\d+ and is not strictly increasing|Found negative index|"
    r"Index -?\d+ out of bounds for vector of size|Sparse vectors require that the dimension of the indices|"
    r"You provided \d+ indices and values, which exceeds|The size of the requested sparse vector)[^\n]*)"
)


def jvm_invalid_sparse(error):
    """What MLlib's SparseVector said of an invalid vector, read from a JVM error (``vector_to_array`` met it),
    or None when ``error`` is not that."""
    found = _JVM_INVALID_SPARSE.search(str(error))
    return found.group(1) if found else None


def ragged_features_message(features_col, sizes):
    return f"features column {features_col!r} holds vectors of different sizes ({', '.join(map(str, sizes))})"


def check_conversion(
    infos, problem_keys, features_col, label_col, weight_col, check_labels=None, offset_col=None, dtype=None
):
    """ValueError for the first problem the conversion's partitions counted (``infos``: one dict per
    partition, ``problem_keys`` in the order they are reported; ``dtype``: the features' storage), then for
    ragged sizes across partitions, an empty dataset, ``check_labels()`` when given (``classWeight``'s checks,
    whose weights of 0 can be why no row carries weight) and a zero weight sum."""
    for key in problem_keys:
        values = [i[key] for i in infos if i.get(key)]
        if values:
            value = sorted({s for v in values for s in v}) if key == "feature_sizes" else sum(values)
            raise ValueError(_problem_message(key, value, features_col, label_col, weight_col, offset_col, dtype))
    live = [i for i in infos if i["rows"]]
    sizes = {i["n_features"] for i in live}
    if not sizes:
        raise ValueError("the training dataset is empty: no rows to fit on")
    if len(sizes) > 1:
        raise ValueError(ragged_features_message(features_col, sorted(sizes)))
    if check_labels is not None:
        check_labels()
    if sum(i["w_sum"] for i in live) <= 0:
        raise ValueError(f"the sum of the weights is 0 (weight column {weight_col!r}): no row carries any weight")
