"""Conversions kept between fits of one cached DataFrame (``sparkml.data.reuse``).

The second fit of a cached DataFrame trains on the blocks the first one converted, and its model is bit for
bit the one a fresh conversion gives; a DataFrame that is not cached, or another conversion of the same one
(another dtype), converts again; unpersisting the DataFrame, the byte cap, ``release_conversions`` and a
stopped session release the kept blocks; blocks that vanished since are converted again; the conf key turns
it all off.
"""

import logging

import numpy as np
import pytest
from support.data_helpers import linear_frame
from support.helpers import coefficient_vector, executor_datasets

import sparkml
from sparkml.classification import LogisticRegression
from sparkml.data import reuse


@pytest.fixture(autouse=True)
def reuse_on(spark):
    """On, as by default (the test session's default too; a test here may turn it off), with nothing kept by
    earlier tests."""
    sparkml.release_conversions(spark)
    spark.conf.set(reuse.ENABLED_KEY, "true")
    yield
    spark.conf.unset(reuse.ENABLED_KEY)


@pytest.fixture
def frame(spark):
    df = linear_frame(spark, n=500, d=4, partitions=2, seed=5)
    df.count()
    yield df
    df.unpersist()
    sparkml.release_conversions(spark)


@pytest.fixture
def conf(spark):
    """Sets runtime conf keys for one test."""
    keys = []

    def set_(key, value):
        keys.append(key)
        spark.conf.set(key, value)

    yield set_
    for key in keys:
        spark.conf.unset(key)


def _messages(caplog, text):
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def test_a_second_fit_reuses_the_conversion_bit_for_bit(spark, frame, conf, caplog):
    with caplog.at_level(logging.INFO, logger="sparkml"):
        first = LogisticRegression(regParam=0.01).fit(frame)
        kept = reuse.kept(spark)
        assert len(kept) == 1 and kept[0] in executor_datasets(spark)
        second = LogisticRegression(regParam=0.1).fit(frame)
    assert reuse.kept(spark) == kept and len(_messages(caplog, "reusing the conversion")) == 1
    spark.conf.set(reuse.ENABLED_KEY, "false")
    for model, reg in ((first, 0.01), (second, 0.1)):
        fresh = LogisticRegression(regParam=reg).fit(frame)
        np.testing.assert_array_equal(coefficient_vector(model), coefficient_vector(fresh))
    assert reuse.kept(spark) == kept  # off: nothing more kept


def test_only_a_cached_dataframe_or_the_same_conversion_is_reused(spark, frame):
    plain = frame.select("features", "label")  # another plan, not cached
    before = executor_datasets(spark)
    LogisticRegression().fit(plain)
    assert reuse.kept(spark) == [] and executor_datasets(spark) == before
    LogisticRegression(dtype="float32").fit(frame)
    LogisticRegression(dtype="float64").fit(frame)
    LogisticRegression(dtype="float64", regParam=0.5).fit(frame)
    assert len(reuse.kept(spark)) == 2


def test_unpersist_releases_at_the_next_fit(spark, frame):
    LogisticRegression().fit(frame)
    (kept,) = reuse.kept(spark)
    frame.unpersist()
    other = linear_frame(spark, n=100, d=4, partitions=2, seed=6)
    try:
        LogisticRegression().fit(other)
        assert kept not in reuse.kept(spark) and kept not in executor_datasets(spark)
    finally:
        other.unpersist()


def test_the_byte_cap_releases_the_least_recently_used(spark, frame, conf):
    other = linear_frame(spark, n=400, d=4, partitions=2, seed=8)
    other.count()
    try:
        LogisticRegression().fit(frame)
        (first,) = reuse.kept(spark)
        LogisticRegression().fit(other)
        assert len(reuse.kept(spark)) == 2
        LogisticRegression(regParam=0.3).fit(frame)  # frame's conversion is now the most recently used
        conf(reuse.MAX_BYTES_KEY, "20k")  # 500 x 4 float32 + labels and weights: one conversion fits
        LogisticRegression(regParam=0.2).fit(frame)
        assert reuse.kept(spark) == [first]
        assert first in executor_datasets(spark) and len(executor_datasets(spark) & set(reuse.kept())) == 1
    finally:
        other.unpersist()


def test_release_conversions(spark, frame):
    LogisticRegression().fit(frame)
    (kept,) = reuse.kept(spark)
    assert sparkml.release_conversions(spark) == 1
    assert reuse.kept(spark) == [] and kept not in executor_datasets(spark)


@pytest.mark.parametrize("strategy", ["sync", "allreduce"])
def test_blocks_gone_since_are_converted_again(spark, frame, caplog, strategy):
    first = LogisticRegression(regParam=0.01, strategy=strategy).fit(frame)
    (kept,) = reuse.kept(spark)

    def drop(items):
        for _ in items:
            pass
        from sparkml.data import block_store

        block_store.drop(kept)  # the files only: Python workers that did not run this task keep open copies
        yield 0

    spark.sparkContext.parallelize(range(8), 8).mapPartitions(drop).collect()
    assert kept not in executor_datasets(spark)
    with caplog.at_level(logging.WARNING, logger="sparkml"):
        again = LogisticRegression(regParam=0.01, strategy=strategy).fit(frame)
    assert _messages(caplog, "converting it again")
    np.testing.assert_array_equal(coefficient_vector(again), coefficient_vector(first))
    assert reuse.kept(spark) != [kept] and len(reuse.kept(spark)) == 1


def test_a_stopped_sessions_entries_are_dropped(spark, frame, monkeypatch):
    LogisticRegression().fit(frame)
    assert len(reuse.kept(spark)) == 1
    monkeypatch.setattr(reuse, "is_stopped", lambda s: True)
    with reuse._LOCK:
        assert reuse._sweep(spark) == []  # nothing to release: the executors deleted them with the session
    assert reuse.kept(spark) == []


def test_bad_settings_are_refused(spark, frame, conf):
    conf(reuse.MAX_BYTES_KEY, "lots")
    with pytest.raises(ValueError, match="spark.sparkml.conversionCache.maxBytes must be a byte count"):
        LogisticRegression().fit(frame)
    assert reuse.parse_bytes("2g") == 2 << 30 and reuse.parse_bytes("512m") == 512 << 20
    assert reuse.parse_bytes("1000") == 1000


def test_on_unless_turned_off(spark, monkeypatch):
    monkeypatch.setattr(reuse, "conf_value", lambda session, key: None)
    assert reuse.enabled(spark)
    monkeypatch.setattr(reuse, "conf_value", lambda session, key: "False")
    assert not reuse.enabled(spark)
    monkeypatch.setattr(reuse, "conf_value", lambda session, key: "no")
    with pytest.raises(ValueError, match="spark.sparkml.conversionCache.enabled must be true or false"):
        reuse.enabled(spark)
