"""A hash-random sample of a conversion's stored rows, taken where they are: ``sample_blocks`` runs one Spark job
over a ``TrainingData``'s handles, each task ``sample_partition`` over its partitions (no pyspark here).

Each row gets a key u in [0, 1) that is a hash of (seed, label, the row's stored feature values): the same rows
are picked whatever the partitioning or the row order, and a larger bound picks a superset of a smaller one's
rows. The hash is splitmix64's finalizer chained over the label's and each feature's bits (the values as the
conversion stored them: float32 for a float32 fit), the top 53 bits read as a fraction.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from sparkml.data import block_store
from sparkml.data.convert import handle_pairs, handle_rows
from sparkml.runtime import worker_socket

# a Spark Connect job's rows (``sample_blocks``): a partition's sample as raw bytes, x in its stored dtype
SAMPLE_SCHEMA = "x binary, y binary, w binary, u binary, dtype string"

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)


def _mix(z):
    """splitmix64's finalizer, elementwise on uint64 (wrapping arithmetic)."""
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


def _bits(a):
    """The values' bit patterns as uint64 (float32 and float64 alike)."""
    a = np.ascontiguousarray(a)
    return a.view(np.uint32 if a.itemsize == 4 else np.uint64).astype(np.uint64)


def row_keys(x, y, seed):
    """(n,) float64 in [0, 1): each row's key, a hash of (seed, y_i, x_i's values) (module docstring)."""
    with np.errstate(over="ignore"):
        start = np.uint64(int(seed) & 0xFFFFFFFFFFFFFFFF) ^ _GOLDEN
        h = _mix(np.full(len(y), start) ^ _bits(np.asarray(y, np.float64)))
        for column in _bits(x).T:
            h = _mix((h + _GOLDEN) ^ column)
    return (h >> _S11).astype(np.float64) / float(1 << 53)


def sample_partition(dataset_id, partition, bounds, seed):
    """(x, y, w, u) of the partition's rows of positive weight whose key u is below their class's bound
    (``bounds``: {label: fraction}; None: every such row), as stored (x (n', d) in the stored dtype)."""
    arrays = block_store.partition_arrays(dataset_id, partition)
    x, y, w = np.asarray(arrays["x"]), np.asarray(arrays["y"], np.float64), np.asarray(arrays["w"], np.float64)
    u = row_keys(x, y, seed)
    keep = w > 0
    if bounds is not None:
        bound = np.zeros(len(y))  # a label of no bound: none of its rows
        for label, fraction in bounds.items():
            bound[y == label] = fraction
        keep &= u < bound
    return np.ascontiguousarray(x[keep]), y[keep], w[keep], u[keep]


def sample_batch(parts):
    """``sample_partition``'s (x, y, w, u) of each partition as one Arrow batch of ``SAMPLE_SCHEMA``."""
    columns = {
        name: [np.ascontiguousarray(p[i], np.float64 if i else None).tobytes() for p in parts]
        for i, name in enumerate("xywu")
    }
    columns["dtype"] = [np.asarray(p[0]).dtype.str for p in parts]
    schema = pa.schema([(name, pa.binary()) for name in "xywu"] + [("dtype", pa.string())])
    return pa.RecordBatch.from_pydict(columns, schema=schema)


def unpack(row):
    """(x flat in its stored dtype, y, w, u) of one ``SAMPLE_SCHEMA`` row (a mapping of its columns)."""
    return tuple(np.frombuffer(row[name], dtype=row["dtype"] if name == "x" else np.float64) for name in "xywu")


def samples_blocks(data):
    """Whether ``sample_blocks`` can read ``data``'s blocks (a ``TrainingData``): dense rows, stored."""
    return data.sparse is False and bool(getattr(data, "blocks", None))


def sample_blocks(data, bounds, seed):
    """(x (n', d) float64, y, w, u): ``data``'s stored rows of positive weight whose key u is below their class's
    bound (``bounds``: {label: fraction}; None: every row of positive weight), read where the blocks are by one Spark
    job (classic and Connect sessions alike: the same rows). ``samples_blocks(data)`` only."""
    if not samples_blocks(data):
        raise ValueError("sample_blocks reads dense stored blocks")
    source = data.dataset_id

    def run(pairs):
        for partition, rows in pairs:
            if rows:
                yield sample_partition(source, partition, bounds, seed)

    def run_arrow(batches):
        worker_socket.acknowledge_promptly()
        parts = list(run(handle_rows(batches)))
        if parts:
            yield sample_batch(parts)

    if data.connect:
        parts = [unpack(row) for row in data.handles.mapInArrow(run_arrow, SAMPLE_SCHEMA).collect()]
    else:
        parts = data.handles.mapPartitions(lambda it: run(handle_pairs(it))).collect()
    d = data.summary.n_features
    if not parts:
        return np.zeros((0, d)), np.zeros(0), np.zeros(0), np.zeros(0)
    x, y, w, u = (np.concatenate([np.ravel(p[i]) for p in parts]) for i in range(4))
    return np.asarray(x, np.float64).reshape(-1, d), y, w, u
