"""KernelSVC's kernel blocks stored or computed per pass (``kernelBlocks``, ``kernelBlockMemory``): the same model
either way, binary and multi-class, with and without probabilities; a partition larger than its budget trains,
keeping no more than the budget; the budget follows the executor's memory setting.

The fits compute in float64: in float32 a kernel row computed among other rows can differ from the stored one in
its last bit, which the solve amplifies to about 1e-5 (``test_kernel_per_pass_path.py`` compares float32 fits)."""

import logging

import numpy as np
import pytest
from support.data_helpers import labeled_frame

from sparkml.classification import KernelSVC
from sparkml.data import block_store
from sparkml.data.derive import KernelPlan, derive_partition, executor_shares
from sparkml.kernel import block_budget
from sparkml.params.converters import memory_bytes

M = 120  # landmarks: per-pass products over 3 chunks of a 1000-row partition at most; cheap enough for 8 fits


def _data(classes, n=2400, seed=0):
    """A ring (binary) or angular sectors of a noisy disc (3 classes): no linear separator."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    if classes == 2:
        y = (np.linalg.norm(x[:, :2], axis=1) + 0.2 * rng.normal(size=n) > 1.1).astype(float)
    else:
        y = np.floor((np.arctan2(x[:, 1], x[:, 0]) + np.pi + 0.3 * rng.normal(size=n)) / (2 * np.pi / 3)) % 3
    return x, y


def _outputs(model, frame):
    cols = ["label", "rawPrediction", "prediction"] + (["probability"] if model.getProbability() else [])
    rows = model.transform(frame).select(*cols).collect()
    return {c: np.array([np.asarray(r[c], dtype=float) for r in rows]) for c in cols}


def _fit(frame, caplog, **params):
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="sparkml"):
        model = KernelSVC(numLandmarks=M, regParam=1e-3, seed=3, dtype="float64", **params).fit(frame)
    stored = [r.args for r in caplog.records if "kernel blocks of" in r.getMessage()]
    assert len(stored) == 1
    return model, stored[0][0]


def _same_model(a, b, frame, tol=1e-6):
    """Asserts the two models and their outputs on ``frame`` agree; returns ``a``'s outputs."""
    assert np.max(np.abs(a.coefficientMatrix.toArray() - b.coefficientMatrix.toArray())) <= tol
    assert np.max(np.abs(a.interceptVector.toArray() - b.interceptVector.toArray())) <= tol
    out_a, out_b = _outputs(a, frame), _outputs(b, frame)
    assert np.array_equal(out_a["prediction"], out_b["prediction"])
    for col in out_a:
        assert np.max(np.abs(out_a[col] - out_b[col])) <= tol, col
    return out_a


@pytest.mark.parametrize(
    "classes, params",
    [
        (2, {}),
        (2, {"probability": True}),
        (3, {"multiClass": "ovo", "probability": True}),
        (3, {"multiClass": "ovr", "strategy": "sync"}),
    ],
    ids=["binary", "binary probabilities", "ovo probabilities", "ovr sync"],
)
def test_blocks_computed_per_pass_give_the_stored_blocks_model(spark, caplog, classes, params):
    x, y = _data(classes)
    frame = labeled_frame(spark, x, y, partitions=3).cache()
    stored, stored_rows = _fit(frame, caplog, kernelBlocks="stored", **params)
    per_pass, per_pass_rows = _fit(frame, caplog, kernelBlocks="per_pass", **params)
    assert (stored_rows, per_pass_rows) == (len(y), 0)
    assert per_pass.numLandmarksUsed == stored.numLandmarksUsed == M
    out = _same_model(per_pass, stored, frame)
    # the model is a good one, not two equal failures
    assert np.mean(out["prediction"] == out["label"]) > (0.85 if classes == 2 else 0.8)
    frame.unpersist()


def test_a_partition_larger_than_its_budget_trains_within_it(spark, caplog):
    """kernelBlocks='auto' with a budget that holds a few hundred rows' kernel blocks: half of it stores rows (the
    other half keeps the Newton rounds' active rows), the others' kernel is computed per pass, and the model is
    the stored one's."""
    x, y = _data(2, n=3000, seed=1)
    frame = labeled_frame(spark, x, y, partitions=2).cache()
    budget = "512k"  # bytes per executor: of 2 x 1500 rows x 120 float64 (2.9 MB), 546 rows' blocks, 273 stored
    stored, _ = _fit(frame, caplog, kernelBlocks="stored")
    tight, stored_rows = _fit(frame, caplog, kernelBlockMemory=budget)
    itemsize = 8
    half = memory_bytes(budget) // 2 // (M * itemsize)
    assert 0 < stored_rows <= half and stored_rows >= half - 2  # each partition fills half its share, to a row
    _same_model(tight, stored, frame)
    frame.unpersist()


