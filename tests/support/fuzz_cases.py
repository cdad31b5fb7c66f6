"""The generated cases of tests/test_fuzz_conversion.py: a small frame for one model, corrupted in 0 to 3
ways (``CORRUPTIONS``), the hypothesis strategy that draws them (``cases``) and the oracle that reads the
corrupted rows (``expected_problems``): the (column, word) pairs that are wrong with them."""

import bisect
import math
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

MODELS = ("linear", "binomial", "multinomial", "svc")
MAX_CLASSES = 10_000  # more class indices than this are refused (statistics.MAX_CLASSES)
FEATURE_CORRUPTIONS = (
    "nan_feature",
    "inf_feature",
    "neg_inf_feature",
    "null_features",
    "wider_vector",
    "narrower_vector",
    "index_out_of_range",
    "index_equals_size",
    "negative_index",
    "unsorted_indices",
    "duplicate_index",
    "indices_values_mismatch",
    "negative_size",
)
LABEL_CORRUPTIONS = (
    "null_label",
    "nan_label",
    "inf_label",
    "label_2",
    "label_minus_1",
    "label_half",
    "label_7",
    "label_20000",
)
WEIGHT_CORRUPTIONS = (
    "null_weight",
    "nan_weight",
    "inf_weight",
    "negative_weight",
    "zero_weight",
    "all_weights_zero",
    "class_weights_zero",
)
CORRUPTIONS = FEATURE_CORRUPTIONS + LABEL_CORRUPTIONS + WEIGHT_CORRUPTIONS


# ---- the generated case -------------------------------------------------------------------------------------


@dataclass
class Case:
    model: str
    d: int
    weighted: bool
    dtype: str
    parts: list  # one list per partition of [features, label, weight]; features None, ("dense", values)
    # or ("sparse", size, indices, values)
    corruptions: list = field(default_factory=list)

    def rows(self):
        return [r for part in self.parts for r in part]

    def __repr__(self):  # hypothesis prints the falsifying example: keep it readable
        sizes = [len(p) for p in self.parts]
        return (
            f"Case(model={self.model!r}, d={self.d}, weighted={self.weighted}, dtype={self.dtype!r}, "
            f"partition_sizes={sizes}, corruptions={self.corruptions})"
        )


def _sparse_of(values):
    idx = [j for j, v in enumerate(values) if v != 0]
    return ("sparse", len(values), idx, [values[j] for j in idx])


