"""sparkml.strategies.table: one row per strategy, read by validation, ``auto``, the conversion, the fit and
the docs. A new strategy is its own class plus one row: shown here with a toy one."""

import dataclasses

import numpy as np
import pytest

pytest.importorskip("pyspark")

from data_helpers import linear_frame
from helpers import coefficient_vector

from sparkml.classification import KernelSVC, LogisticRegression
from sparkml.strategies import block_partitions, table
from sparkml.strategies.sync import SyncStrategy


class CountingSync(SyncStrategy):
    """A toy strategy: ``sync`` that counts the evaluations its solver asks for."""

    name = "counting-sync"
    built = []

    def __init__(self, data, loss, options):
        super().__init__(data, loss, options)
        CountingSync.built.append(options)


TOY = dataclasses.replace(
    table.get("sync"),
    name="counting-sync",
    implementation=f"{__name__}:CountingSync",
    kernel_svc=False,
    summary="sync, counted",
    use_when="never",
)


@pytest.fixture
def toy_row(monkeypatch):
    monkeypatch.setattr(table, "TABLE", [*table.TABLE, TOY])
    CountingSync.built.clear()
    return TOY


@pytest.mark.parametrize("row", table.TABLE, ids=lambda r: r.name)
def test_every_row_builds_its_class(row):
    cls = row.load()
    assert cls.name == row.name
    assert row.transport in ("jobs", "barrier") and row.solver in ("quasi-newton", "dane", "piag", "gossip")


def test_the_capabilities_the_estimators_read():
    assert table.names() == ("auto", "sync", "allreduce", "averaging", "allreduce-averaging", "ssp", "gossip")
    assert table.names_where(kernel_svc=True) == ("sync", "allreduce")
    assert table.names_where(first_order=True) == ("ssp", "gossip")
    assert table.names_where(transport="barrier") == ("allreduce", "allreduce-averaging", "ssp", "gossip")
    assert "| `gossip` | barrier | gossip |" in table.markdown()


def test_a_new_strategy_is_one_row_and_its_class(spark, toy_row):
    frame = linear_frame(spark, n=300, d=3, partitions=2, seed=5)
    toy = LogisticRegression(regParam=0.01, strategy="counting-sync").fit(frame)
    sync = LogisticRegression(regParam=0.01, strategy="sync").fit(frame)
    np.testing.assert_array_equal(coefficient_vector(toy), coefficient_vector(sync))
    assert len(CountingSync.built) == 1 and CountingSync.built[0].aggregation_depth == 2
    assert block_partitions("counting-sync", spark) == block_partitions("sync", spark)
    assert "`counting-sync`" in table.markdown()
    with pytest.raises(ValueError, match="strategy must be one of auto, sync, allreduce"):
        KernelSVC(strategy="counting-sync")._check_params()
    with pytest.raises(ValueError, match="counting-sync"):
        LogisticRegression(strategy="no-such-strategy")
