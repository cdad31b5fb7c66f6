"""The Spark task that executor code runs in: its partition, its cores, its barrier stage.

Task-side code (the conversion, the partition sums, the barrier tasks) asks here instead of importing pyspark,
so the same code runs where there is no Spark: a harness installs a stand-in with ``use`` (for instance a test
of the executor path on a GPU machine without Spark). This module is the only door from that code to pyspark,
which it imports inside a running task only.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_stand_in: Any = None


def current() -> Any:
    """The running task's context (pyspark's ``TaskContext``; None outside a task), or the stand-in."""
    if _stand_in is not None:
        return _stand_in
    from pyspark import TaskContext

    return TaskContext.get()


def barrier() -> Any:
    """The running barrier task's context (pyspark's ``BarrierTaskContext``), or the stand-in."""
    if _stand_in is not None:
        return _stand_in
    from pyspark import BarrierTaskContext

    return BarrierTaskContext.get()


@contextmanager
def use(stand_in: Any) -> Iterator[Any]:
    """Run task code with ``stand_in`` as its context: an object with ``partitionId()``, ``cpus()`` and, for
    barrier tasks, ``getTaskInfos()`` (items with an ``address``) and ``allGather(message)``."""
    global _stand_in
    previous, _stand_in = _stand_in, stand_in
    try:
        yield stand_in
    finally:
        _stand_in = previous
