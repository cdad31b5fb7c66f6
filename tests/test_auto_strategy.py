"""``strategy="auto"``, the default: ``allreduce`` where Spark can run one barrier stage for the fit, else
``sync``; a barrier stage that lost an executor is fitted again with ``sync``.

The choice is checked through the log line each fit writes and through the model, which must be bit for
bit the one the chosen strategy fits. The fallback is driven here by an ``ExecutorLost`` raised from the
barrier stage; ``tests/test_faults.py`` kills a real executor (``local-cluster``).
"""

import logging

import numpy as np
import pytest
from support.data_helpers import linear_frame
from support.helpers import coefficient_vector

from sparkml.classification import KernelSVC, LinearSVC, LogisticRegression
from sparkml.regression import LinearRegression
from sparkml.strategies import auto_strategy
from sparkml.strategies.barrier_task import ExecutorLost

# counts barrier stages: a kept conversion whose blocks are lost is converted again first (sparkml.data.reuse)
pytestmark = pytest.mark.usefixtures("conversions_not_kept")


@pytest.fixture(scope="module")
def frame(spark):
    df = linear_frame(spark, n=600, d=4, partitions=3, seed=11)
    df.count()  # cached before the first fit: coalescing the cached partitions groups them as every later fit does
    yield df
    df.unpersist()


def _choices(caplog):
    return [r.getMessage() for r in caplog.records if "strategy 'auto' runs" in r.getMessage()]


@pytest.mark.parametrize(
    "make",
    [
        lambda: LogisticRegression(regParam=0.01),
        lambda: LinearRegression(labelCol="y", regParam=0.1, solver="l-bfgs"),
        lambda: LinearSVC(regParam=0.01, maxIter=20),
    ],
    ids=["logistic", "linear", "svc"],
)
def test_the_default_runs_allreduce_in_a_local_session(frame, caplog, make):
    """``auto`` runs ``allreduce``; on an input Spark estimates small (this cached frame) over one block, whose
    barrier stage of one task starts no process group: the model is bit for bit ``allreduce`` over one block's
    (``numWorkers=1``). An explicit strategy, or an input of no estimate (a frame over an RDD), keeps a block per
    task slot."""
    est = make()
    assert est.getStrategy() == "auto"
    with caplog.at_level(logging.INFO, logger="sparkml"):
        auto = est.fit(frame)
    assert _choices(caplog) == [f"{type(est).__name__}: strategy 'auto' runs 'allreduce' (2 task slots)"]
    assert auto.getStrategy() == "auto"  # the model keeps the estimator's Params
    assert est._conversion(frame)["max_partitions"] == 1
    assert make().setStrategy("allreduce")._conversion(frame)["max_partitions"] == 2
    unestimated = frame.sparkSession.createDataFrame(frame.rdd, frame.schema)
    assert est._conversion(unestimated)["max_partitions"] == 2
    one_block = make().setStrategy("allreduce").setNumWorkers(1).fit(frame)
    np.testing.assert_array_equal(coefficient_vector(auto), coefficient_vector(one_block))


def test_kernel_svc_accepts_auto(frame, caplog):
    params = dict(gamma=0.5, regParam=0.01, numLandmarks=40, maxIter=30)
    with caplog.at_level(logging.INFO, logger="sparkml"):
        auto = KernelSVC(**params).fit(frame)
    assert _choices(caplog) == ["KernelSVC: strategy 'auto' runs 'allreduce' (2 task slots)"]
    one_block = KernelSVC(strategy="allreduce", numWorkers=1, **params).fit(frame)  # the small input's one block
    np.testing.assert_array_equal(auto.coefficientMatrix.toArray(), one_block.coefficientMatrix.toArray())


