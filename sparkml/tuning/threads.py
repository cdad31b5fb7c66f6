"""Running a validator's tasks from ``parallelism`` threads, as pyspark's validators do."""

from __future__ import annotations

from multiprocessing.pool import ThreadPool

from sparkml.runtime.compat import thread_target


def in_threads(spark, task, count: int, parallelism: int):
    """The results of ``count`` calls of ``task()``, made from ``min(parallelism, count)`` threads that inherit
    the caller's Spark local properties (job group, scheduler pool), in the order they finish."""
    wrapped = thread_target(spark, task)
    with ThreadPool(processes=max(1, min(parallelism, count))) as pool:
        yield from pool.imap_unordered(lambda _: wrapped(), range(count))
