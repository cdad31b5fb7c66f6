"""Hostile input, fuzzed (issue 24 item 3): property-based tests (hypothesis) of the conversion of a
DataFrame into training blocks and of the checks made on what it counted.

Each example is a small frame (20-200 rows, 1-6 features, dense, sparse or mixed vectors, weighted or
not, 1-4 partitions: spread evenly, all rows in one partition, or rows placed at random, so that some
partitions are empty) for one of LinearRegression, binomial or multinomial LogisticRegression and
LinearSVC, corrupted in 0 to 3 random ways (``CORRUPTIONS``): NaN, +-inf or null in the features, the
label or the weight; vectors of another size; sparse vectors with an index out of range, a negative index,
unsorted or repeated indices, more indices than values (or the reverse), a negative size; labels outside the
model's range (2, -1, 0.5, 7, 20000); zero weights, negative weights, all weights or a whole class's weights
zero. Weight corruptions also land in an unweighted fit's ``w`` column, which must then not matter.

The oracle (``expected_problems``) reads the corrupted rows, not the library: the set of (column, word) pairs
that are wrong with them, conversion problems first (the labels are checked only on data that converts).
Then (``test_conversion_refuses_or_converts``, most examples, no iteration can run):
``TrainingData.prepare`` and the estimator's own label checks (``_problem``) either raise a ``ValueError``
whose message names one of those columns with its word, or, for valid data, the blocks read back are the
rows of each partition (in the stored dtype) and the summary is numpy's (count, weight sum, weighted mean and
variance, label range, class weights); ``test_fit_refuses_or_trains`` runs whole fits: a refused fit logs no
iteration, a valid LinearRegression (normal solver) equals numpy's weighted least squares and a valid
classifier the same estimator fitted on the clean rows in one dense partition, to 1e-6. In both, no dataset
directory created by the example is left on the executors afterwards.

Sparse vectors that pyspark would refuse are built past its checks: ``SparseVector.__init__`` checks sorted,
in-range indices, so the rows are made inside a Spark task by ``object.__new__(SparseVector)`` with ``size``,
``indices`` and ``values`` set by hand, and ``VectorUDT.serialize`` (which checks nothing) writes them as the
UDT's struct (type 0, size, indices, values). They never cross a pickle as vectors (unpickling runs the
constructor), and a struct column cannot be cast to a VectorUDT, hence ``_frame``. Rows go to their
partitions exactly: one list per partition, ``parallelize(lists, len(lists)).flatMap(build)``.

Profiles (hypothesis, ``deadline=None``, ``database=None``, ``derandomize=True``: the same examples on every
run): ``make test`` runs the default profile, ``DEFAULT_EXAMPLES`` conversion examples and ``FIT_EXAMPLES`` fits;
``SPARKML_FUZZ_PROFILE=nightly`` many more::

    .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_fuzz_conversion.py
    SPARKML_FUZZ_PROFILE=nightly .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_fuzz_conversion.py

The last test prints (and checks) how many cases each test generated, valid and refused, dense and sparse.
"""
import bisect
import logging
import math
import os
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from helpers import executor_datasets
from sparkml.classification import LinearSVC, LogisticRegression
from sparkml.data import block_store
from sparkml.data.training_data import TrainingData
from sparkml.regression import LinearRegression

PROFILE = os.environ.get("SPARKML_FUZZ_PROFILE", "default")
if PROFILE not in ("default", "nightly"):
    raise ValueError(f"SPARKML_FUZZ_PROFILE must be 'default' or 'nightly', got {PROFILE!r}")
