"""A successful fit deletes its blocks after it returns (``sparkml.data.background_release``): the fit does not wait
for the job that deletes them, the blocks are gone once it ends, and ``SparkContext.stop`` waits for it first."""

import threading
import time

import numpy as np
import pytest
from support.data_helpers import linear_frame
from support.helpers import executor_datasets

from sparkml.classification import LogisticRegression
from sparkml.data import background_release
from sparkml.data.training_data import TrainingData


def test_a_fit_returns_before_the_job_deleting_its_blocks_ends(spark, monkeypatch):
    df = linear_frame(spark, n=300, partitions=2).unpersist()  # not cached: the fit's own conversion
    before = executor_datasets(spark)
    go, states, release = threading.Event(), [], TrainingData.release

    def held_release(self, *args, **kwargs):
        states.append(("started", self.dataset_id))
        go.wait(30)  # the fit would wait here if it released in its own thread
        release(self, *args, **kwargs)
        states.append(("ended", self.dataset_id))

    monkeypatch.setattr(TrainingData, "release", held_release)
    model = LogisticRegression(strategy="sync", regParam=0.1).fit(df)
    assert [s for s, _ in states] in ([], ["started"])  # the fit returned while its release waits
    assert background_release.pending() == 1
    go.set()
    background_release.wait()
    assert [s for s, _ in states] == ["started", "ended"] and background_release.pending() == 0
    assert executor_datasets(spark) == before  # the blocks are deleted
    stock = LogisticRegression(strategy="sync", regParam=0.1).fit(df)  # the same model without the hold
    np.testing.assert_array_equal(model.coefficients.toArray(), stock.coefficients.toArray())


class _Context:
    """What ``release_after_fit`` uses of a SparkContext; ``stop`` records the releases still running."""

    def __init__(self):
        self.events = []

    def stop(self):
        self.events.append(("stop", background_release.pending()))


class _Data:
    """What ``release_after_fit`` uses of a ``TrainingData`` whose release runs a job (a slow one here)."""

    connect, stored, dropped_by_tasks, released = False, True, False, False

    def __init__(self, sc, seconds):
        self.sc, self.seconds, self.dataset_id = sc, seconds, f"fake-{id(self)}"

    def release(self):
        time.sleep(self.seconds)
        self.released = True
        self.sc.events.append(("released", self.dataset_id))


def test_stop_waits_for_the_releases_in_flight():
    sc = _Context()
    data = _Data(sc, 0.3)
    background_release.release_after_fit(data)
    assert not data.released  # still deleting: the caller went on at once
    sc.stop()
    assert sc.events == [("released", data.dataset_id), ("stop", 0)]
    other = _Context()  # a context that released nothing keeps its own stop
    assert not getattr(other, "_sparkml_stop_waits", False) and "stop" not in vars(other)


@pytest.mark.parametrize("attribute", ["connect", "dropped_by_tasks"])
def test_a_release_without_a_job_or_in_spark_connect_runs_in_the_callers_thread(attribute):
    sc = _Context()
    data = _Data(sc, 0.0)
    setattr(data, attribute, True)
    background_release.release_after_fit(data)
    assert data.released and background_release.pending() == 0
