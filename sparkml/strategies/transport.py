"""How a per-partition computation reaches the executors and its results come back, per session kind.

* classic session: the handles are a cached RDD; values go out in the task closure up to
  ``CLOSURE_BYTES`` (coefficients, mostly), larger ones as broadcasts; results are added by ``treeAggregate``.
* Spark Connect session: there is no SparkContext and no RDD API. The handles are a cached
  DataFrame; values travel inside the function's closure (they are small: coefficients); each
  partition's result comes back as one row of float64 bytes through ``mapInArrow`` and the driver
  adds them. Barrier stages use ``mapInArrow(..., barrier=True)``, which both kinds support.

A partition function takes the handle rows ``(partition, rows, ...)`` and yields at most one tuple
of floats / float64 arrays; the partitions' tuples are added element by element.
"""

import json

import numpy as np

from sparkml.data.convert import handle_rows


class _Value:
    """What a broadcast gives a task, for Spark Connect: the value itself, shipped in the closure."""

    def __init__(self, value):
        self.value = value

    def unpersist(self, blocking=False):
        pass


def add(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return tuple(x + y for x, y in zip(a, b))


def pack(part):
    """A tuple of floats / arrays -> (float64 bytes, JSON shapes)."""
    arrays = [np.asarray(x, dtype=np.float64) for x in part]
    return (np.concatenate([a.ravel() for a in arrays]).tobytes() if arrays else b""), json.dumps(
        [list(a.shape) for a in arrays]
    )


def unpack(data, shapes):
    return split(np.frombuffer(data, dtype=np.float64), json.loads(shapes))


def split(flat, shapes):
    """The tuple ``flat`` (float64) holds, one array per shape in order; shape () gives a float."""
    out, at = [], 0
    for shape in shapes:
        n = int(np.prod(shape)) if len(shape) else 1
        chunk = flat[at : at + n].copy()
        out.append(float(chunk[0]) if not len(shape) else chunk.reshape(shape))
        at += n
    return tuple(out)


PART_SCHEMA = "data binary, shapes string"
# Values up to this size travel in the job's closure: a broadcast costs its own driver calls, a file and a
# fetch per executor, and a small job (one pass of a sync fit over a few thousand rows) pays them on every pass.
CLOSURE_BYTES = 1 << 18


def _arrow_parts(fn):
    def run(batches):
        import pyarrow as pa

        from sparkml.runtime import worker_socket

        worker_socket.acknowledge_promptly()
        for part in fn(handle_rows(batches)):
            data, shapes = pack(part)
            yield pa.RecordBatch.from_pydict({"data": [data], "shapes": [shapes]})

    return run


class Transport:
    """Ships values to, and sums results from, a ``TrainingData``'s partitions."""

    def __init__(self, data, depth=2):
        self.data, self.depth = data, max(2, int(depth))

    def share(self, value):
        """The value in the closure (Spark Connect, or up to ``CLOSURE_BYTES``) or a broadcast; ``.value`` on
        the executor."""
        if self.data.connect or value is None or np.asarray(value).nbytes <= CLOSURE_BYTES:
            return _Value(value)
        return self.data.sc.broadcast(value)

    def sum(self, fn):
        """Element-wise sum of what ``fn(handle_rows)`` yields over all partitions (None if nothing)."""
        if self.data.connect:
            total = None
            for r in self.data.handles.mapInArrow(_arrow_parts(fn), PART_SCHEMA).collect():
                total = add(total, unpack(r[0], r[1]))
            return total
        return self.data.handles.mapPartitions(fn).treeAggregate(None, add, add, depth=self.depth)