DEFAULT_EXAMPLES = {"default": 25, "nightly": 1500}  # conversion-level examples
FIT_EXAMPLES = {"default": 2, "nightly": 200}  # whole fits
_COMMON = dict(deadline=None, database=None, derandomize=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile("sparkml-fuzz", max_examples=DEFAULT_EXAMPLES["default"], **_COMMON)
settings.register_profile("sparkml-fuzz-nightly", max_examples=DEFAULT_EXAMPLES["nightly"], **_COMMON)
FUZZ = settings.get_profile("sparkml-fuzz-nightly" if PROFILE == "nightly" else "sparkml-fuzz")

MODELS = ("linear", "binomial", "multinomial", "svc")
MAX_CLASSES = 10_000  # more class indices than this are refused (statistics.MAX_CLASSES)
FEATURE_CORRUPTIONS = ("nan_feature", "inf_feature", "neg_inf_feature", "null_features", "wider_vector",
                       "narrower_vector", "index_out_of_range", "index_equals_size", "negative_index",
                       "unsorted_indices", "duplicate_index", "indices_values_mismatch", "negative_size")
LABEL_CORRUPTIONS = ("null_label", "nan_label", "inf_label", "label_2", "label_minus_1", "label_half", "label_7",
                     "label_20000")
WEIGHT_CORRUPTIONS = ("null_weight", "nan_weight", "inf_weight", "negative_weight", "zero_weight",
                      "all_weights_zero", "class_weights_zero")
CORRUPTIONS = FEATURE_CORRUPTIONS + LABEL_CORRUPTIONS + WEIGHT_CORRUPTIONS

COUNTS = Counter()  # (test, outcome) -> examples run, reported by the last test
CREATED = []  # every dataset id the examples asked the block store for


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
        return (f"Case(model={self.model!r}, d={self.d}, weighted={self.weighted}, dtype={self.dtype!r}, "
                f"partition_sizes={sizes}, corruptions={self.corruptions})")


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
    parts = [[] for _ in range(n_parts)]                   # sparse-or-dense choice reads it
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
    elif kind in ("index_out_of_range", "index_equals_size", "negative_index", "unsorted_indices",
                  "duplicate_index", "indices_values_mismatch", "negative_size"):
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
    elif kind in ("null_label", "nan_label", "inf_label", "label_2", "label_minus_1", "label_half", "label_7",
                  "label_20000"):
        row[1] = {"null_label": None, "nan_label": math.nan, "inf_label": -math.inf if p % 2 else math.inf,
                  "label_2": 2.0, "label_minus_1": -1.0, "label_half": 0.5, "label_7": 7.0,
                  "label_20000": 20000.0}[kind]
    elif kind in ("null_weight", "nan_weight", "inf_weight", "negative_weight", "zero_weight"):
        row[2] = {"null_weight": None, "nan_weight": math.nan, "inf_weight": math.inf,
                  "negative_weight": -0.5 - p % 3, "zero_weight": 0.0}[kind]
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
    seed = draw(st.integers(0, 2 ** 32 - 1))
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


# ---- Spark side ---------------------------------------------------------------------------------------------

def _frame(spark, case):
    """The case's rows as (features, label, w), each partition's rows in its partition (module docstring)."""
    from pyspark.ml.linalg import VectorUDT
    from pyspark.sql.types import DoubleType, StructField, StructType

    def build(part):
        import numpy as np
        from pyspark.ml.linalg import DenseVector, SparseVector

        out = []
        for vec, y, w in part:
            if vec is not None and vec[0] == "dense":
                vec = DenseVector(vec[1])
            elif vec is not None:  # past SparseVector.__init__'s checks: VectorUDT.serialize takes it as is
                raw = object.__new__(SparseVector)
                raw.size = vec[1]
                raw.indices = np.asarray(vec[2], dtype=np.int32)
                raw.values = np.asarray(vec[3], dtype=np.float64)
                vec = raw
            out.append((vec, y, w))
        return out

    schema = StructType([StructField("features", VectorUDT()), StructField("label", DoubleType()),
                         StructField("w", DoubleType())])
    parts = [[list(r) for r in p] for p in case.parts]
    return spark.createDataFrame(spark.sparkContext.parallelize(parts, len(parts)).flatMap(build), schema)


def _estimator(case, **params):
    if case.weighted:
        params["weightCol"] = "w"
    if case.model == "linear":
        return LinearRegression(solver="normal", **params)
    if case.model == "svc":
        return LinearSVC(regParam=0.1, **params)
    return LogisticRegression(family="binomial" if case.model == "binomial" else "auto", regParam=0.1, **params)


def _dense_rows(case):
    """(X, y, w) of the valid case's rows, in DataFrame order; w is 1 for an unweighted case."""
    rows = case.rows()
    x = np.zeros((len(rows), case.d))
    for i, (vec, _, _) in enumerate(rows):
        if vec[0] == "dense":
            x[i] = vec[1]
        else:
            x[i, vec[2]] = vec[3]
    y = np.array([r[1] for r in rows])
    w = np.array([r[2] for r in rows]) if case.weighted else np.ones(len(rows))
    return x, y, w


def _read_blocks(data):
    """{partition: (x, y, w)} of the converted blocks, read back on the executors."""
    dataset_id = data.dataset_id

    def read(handles):
        import torch

        from sparkml.data import block_store as store

        out = []
        for row in handles:
            if row[1]:
                part = store.open_partition(dataset_id, row[0], "cpu", torch.float64)
                x = part.block.rows(0, part.n_rows).to(torch.float64).numpy()
                out.append((row[0], x.tolist(), part.y.double().numpy().tolist(), part.w.double().numpy().tolist()))
        return out

    return {p: tuple(np.array(a, dtype=float) for a in arrays) for p, *arrays in data.handles.mapPartitions(read).collect()}


class _Recorder:
    """The dataset ids the block store hands out, and the sparkml log records, while installed."""

    def __init__(self):
        self.ids, self.records = [], []

    def __enter__(self):
        original = self.original = block_store.new_dataset_id

        def record():
            self.ids.append(original())
            CREATED.append(self.ids[-1])
            return self.ids[-1]

        block_store.new_dataset_id = record
        self.handler = logging.Handler(logging.INFO)
        self.handler.emit = self.records.append
        self.logger = logging.getLogger("sparkml")
        self.old_level = self.logger.level
        self.logger.setLevel(logging.INFO)
        self.logger.addHandler(self.handler)
        return self

    def __exit__(self, *exc):
        block_store.new_dataset_id = self.original
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.old_level)

    def iterations(self):
        return [r.getMessage() for r in self.records if "iteration" in r.getMessage()]


