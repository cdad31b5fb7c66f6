"""The executor-side block store: atomic commits, and a drop that no late commit can undo."""

import os
import time

import numpy as np
import pytest

from sparkml.data import block_store


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path))
    yield block_store.root_dir()
    block_store._OPEN.clear()


def datasets(root):
    """What a listing of datasets sees (hidden names are staging directories and tombstones)."""
    return sorted(n for n in os.listdir(root) if not n.startswith(".")) if os.path.isdir(root) else []


def write(dataset_id, partition, x):
    writer = block_store.PartitionWriter(dataset_id, partition)
    for i in range(0, len(x), 3):  # several appends, as Arrow batches arrive
        writer.append("x", x[i : i + 3])
        writer.append("y", np.arange(i, min(i + 3, len(x)), dtype=np.float64))
        writer.append("w", np.ones(min(3, len(x) - i)))
    return writer


def test_committed_blocks_read_back_exactly(root):
    import torch

    x = np.random.default_rng(0).normal(size=(10, 4))
    assert write("d1", 0, x).commit() is True
    part = block_store.open_partition("d1", 0, "cpu", torch.float64)
    np.testing.assert_array_equal(part.block.x.numpy(), x)
    np.testing.assert_array_equal(part.y.numpy(), np.arange(10.0))
    assert part.n_rows == 10
    assert datasets(root) == ["d1"]


def test_an_uncommitted_writer_shows_no_dataset_and_drop_removes_its_staging(root):
    write("d2", 1, np.ones((5, 2)))  # a task killed before its commit
    assert datasets(root) == []
    block_store.drop("d2")
    assert os.listdir(root) == [".d2.dropped"]


def test_commit_after_drop_publishes_nothing(root):
    writer = write("d3", 0, np.ones((5, 2)))  # a zombie task of an aborted job...
    block_store.drop("d3")  # ...outlived by the fit's cleanup
    assert writer.commit() is False
    assert datasets(root) == []
    assert not [n for n in os.listdir(root) if n.startswith(".d3-")], "staging left behind"


@pytest.mark.parametrize("when", ["before_rename", "after_rename"])
def test_commit_racing_a_drop_removes_itself(root, monkeypatch, when):
    writer = write("d4", 0, np.ones((5, 2)))
    real_replace = os.replace

    def replace_while_dropping(src, dst):
        if when == "before_rename":
            block_store.drop("d4")
        real_replace(src, dst)
        if when == "after_rename":
            block_store.drop("d4")

    monkeypatch.setattr(block_store.os, "replace", replace_while_dropping)
    assert writer.commit() is False
    assert datasets(root) == []


def test_drop_prunes_day_old_tombstones_only(root):
    block_store.drop("old")
    old = os.path.join(root, ".old.dropped")
    day_ago = time.time() - block_store._TOMBSTONE_TTL_S - 60
    os.utime(old, (day_ago, day_ago))
    block_store.drop("recent")
    block_store.drop("new")
    assert sorted(os.listdir(root)) == [".new.dropped", ".recent.dropped"]
    assert block_store.is_dropped("recent") and not block_store.is_dropped("old")
