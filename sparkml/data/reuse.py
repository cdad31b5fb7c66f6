"""Conversions kept between fits of one cached DataFrame.

A fit converts its DataFrame into blocks on the executors (``TrainingData.prepare``): for a small or
medium fit, often most of its time. A notebook trying regParam values by hand, a job fitting two
candidates or refitting for evaluation, fits the same DataFrame again. When that DataFrame is cached
(``df.cache()`` or ``persist()``: Spark then serves the same rows to every job until ``unpersist``),
its conversion is kept, and a later fit of the same data (``DataFrame.sameSemantics``: the same
analyzed plan, whatever Python object holds it) converted alike (the same columns, dtypes, number of
blocks and barrier layout: ``TorchEstimator._conversion``) trains on the kept blocks, bit for bit as
on a fresh conversion. A DataFrame that is not cached is converted by every fit, as Spark would
recompute it.

A kept conversion is released (its blocks deleted on the executors):

* when its DataFrame is no longer cached: noticed by the next fit in the session, or ``release_all``;
* least recently used first, when the session's kept conversions would hold more than
  ``spark.sparkml.conversionCache.maxBytes`` (default ``2g``; ``k``, ``m``, ``g`` suffixes) of blocks;
* by ``sparkml.release_conversions(spark)``;
* with the session: a stopped session's executors delete their directories, and its entries are dropped.

``spark.sparkml.conversionCache.enabled=false`` turns reuse off (every fit converts, as before). The
kept blocks take about the DataFrame's feature values in the ``dtype`` Param (float32 by default) on
the executors' local disks, and in the memory of the Python workers that read them.

A fit whose kept blocks are gone (an executor died since) converts again (``TorchEstimator``).
"""

import logging
import re
import threading
import time

from sparkml.runtime.session_kind import conf_value, is_stopped

logger = logging.getLogger("sparkml")

ENABLED_KEY = "spark.sparkml.conversionCache.enabled"
MAX_BYTES_KEY = "spark.sparkml.conversionCache.maxBytes"
DEFAULT_MAX_BYTES = 2 << 30

_LOCK = threading.Lock()
_ENTRIES: list["_Entry"] = []  # [_Entry], most recently used last


class _Entry:
    def __init__(self, df, arguments, data):
        self.df, self.arguments, self.data = df, arguments, data
        self.users, self.last_used, self.doomed = 0, time.monotonic(), False


def parse_bytes(text):
    """``"512m"`` -> 536870912: a byte count with an optional k, m, g or t suffix (powers of 1024)."""
    m = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)b?\s*", str(text).lower())
    if not m:
        raise ValueError(f"{MAX_BYTES_KEY} must be a byte count such as 2g, 512m or 1000000; got {text!r}")
    return int(m.group(1)) << (10 * " kmgt".index(m.group(2) or " "))


def enabled(spark):
    value = conf_value(spark, ENABLED_KEY)
    if value is None:
        return True
    if str(value).lower() not in ("true", "false"):
        raise ValueError(f"{ENABLED_KEY} must be true or false; got {value!r}")
    return str(value).lower() == "true"


def _max_bytes(spark):
    value = conf_value(spark, MAX_BYTES_KEY)
    return DEFAULT_MAX_BYTES if value is None else parse_bytes(value)


def _is_cached(df):
    level = df.storageLevel
    return bool(level.useMemory or level.useDisk or level.useOffHeap)


def _same(entry, df, arguments):
    return entry.arguments == arguments and entry.df.sparkSession is df.sparkSession and entry.df.sameSemantics(df)


def _sweep(spark, keep=None):
    """Remove (and return, to release outside the lock) the entries of stopped sessions and of DataFrames
    no longer cached, then the least recently used of ``spark``'s session beyond its byte cap; an entry in
    use is released by its last user instead. Under ``_LOCK``."""
    gone = []
    for e in list(_ENTRIES):
        if is_stopped(e.df.sparkSession):
            _ENTRIES.remove(e)  # its executors are gone with their directories: nothing to release
        elif e.df.sparkSession is spark and not _is_cached(e.df):
            _ENTRIES.remove(e)
            gone.append(e)
    cap = _max_bytes(spark)
    mine = [e for e in _ENTRIES if e.df.sparkSession is spark]
    total = sum(e.data.nbytes for e in mine)
    for e in sorted(mine, key=lambda e: e.last_used):
        if total <= cap:
            break
        if e is not keep:
            _ENTRIES.remove(e)
            gone.append(e)
            total -= e.data.nbytes
    released = []
    for e in gone:
        if e.users:
            e.doomed = True  # released by ``done`` when its last fit ends
        else:
            released.append(e)
    return released


def _release(entries):
    for e in entries:
        logger.info("releasing the kept conversion of dataset %s", e.data.dataset_id)
        e.data.release()


def acquire(df, arguments, prepare):
    """(data, entry, reused) for a fit of ``df`` converted with ``arguments``: the kept conversion when there
    is one (reused True), else ``prepare()``'s, kept when ``df`` is cached and reuse is on, or the fit's own
    to release (entry None). A fit hands an entry back with ``done``."""
    spark = df.sparkSession
    if not enabled(spark) or not _is_cached(df):
        return prepare(), None, False
    with _LOCK:
        stale = _sweep(spark)
        hit = next((e for e in _ENTRIES if _same(e, df, arguments)), None)
        if hit is not None:
            hit.users += 1
            hit.last_used = time.monotonic()
            _ENTRIES.remove(hit)
            _ENTRIES.append(hit)
    _release(stale)
    if hit is not None:
        logger.info("reusing the conversion of dataset %s (%d rows)", hit.data.dataset_id, hit.data.summary.rows)
        return hit.data, hit, True
    data = prepare()
    entry = _Entry(df, arguments, data)
    entry.users = 1
    with _LOCK:
        _ENTRIES.append(entry)
        stale = _sweep(spark, keep=entry)
    _release(stale)
    return data, entry, False


def done(entry, broken=False):
    """A fit ended with ``entry``'s conversion; ``broken``: its blocks are gone (released now)."""
    with _LOCK:
        entry.users -= 1
        if broken and entry in _ENTRIES:
            _ENTRIES.remove(entry)
            entry.doomed = True
        release = entry.doomed and entry.users == 0
    if release:
        _release([entry])


def release_all(spark=None):
    """Release every kept conversion (of ``spark``'s session only, when given); those in use when their fit
    ends. Returns how many were released or doomed."""
    with _LOCK:
        mine = [e for e in _ENTRIES if spark is None or e.df.sparkSession is spark]
        for e in mine:
            _ENTRIES.remove(e)
            e.doomed = True
        now = [e for e in mine if e.users == 0]
    _release(e for e in now if not is_stopped(e.df.sparkSession))
    return len(mine)


def kept(spark=None):
    """The dataset ids of the kept conversions (of ``spark``'s session when given), least recently used first."""
    with _LOCK:
        return [e.data.dataset_id for e in _ENTRIES if spark is None or e.df.sparkSession is spark]