def test_the_budget_follows_the_executors_memory_setting(spark):
    conf = {
        "spark.master": "spark://cluster:7077",
        "spark.executor.memory": "32g",
        "spark.driver.memory": "2g",
    }
    assert block_budget.cpu_budget(conf.get) == 16 << 30  # half of each executor's
    assert block_budget.cpu_budget({**conf, "spark.executor.memory": "6g"}.get) == 3 << 30
    assert block_budget.cpu_budget({**conf, "spark.executor.pyspark.memory": "10g"}.get) == 5 << 30
    assert block_budget.cpu_budget({**conf, "spark.master": "local[4]"}.get) == 1 << 30  # the driver is the executor
    assert block_budget.cpu_budget({"spark.master": "yarn"}.get) == 512 << 20  # Spark's default 1g
    assert block_budget.cpu_budget(conf.get, "3g") == 3 << 30  # kernelBlockMemory set
    # this session: local[2] with spark.driver.memory 4g (tests/conftest.py)
    x, y = _data(2, n=50)
    spec = _spec(x)
    assert KernelSVC()._kernel_plan(spec, spark).cpu_budget_bytes == 2 << 30
    plan = KernelSVC(kernelBlockMemory="100m")._kernel_plan(spec, spark)
    assert plan.budget_bytes == plan.cpu_budget_bytes == 100 << 20


def _spec(x):
    from sparkml.gpu.feature_maps import NystroemSpec

    return NystroemSpec("rbf", x[:10], np.eye(10), 0.5, 3, 0.0)


def test_the_budget_is_shared_by_each_executors_partitions_in_proportion_to_rows():
    blocks = [(0, 300, "a"), (1, 100, "a"), (2, 500, "b")]
    shares = executor_shares(blocks)
    assert shares == {0: 0.75, 1: 0.25, 2: 1.0}
    plan = KernelPlan("rbf", np.zeros((100, 2)), 1.0, 3, 0.0, cpu_budget_bytes=40_000, shares=shares)
    # 100 landmarks x 4 bytes: 400 bytes a row; partition 0 may hold 30000 bytes (75 rows): it stores 37 rows
    # within half of that, the other half left to the Newton rounds' active rows
    assert plan.stored_rows(0, 300, 2, 4, "cpu") == 37
    assert plan.stored_rows(1, 100, 2, 4, "cpu") == 12
    assert plan.stored_rows(2, 50, 2, 4, "cpu") == 50  # fits whole: stored whole
    assert plan.attrs(0, "cpu", 37 * 400)["take_bytes"] == 30000 - 37 * 400
    assert plan.stored_rows(0, 300, 100, 4, "cpu") == 300  # rows as wide as the kernel block: stored
    for mode, rows in (("stored", 300), ("per_pass", 0)):
        assert KernelPlan("rbf", np.zeros((100, 2)), 1.0, 3, 0.0, mode=mode).stored_rows(0, 300, 2, 4, "cpu") == rows


def test_derived_rows_are_written_in_label_order(monkeypatch, tmp_path):
    """``by_label``: the derived blocks hold each partition's rows in label order (stable), labels and weights moved
    with them (a one-vs-one pass then reads each class's rows as one run, ``OneVsOneProblems``); else as they
    were."""
    import torch

    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path))
    rng = np.random.default_rng(0)
    x, y, w = rng.normal(size=(50, 3)), rng.integers(0, 4, 50).astype(float), rng.uniform(0.5, 2, 50)
    source = block_store.new_dataset_id()
    writer = block_store.PartitionWriter(source, 0)
    for name, values in (("x", x), ("y", y), ("w", w)):
        writer.append(name, values)
    writer.commit()
    for by_label, order in ((True, np.argsort(y, kind="stable")), (False, np.arange(len(y)))):
        target = block_store.new_dataset_id()
        derive_partition(source, target, 0, "cpu", "float64", lambda rows: 2 * rows, by_label=by_label)
        derived = block_store.open_partition(target, 0, torch.device("cpu"), torch.float64)
        np.testing.assert_array_equal(derived.y.numpy(), y[order])
        np.testing.assert_array_equal(derived.w.numpy(), w[order])
        np.testing.assert_array_equal(derived.block.to_dense().numpy(), 2 * x[order])
        block_store.drop(target)
    block_store.drop(source)
