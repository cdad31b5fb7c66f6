"""sparkml.strategies.table: one row per strategy, read by validation, ``auto``, the conversion, the fit and
the docs. A new strategy is its solver plus one row: shown here with a toy one."""

import dataclasses

import numpy as np
import pytest

pytest.importorskip("pyspark")

from support.data_helpers import linear_frame
from support.helpers import coefficient_vector

from sparkml.classification import KernelSVC, LogisticRegression
from sparkml.strategies import block_partitions, table
from sparkml.strategies.exact import quasi_newton


def counting_quasi_newton(comm, objective, theta0, **settings):
    """A toy solver: ``sync``'s L-BFGS, counting the sums it asks its communicator for."""
    counting = CountingCommunicator(comm)
    out = quasi_newton(counting, objective, theta0, **settings)
    COUNTS.append((settings["options"], counting.sums))
    return out


class CountingCommunicator:
    def __init__(self, comm):
        self.comm, self.sums = comm, 0
        self.rank, self.world = comm.rank, comm.world

    def sum(self, kind, coef, shapes, loss=None):
        self.sums += 1
        return self.comm.sum(kind, coef, shapes, loss)

    def sum_of(self, fn, shapes, *values):
        self.sums += 1
        return self.comm.sum_of(fn, shapes, *values)


COUNTS = []
TOY = dataclasses.replace(
    table.get("sync"),
    name="counting-sync",
    solver="counting",
    minimize=f"{__name__}:counting_quasi_newton",
    newton=None,
    summary="sync, counted",
    use_when="never",
)


@pytest.fixture
def toy_row(monkeypatch):
    monkeypatch.setattr(table, "TABLE", [*table.TABLE, TOY])
    COUNTS.clear()
    return TOY


@pytest.mark.parametrize("row", table.TABLE, ids=lambda r: r.name)
def test_every_row_loads_its_solvers(row):
    assert callable(row.minimizer()) and (row.newton_solver() is None) == (not row.kernel_svc)
    assert row.transport in ("jobs", "barrier") and row.solver in ("quasi-newton", "dane", "piag", "gossip")
    # the solvers that message single ranks need the barrier task's process group
    assert row.barrier or row.solver in ("quasi-newton", "dane")


def test_the_capabilities_the_estimators_read():
    assert table.names() == ("auto", "sync", "allreduce", "averaging", "allreduce-averaging", "ssp", "gossip")
    assert table.names_where(kernel_svc=True) == ("sync", "allreduce")
    assert table.names_where(first_order=True) == ("ssp", "gossip")
    assert table.names_where(transport="barrier") == ("allreduce", "allreduce-averaging", "ssp", "gossip")
    assert "| `gossip` | barrier | gossip |" in table.markdown()


def test_a_new_strategy_is_one_row_and_its_solver(spark, toy_row):
    frame = linear_frame(spark, n=300, d=3, partitions=2, seed=5)
    toy = LogisticRegression(regParam=0.01, strategy="counting-sync").fit(frame)
    sync = LogisticRegression(regParam=0.01, strategy="sync").fit(frame)
    np.testing.assert_array_equal(coefficient_vector(toy), coefficient_vector(sync))
    ((options, sums),) = COUNTS
    assert options.aggregation_depth == 2 and sums >= toy.summary.totalIterations + 1  # one per evaluation
    assert block_partitions("counting-sync", spark) == block_partitions("sync", spark)
    assert "`counting-sync`" in table.markdown()
    with pytest.raises(ValueError, match="strategy must be one of auto, sync, allreduce"):
        KernelSVC(strategy="counting-sync")._check_params()
    with pytest.raises(ValueError, match="counting-sync"):
        LogisticRegression(strategy="no-such-strategy")