@pytest.fixture(scope="module")
def block_roots(spark):
    """The block store's directories as the executors' Python workers see them (``block_store.root_dir``),
    found once: local[2]'s executor runs on this machine, so each example then lists them without a job."""
    def root(items):
        for _ in items:
            pass
        from sparkml.data import block_store as store

        yield store.root_dir()

    return sorted(set(spark.sparkContext.parallelize(range(2), 2).mapPartitions(root).collect()))


def assert_no_blocks_left(roots, ids):
    found = {name for r in roots if os.path.isdir(r) for name in os.listdir(r) if not name.startswith(".")}
    left = found & set(ids)
    assert not left, f"training blocks left behind: {left}"


# ---- the properties -----------------------------------------------------------------------------------------

def check_conversion_case(spark, roots, case):
    problems = expected_problems(case)
    df = _frame(spark, case)
    est = _estimator(case)
    with _Recorder() as rec:
        try:
            data = TrainingData.prepare(df, "features", "label", "w" if case.weighted else None, dtype=case.dtype)
        except ValueError as e:
            assert problems, f"valid data refused: {e}"
            assert_names_a_problem(str(e), problems)
            assert_no_blocks_left(roots, rec.ids)
            COUNTS["conversion", "refused by the conversion"] += 1
            return
        try:
            blocks = _read_blocks(data) if not problems else None
            est._problem(data.summary)  # the estimator's label checks, made before its first iteration
        except ValueError as e:
            data.release()
            assert problems, f"valid data refused: {e}"
            assert_names_a_problem(str(e), problems)
            assert_no_blocks_left(roots, rec.ids)
            COUNTS["conversion", "refused by the label checks"] += 1
            return
        except BaseException:
            data.release()
            raise
        data.release()
        assert_no_blocks_left(roots, rec.ids)
        assert not problems, f"bad data converted and accepted: expected {sorted(problems)}"
    COUNTS["conversion", f"valid, {'sparse' if data.sparse else 'dense'} blocks"] += 1
    x, y, w = _dense_rows(case)
    x = x.astype(case.dtype).astype(np.float64)  # as stored
    start = 0
    for p, part in enumerate(case.parts):
        k = len(part)
        if k:
            bx, by, bw = blocks.pop(p)
            np.testing.assert_array_equal(bx, x[start:start + k])
            np.testing.assert_array_equal(by, y[start:start + k])
            np.testing.assert_array_equal(bw, w[start:start + k])
        start += k
    assert not blocks, f"blocks of partitions with no rows: {sorted(blocks)}"
    s = data.summary
    assert (s.rows, s.n_features) == (len(y), case.d)
    np.testing.assert_allclose(s.weight_sum, w.sum(), rtol=1e-12)
    mean = w @ x / w.sum()
    np.testing.assert_allclose(s.mean, mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(s.var_population, w @ (x - mean) ** 2 / w.sum(), rtol=1e-7, atol=1e-10)
    assert (s.label_min, s.label_max) == (y.min(), y.max())
    if case.model != "linear":
        hist = np.bincount(y.astype(int), w)
        np.testing.assert_allclose(s.class_weights, hist, rtol=1e-12)


def fixed_case(model="linear", layout="sparse", corruptions=(), n=24, d=3, n_parts=2, placement="even",
               weighted=False, dtype="float64", seed=3):
    """A case built as ``cases`` builds them, for the regression examples below."""
    case = _clean_case(model, n, d, layout, n_parts, placement, weighted, dtype, seed)
    for kind, i, p in corruptions:
        corrupt(case, kind, i, p)
        case.corruptions.append((kind, i, p))
    return case


# the bugs this module found, kept as explicit examples (each run in every profile)
REGRESSIONS = {
    # valid data crashed (TypeError in statistics): sparse blocks with dense-typed rows in a partition
    # (their null size made the sizes floats)
    "sparse_path_with_dense_rows": fixed_case(layout="mixed_sparse"),
    # sparse blocks: an index >= size, unsorted or repeated indices were converted silently (an index beyond
    # the size also dropped the partition's moments); a negative index or more indices than values (or the
    # reverse) crashed numpy in the conversion task (PythonException)
    "sparse_path_index_out_of_range": fixed_case(corruptions=[("index_out_of_range", 5, 0)]),
    "sparse_path_index_equals_size": fixed_case(corruptions=[("index_equals_size", 7, 0)]),
    "sparse_path_unsorted_indices": fixed_case(corruptions=[("unsorted_indices", 5, 0)]),
    "sparse_path_duplicate_index": fixed_case(corruptions=[("duplicate_index", 5, 0)]),
    "sparse_path_negative_index": fixed_case(corruptions=[("negative_index", 5, 0)]),
    "sparse_path_more_values_than_indices": fixed_case(corruptions=[("indices_values_mismatch", 5, 1)]),
    "sparse_path_more_indices_than_values": fixed_case(corruptions=[("indices_values_mismatch", 5, 0)]),
    # dense blocks: vector_to_array's JVM IllegalArgumentException (Py4JJavaError), not a ValueError
    "dense_path_unsorted_indices": fixed_case(layout="mixed_dense", corruptions=[("unsorted_indices", 5, 0)]),
    "dense_path_negative_size": fixed_case(layout="dense", corruptions=[("negative_size", 6, 0)]),
    # the first vector (read on the driver to choose sparse or dense blocks): pyspark's TypeError
    "first_vector_unsorted_indices": fixed_case(corruptions=[("unsorted_indices", 0, 0)]),
    # labels above MAX_CLASSES were reported as "a single class"
    "label_beyond_max_classes": fixed_case(model="multinomial", layout="dense", corruptions=[("label_20000", 4, 0)]),
    # a zero weight sum did not name the weight column
    "all_weights_zero": fixed_case(layout="dense", weighted=True, corruptions=[("all_weights_zero", 0, 0)]),
}


def regressions(*names):
    """``@example`` of each named regression case (all when none is named)."""
    def decorate(test):
        for name in reversed(names or tuple(REGRESSIONS)):
            test = example(case=REGRESSIONS[name])(test)
        return test
    return decorate


@settings(FUZZ)
@given(case=cases())
@regressions()
def test_conversion_refuses_or_converts(spark, block_roots, case):
    check_conversion_case(spark, block_roots, case)


def _numpy_least_squares(case):
    x, y, w = _dense_rows(case)
    a = np.hstack([x, np.ones((len(y), 1))]) * np.sqrt(w)[:, None]
    theta = np.linalg.lstsq(a, y * np.sqrt(w), rcond=None)[0]
    return theta[:-1], theta[-1]


def _coefficients(model):
    if hasattr(model, "coefficientMatrix") and model.numClasses > 2:
        return np.concatenate([model.coefficientMatrix.toArray().ravel(), model.interceptVector.toArray()])
    return np.append(model.coefficients.toArray(), model.intercept)


def check_fit_case(spark, roots, case):
    problems = expected_problems(case)
    df = _frame(spark, case)
    est = _estimator(case, dtype="float64", tol=1e-10)
    with _Recorder() as rec:
        try:
            model = est.fit(df)
        except ValueError as e:
            assert problems, f"valid data refused: {e}"
            assert_names_a_problem(str(e), problems)
            assert not rec.iterations(), f"iterations ran before the error: {rec.iterations()}"
            assert_no_blocks_left(roots, rec.ids)
            COUNTS["fit", "refused"] += 1
            return
        assert_no_blocks_left(roots, rec.ids)
    assert not problems, f"trained on bad data: expected {sorted(problems)}"
    COUNTS["fit", f"valid {case.model}"] += 1
    if case.model == "linear":
        beta, b = _numpy_least_squares(case)
        scale = max(1.0, float(np.abs(_dense_rows(case)[1]).max()))
        np.testing.assert_allclose(model.coefficients.toArray(), beta, rtol=1e-6, atol=1e-6 * scale)
        np.testing.assert_allclose(model.intercept, b, rtol=1e-6, atol=1e-6 * scale)
        return
    # the same estimator on the same rows, dense, in one partition
    clean = Case(case.model, case.d, case.weighted, case.dtype,
                 [[[("dense", [float(v) for v in x]), float(y), float(w)] for x, y, w in zip(*_dense_rows(case))]])
    reference = _estimator(clean, dtype="float64", tol=1e-10).fit(_frame(spark, clean))
    np.testing.assert_allclose(_coefficients(model), _coefficients(reference), rtol=1e-6, atol=1e-6)


@settings(FUZZ, max_examples=FIT_EXAMPLES[PROFILE])
@given(case=cases())
@regressions("sparse_path_with_dense_rows", "dense_path_unsorted_indices", "label_beyond_max_classes")
def test_fit_refuses_or_trains(spark, block_roots, case):
    check_fit_case(spark, block_roots, case)


def test_fuzz_cases_were_generated(request, spark, block_roots):
    """Runs last in this module: how many cases each property ran, by outcome; no dataset directory is left
    on the executors (asked of them, as ``tests/test_bad_input.py`` does)."""
    assert not executor_datasets(spark) & set(CREATED), "training blocks left behind"
    lines = [f"{test} {outcome}: {n}" for (test, outcome), n in sorted(COUNTS.items())]
    total = sum(COUNTS.values())
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    text = f"fuzzed conversion cases ({PROFILE} profile): {total}\n  " + "\n  ".join(lines)
    if reporter is not None:
        reporter.write_line("\n" + text)
    print(text)
    ran = {test for test, _ in COUNTS}
    if ran != {"conversion", "fit"}:
        pytest.skip("run with the two properties above")
    assert sum(n for (test, outcome), n in COUNTS.items() if test == "conversion" and outcome.startswith("valid"))
    assert sum(n for (test, outcome), n in COUNTS.items() if test == "conversion" and outcome.startswith("refused"))
