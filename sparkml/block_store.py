"""Training blocks resident on executors, converted once per fit and read by every iteration.

Moving a partition from the JVM to Python costs 10x to 100x the arithmetic of one pass over it
(shared/DESIGN.md section 3), so the conversion job writes each partition once, as raw ``.npy``
arrays, into the executor's Spark local directory, and every later task reads it back through a
memory map. The page cache is shared by all Python workers of an executor, so the training copy
exists once per partition however many workers touch it; each worker additionally keeps the opened
tensors (or their device copy) in a small per-process cache keyed by dataset and partition.

Files are plain numpy arrays loaded with ``allow_pickle=False``. They live under Spark's own
block-manager directory, which Spark deletes when the application ends; ``drop`` deletes them as
soon as a fit is over.
"""
import os
import shutil
import socket
import tempfile
import uuid

import numpy as np

_OPEN = {}  # (dataset_id, partition, device) -> PartitionData, per Python worker process


class PartitionData:
    """One partition's training rows as tensors: ``block`` (gpu DenseBlock/CsrBlock), ``y``, ``w``."""

    def __init__(self, block, y, w):
        self.block, self.y, self.w = block, y, w

    @property
    def n_rows(self):
        return int(self.y.shape[0])


def root_dir():
    """The executor's local directory (set by Spark for Python workers), else the system temp dir."""
    local = os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0]
    return os.path.join(local or tempfile.gettempdir(), "sparkml-blocks")


def store_key():
    """Where this process's blocks live: processes with the same key can open each other's blocks."""
    return f"{socket.gethostname()}:{root_dir()}"


def new_dataset_id():
    return uuid.uuid4().hex[:16]


def _partition_dir(dataset_id, partition):
    return os.path.join(root_dir(), dataset_id, str(partition))


def write_partition(dataset_id, partition, arrays):
    """Write ``{name: ndarray}`` for one partition atomically (a retried task overwrites cleanly)."""
    final = _partition_dir(dataset_id, partition)
    os.makedirs(os.path.dirname(final), exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{partition}-", dir=os.path.dirname(final))
    for name, array in arrays.items():
        np.save(os.path.join(staging, name + ".npy"), np.ascontiguousarray(array), allow_pickle=False)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(staging, final)
    _evict(lambda key: key[0] == dataset_id and key[1] == partition)


def _load(directory, name):
    # mode "c": copy-on-write map, writable for torch.from_numpy, pages shared until written.
    return np.load(os.path.join(directory, name + ".npy"), mmap_mode="c", allow_pickle=False)


def open_partition(dataset_id, partition, device, dtype):
    """The partition's tensors on ``device``, opened once per worker process and then reused."""
    import torch

    from gpu import CsrBlock, DenseBlock

    key = (dataset_id, partition, str(device))
    hit = _OPEN.get(key)
    if hit is not None:
        return hit
    _evict(lambda k: not os.path.isdir(os.path.join(root_dir(), k[0])))
    directory = _partition_dir(dataset_id, partition)
    if not os.path.isdir(directory):
        raise FileNotFoundError(
            f"training blocks of partition {partition} (dataset {dataset_id}) are not on this "
            f"executor ({directory}); the task ran away from the executor that converted it"
        )

    def tensor(name):
        return torch.from_numpy(_load(directory, name)).to(device)

    if os.path.exists(os.path.join(directory, "x.npy")):
        block = DenseBlock(tensor("x").to(dtype))
    else:
        shape = tuple(int(v) for v in _load(directory, "shape"))
        block = CsrBlock(tensor("indptr"), tensor("indices"), tensor("values").to(dtype), shape)
    data = PartitionData(block, tensor("y"), tensor("w"))
    _OPEN[key] = data
    return data


def drop(dataset_id):
    """Delete a dataset's blocks on this executor and forget any opened tensors."""
    shutil.rmtree(os.path.join(root_dir(), dataset_id), ignore_errors=True)
    _evict(lambda key: key[0] == dataset_id)


def _evict(predicate):
    for key in [k for k in _OPEN if predicate(k)]:
        del _OPEN[key]