def test_checkpointing_runs_sync(frame, caplog, tmp_path):
    """allreduce writes checkpoints from rank 0's task, into a directory the driver must share: auto keeps
    them on the driver."""
    with caplog.at_level(logging.INFO, logger="sparkml"):
        auto = LogisticRegression(regParam=0.01, checkpointDir=str(tmp_path / "ckpt")).fit(frame)
    assert _choices(caplog) == ["LogisticRegression: strategy 'auto' runs 'sync' (checkpointDir is set)"]
    sync = LogisticRegression(regParam=0.01, strategy="sync").fit(frame)
    np.testing.assert_array_equal(coefficient_vector(auto), coefficient_vector(sync))


def test_auto_strategy_falls_back_to_sync_where_a_barrier_stage_cannot_run(spark, monkeypatch):
    import sparkml.strategies as strategies

    assert auto_strategy(spark) == ("allreduce", "2 task slots")
    assert auto_strategy(spark, checkpointing=True) == ("sync", "checkpointDir is set")
    monkeypatch.setattr(
        strategies, "conf_value", lambda s, key: "true" if key == "spark.dynamicAllocation.enabled" else None
    )
    assert auto_strategy(spark) == ("sync", "dynamic allocation is on")
    monkeypatch.setattr(strategies, "conf_value", lambda s, key: None)
    monkeypatch.setattr(strategies, "task_slots", lambda s: None)
    assert auto_strategy(spark) == ("sync", "the cluster's task slots are unknown")


@pytest.fixture
def lost_executor(monkeypatch):
    """Every allreduce stage of the test raises ExecutorLost, as run_barrier_stage does when blocks are gone;
    yields the number of stages it stopped."""
    from sparkml.strategies import barrier_transport

    stopped = []

    def lose(*args, **kwargs):
        stopped.append(1)
        raise ExecutorLost("strategy='allreduce': an executor was lost with the training blocks its tasks held")

    monkeypatch.setattr(barrier_transport, "run_barrier_stage", lose)
    return stopped


def test_a_lost_executor_refits_with_sync(frame, caplog, lost_executor):
    with caplog.at_level(logging.WARNING, logger="sparkml"):
        auto = LogisticRegression(regParam=0.01).fit(frame)
    assert len(lost_executor) == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        "lost an executor in its barrier stage" in w and "fitting again with strategy 'sync'" in w for w in warnings
    ), warnings
    sync = LogisticRegression(regParam=0.01, strategy="sync").fit(frame)
    np.testing.assert_array_equal(coefficient_vector(auto), coefficient_vector(sync))


def test_an_explicit_allreduce_does_not_fall_back(frame, lost_executor):
    with pytest.raises(ExecutorLost):
        LogisticRegression(regParam=0.01, strategy="allreduce").fit(frame)


def test_fit_multiple_refits_the_lost_map_with_sync(frame, lost_executor):
    est = LogisticRegression()
    maps = [{est.regParam: 0.01, est.fitIntercept: False}, {est.regParam: 0.1}]  # two paths (fitIntercept)
    models = dict(est.fitMultiple(frame, maps))
    assert len(lost_executor) == 2
    for i, m in enumerate(maps):
        sync = est.copy(m).setStrategy("sync").fit(frame)
        np.testing.assert_array_equal(coefficient_vector(models[i]), coefficient_vector(sync))


def test_fit_multiple_refits_a_lost_regularization_path_with_sync(frame, lost_executor):
    """The path's one barrier stage is lost: the whole path runs again with sync, as a sync path runs it."""
    est = LogisticRegression()
    maps = [{est.regParam: 0.01}, {est.regParam: 0.1}, {est.regParam: 0.1, est.elasticNetParam: 0.5}]
    models = dict(est.fitMultiple(frame, maps))
    assert len(lost_executor) == 1
    sync = dict(est.copy({est.strategy: "sync"}).fitMultiple(frame, maps))
    for i, m in enumerate(maps):
        assert models[i].getRegParam() == m[est.regParam] and models[i].getStrategy() == "auto"
        np.testing.assert_array_equal(coefficient_vector(models[i]), coefficient_vector(sync[i]))