def _clean_case(model, n, d, layout, n_parts, placement, weighted, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * rng.uniform(0.5, 2.0, d) + rng.uniform(-1, 1, d)
    if layout != "dense":
        x[rng.random((n, d)) < 0.4] = 0.0
    beta = rng.normal(size=d)
    score = x @ beta + 0.3
    if model == "linear":
        y = score + rng.normal(scale=0.3, size=n)
    elif model == "multinomial":
        y = np.argmax(np.stack([score, -score, x[:, 0]], 1) + rng.gumbel(size=(n, 3)), 1).astype(float)
        y[:3] = [0.0, 1.0, 2.0]
    else:
        y = (score + rng.logistic(size=n) > 0).astype(float)
        y[:2] = [0.0, 1.0]
    w = rng.uniform(0.5, 2.0, n)
    if placement == "even":
        part_of = np.arange(n) * n_parts // n
    elif placement == "one":
        part_of = np.full(n, int(rng.integers(n_parts)))
    else:
        part_of = rng.integers(0, n_parts, n)
    first = min(range(n), key=lambda i: (part_of[i], i))  # the DataFrame's first row: the library's
    parts = [[] for _ in range(n_parts)]  # sparse-or-dense choice reads it
    for i in sorted(range(n), key=lambda i: (part_of[i], i)):
        values = [float(v) for v in x[i]]
        first_sparse = layout in ("sparse", "mixed_sparse")
        if i == first and first_sparse:  # fewer non-zeros than half the size: CSR blocks
            values = [v if j < (d - 1) // 2 else 0.0 for j, v in enumerate(values)]
        sparse = first_sparse if i == first else (layout == "sparse" or layout != "dense" and rng.random() < 0.5)
        vec = _sparse_of(values) if sparse else ("dense", values)
        parts[part_of[i]].append([vec, float(y[i]), float(w[i])])
    return Case(model, d, weighted, dtype, parts)


def _to_sparse(row):
    vec = row[0]
    if vec is None:
        return None
    if vec[0] == "dense":
        vec = ("sparse", len(vec[1]), list(range(len(vec[1]))), list(vec[1]))
        row[0] = vec
    return vec


def _set_entry(row, j, value):
    vec = row[0]
    if vec is None:
        return
    if vec[0] == "dense":
        if j < len(vec[1]):
            vec[1][j] = value
        return
    _, size, idx, vals = vec
    if j in idx:
        vals[idx.index(j)] = value
    elif len(idx) == len(vals):
        k = bisect.bisect_left(idx, j) if idx == sorted(idx) else len(idx)
        idx.insert(k, j)
        vals.insert(k, value)


def corrupt(case, kind, i, p):
    """Apply corruption ``kind`` to row ``i`` (``p``: a free number choosing the column or variant)."""
    rows = case.rows()
    row, d = rows[i], case.d
    j = p % d
    if kind in ("nan_feature", "inf_feature", "neg_inf_feature"):
        _set_entry(row, j, {"nan_feature": math.nan, "inf_feature": math.inf, "neg_inf_feature": -math.inf}[kind])
    elif kind == "null_features":
        row[0] = None
    elif kind in ("wider_vector", "narrower_vector"):
        vec = row[0]
        if vec is None:
            return
        wider = kind == "wider_vector" or d == 1 and vec[0] == "dense"
        if vec[0] == "dense":
            vec[1][:] = vec[1] + [1.5] if wider else vec[1][:-1]
        else:
            _, size, idx, vals = vec
            new_size = size + 1 if wider else size - 1
            keep = [k for k, ix in enumerate(idx) if ix < new_size] if len(idx) == len(vals) else range(len(idx))
            row[0] = ("sparse", new_size, [idx[k] for k in keep], [vals[k] for k in keep if k < len(vals)])
    elif kind in (
        "index_out_of_range",
        "index_equals_size",
        "negative_index",
        "unsorted_indices",
        "duplicate_index",
        "indices_values_mismatch",
        "negative_size",
    ):
        vec = _to_sparse(row)
        if vec is None:
            return
        _, size, idx, vals = vec
        if kind == "index_out_of_range":
            idx.append(size + 1 + p % 5)
            vals.append(1.0)
        elif kind == "index_equals_size":
            idx.append(size)
            vals.append(2.0)
        elif kind == "negative_index":
            idx.insert(0, -1 - p % 3)
            vals.insert(0, 1.0)
        elif kind == "unsorted_indices":
            if len(idx) < 2 and size >= 2:  # two entries to swap
                idx[:], vals[:] = [0, 1], [1.0, -1.0]
            if len(idx) >= 2:
                k = p % (len(idx) - 1)
                idx[k], idx[k + 1] = idx[k + 1], idx[k]
            else:  # one feature: an unsorted pair is a repeated index
                idx[:], vals[:] = [0, 0], [1.0, 1.0]
        elif kind == "duplicate_index":
            if not idx:
                idx.append(0)
                vals.append(1.0)
            k = p % len(idx)
            idx.insert(k, idx[k])
            vals.insert(k, 0.5)
        elif kind == "indices_values_mismatch":
            if p % 2:
                vals.append(1.0)
            else:
                idx.append(size - 1 if size else 0)
        else:
            row[0] = ("sparse", -1 - p % 3, [], [])
    elif kind in (
        "null_label",
        "nan_label",
        "inf_label",
        "label_2",
        "label_minus_1",
        "label_half",
        "label_7",
        "label_20000",
    ):
        row[1] = {
            "null_label": None,
            "nan_label": math.nan,
            "inf_label": -math.inf if p % 2 else math.inf,
            "label_2": 2.0,
            "label_minus_1": -1.0,
            "label_half": 0.5,
            "label_7": 7.0,
            "label_20000": 20000.0,
        }[kind]
    elif kind in ("null_weight", "nan_weight", "inf_weight", "negative_weight", "zero_weight"):
        row[2] = {
            "null_weight": None,
            "nan_weight": math.nan,
            "inf_weight": math.inf,
            "negative_weight": -0.5 - p % 3,
            "zero_weight": 0.0,
        }[kind]
    elif kind == "all_weights_zero":
        for r in rows:
            r[2] = 0.0
    elif kind == "class_weights_zero":
        for r in rows:
            if r[1] == 1.0:
                r[2] = 0.0
    else:
        raise AssertionError(kind)


@st.composite
def cases(draw, models=MODELS):
    model = draw(st.sampled_from(models))
    n = draw(st.integers(20, 200))
    d = draw(st.integers(1, 6))
    layout = draw(st.sampled_from(("dense", "sparse", "mixed_dense", "mixed_sparse")))
    n_parts = draw(st.integers(1, 4))
    placement = draw(st.sampled_from(("even", "one", "random")))
    weighted = draw(st.booleans())
    dtype = draw(st.sampled_from(("float64", "float32")))
    seed = draw(st.integers(0, 2**32 - 1))
    case = _clean_case(model, n, d, layout, n_parts, placement, weighted, dtype, seed)
    n_corruptions = draw(st.sampled_from((0, 0, 1, 1, 1, 2, 3)))
    for _ in range(n_corruptions):
        kind = draw(st.sampled_from(CORRUPTIONS))
        i = draw(st.integers(0, n - 1))
        p = draw(st.integers(0, 1000))
        corrupt(case, kind, i, p)
        case.corruptions.append((kind, i, p))
    return case


# ---- the oracle ---------------------------------------------------------------------------------------------


def _bad_number(v):
    return None if v is None or math.isfinite(v) else ("NaN" if math.isnan(v) else "infinite")


def expected_problems(case):
    """{(column, word)}: what is wrong with the case's rows, for its model; empty when they are valid.
    Conversion problems (values, sizes, weights) first: labels are checked on data that converted."""
    rows, problems = case.rows(), set()
    sizes = set()
    for vec, y, w in rows:
        if vec is None:
            problems.add(("features", "null"))
            continue
        if vec[0] == "dense":
            values = vec[1]
            sizes.add(len(values))
        else:
            _, size, idx, values = vec
            sizes.add(size)
            increasing = all(a < b for a, b in zip(idx, idx[1:]))
            if size < 0 or len(idx) != len(values) or not increasing or any(k < 0 or k >= size for k in idx):
                problems.add(("features", "invalid sparse"))
        problems.update(("features", word) for word in map(_bad_number, values) if word)
        if y is None:
            problems.add(("label", "null"))
        elif _bad_number(y):
            problems.add(("label", _bad_number(y)))
        if case.weighted:
            if w is None:
                problems.add(("w", "null"))
            elif _bad_number(w):
                problems.add(("w", _bad_number(w)))
            elif w < 0:
                problems.add(("w", "negative"))
    if len(sizes) > 1:
        problems.add(("features", "different sizes"))
    weights = [w if case.weighted else 1.0 for _, _, w in rows]
    if not problems and sum(weights) == 0:
        problems.add(("w", "sum"))
    if problems or case.model == "linear":
        return problems
    labels = [y for _, y, _ in rows]
    if any(y != round(y) for y in labels):
        problems.add(("label", "non-integer"))
    if min(labels) < 0:
        problems.add(("label", "negative"))
    if case.model == "svc" and set(labels) - {0.0, 1.0}:
        problems.add(("label", "0 or 1"))
    if case.model == "binomial" and max(labels) > 1:
        problems.add(("label", "binomial"))
    if case.model == "multinomial" and max(labels) >= MAX_CLASSES:
        problems.add(("label", "classes"))
    if len({y for y, w in zip(labels, weights) if w > 0}) < 2:
        problems.add(("label", "single class"))
    return problems


def assert_names_a_problem(message, problems):
    named = [(col, word) for col, word in problems if f"'{col}'" in message and word in message]
    assert named, f"{message!r} names none of {sorted(problems)}"
