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

import logging
import os
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from support.fuzz_cases import Case, _clean_case, assert_names_a_problem, cases, corrupt, expected_problems
from support.helpers import executor_datasets

from sparkml.classification import LinearSVC, LogisticRegression
from sparkml.data import background_release, block_store
from sparkml.data.training_data import TrainingData
from sparkml.regression import LinearRegression

pytestmark = pytest.mark.usefixtures("conversions_not_kept")  # counts conversions or blocks

PROFILE = os.environ.get("SPARKML_FUZZ_PROFILE", "default")
if PROFILE not in ("default", "nightly"):
    raise ValueError(f"SPARKML_FUZZ_PROFILE must be 'default' or 'nightly', got {PROFILE!r}")
DEFAULT_EXAMPLES = {"default": 8, "nightly": 1500}  # conversion-level examples
FIT_EXAMPLES = {"default": 2, "nightly": 200}  # whole fits
_COMMON = dict(
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile("sparkml-fuzz", max_examples=DEFAULT_EXAMPLES["default"], **_COMMON)
settings.register_profile("sparkml-fuzz-nightly", max_examples=DEFAULT_EXAMPLES["nightly"], **_COMMON)
FUZZ = settings.get_profile("sparkml-fuzz-nightly" if PROFILE == "nightly" else "sparkml-fuzz")


COUNTS = Counter()  # (test, outcome) -> examples run, reported by the last test
CREATED = []  # every dataset id the examples asked the block store for


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

    schema = StructType(
        [StructField("features", VectorUDT()), StructField("label", DoubleType()), StructField("w", DoubleType())]
    )
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

    return {
        p: tuple(np.array(a, dtype=float) for a in arrays) for p, *arrays in data.handles.mapPartitions(read).collect()
    }


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
    background_release.wait()  # a fit that returned deletes its blocks in the background
    found = {name for r in roots if os.path.isdir(r) for name in os.listdir(r) if not name.startswith(".")}
    left = found & set(ids)
    assert not left, f"training blocks left behind: {left}"


# ---- the properties -----------------------------------------------------------------------------------------


def _one_block(case):
    """Whether the case converts in one block from the vector struct (``conversion_plan.STRUCT_INPUT_BYTES``: a
    small input of one partition, its first vector read in the conversion task): half of the cases, by their rows."""
    return sum(len(p) for p in case.parts) % 2 == 1


def check_conversion_case(spark, roots, case, monkeypatch):
    from sparkml.data import conversion_plan

    problems = expected_problems(case)
    df = _frame(spark, case)
    est = _estimator(case)
    one_block = _one_block(case)
    if one_block:  # the frame is over an RDD, which Spark does not estimate
        monkeypatch.setattr(conversion_plan, "estimated_bytes", lambda df: 0)
    with _Recorder() as rec:
        try:
            data = TrainingData.prepare(
                df,
                "features",
                "label",
                "w" if case.weighted else None,
                dtype=case.dtype,
                max_partitions=1 if one_block else None,
            )
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
    for p, part in enumerate([[r for rows in case.parts for r in rows]] if one_block else case.parts):
        k = len(part)
        if k:
            bx, by, bw = blocks.pop(p)
            np.testing.assert_array_equal(bx, x[start : start + k])
            np.testing.assert_array_equal(by, y[start : start + k])
            np.testing.assert_array_equal(bw, w[start : start + k])
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


def fixed_case(
    model="linear",
    layout="sparse",
    corruptions=(),
    n=24,
    d=3,
    n_parts=2,
    placement="even",
    weighted=False,
    dtype="float64",
    seed=3,
):
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
    with pytest.MonkeyPatch.context() as monkeypatch:
        check_conversion_case(spark, block_roots, case, monkeypatch)


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
    clean = Case(
        case.model,
        case.d,
        case.weighted,
        case.dtype,
        [[[("dense", [float(v) for v in x]), float(y), float(w)] for x, y, w in zip(*_dense_rows(case))]],
    )
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
