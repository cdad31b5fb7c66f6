"""Training blocks resident on executors, converted once per fit and read by every iteration.

Moving a partition from the JVM to Python costs 10x to 100x the arithmetic of one pass over it
(``benchmarks/bench_conversion.py``, ``bench_blocks.py``), so the conversion job writes each partition once, as raw
arrays
(``<name>.bin`` plus their dtype and shape in ``meta.json``), into the executor's Spark local directory, and every
later task reads it back through a
memory map. The page cache is shared by all Python workers of an executor, so the training copy
exists once per partition however many workers touch it; each worker additionally keeps the opened
tensors (or their device copy) in a small per-process cache keyed by dataset and partition.

Files are plain numbers, never pickles. They live under Spark's own
block-manager directory, which Spark deletes when the application ends; ``drop`` deletes them as
soon as a fit is over.

A task killed when its job aborts can outlive the abort: its Python worker may still commit a
partition after the fit's cleanup has run. ``drop`` therefore leaves a tombstone
(``.<dataset>.dropped``) before deleting, and ``PartitionWriter.commit`` publishes nothing into a
dropped dataset, checking again after its rename so that a commit racing the drop removes itself.
Tombstones are empty files, pruned by later drops once a day old.
"""

import glob
import json
import os
import shutil
import socket
import tempfile
import time
import uuid
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sparkml.gpu.blocks import _Block

# (dataset_id, partition, device) -> PartitionData, per Python worker process
_OPEN: dict[tuple[str, int, str], "PartitionData"] = {}
_TOMBSTONE_TTL_S = 24 * 3600  # far longer than any zombie task lives (Spark kills them within minutes)


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


def _tombstone(dataset_id):
    return os.path.join(root_dir(), f".{dataset_id}.dropped")


def is_dropped(dataset_id):
    """Whether ``drop`` has run for this dataset on this executor."""
    return os.path.exists(_tombstone(dataset_id))


class PartitionWriter:
    """Streams one partition's arrays into a staging directory; ``commit`` publishes them atomically.

    Each array is a raw file grown by ``append`` (rows of a fixed trailing shape), so a partition
    is written batch by batch as Arrow delivers it and never held whole in the worker's memory.
    ``meta.json`` records each array's dtype and shape. A retried task overwrites cleanly.
    The staging directory sits beside the datasets (``.<dataset>-<partition>-*``, same file
    system, so the rename is atomic), and the dataset's directory is created only by ``commit``:
    a writer that never commits leaves nothing a listing of datasets would show.
    """

    def __init__(self, dataset_id, partition):
        self.final = _partition_dir(dataset_id, partition)
        self.dataset_id, self.key = dataset_id, (dataset_id, partition)
        os.makedirs(root_dir(), exist_ok=True)
        self.staging = tempfile.mkdtemp(prefix=f".{dataset_id}-{partition}-", dir=root_dir())
        self.files, self.meta = {}, {}
        self.nbytes = 0  # of the arrays appended
        self.attrs = {}  # plain values beside the arrays (``attrs.json``): a kernel block's kernel

    def append(self, name, rows):
        rows = np.ascontiguousarray(rows)
        meta = self.meta.get(name)
        if meta is None:
            self.files[name] = open(os.path.join(self.staging, name + ".bin"), "wb")
            meta = self.meta[name] = {"dtype": rows.dtype.str, "shape": [0, *rows.shape[1:]]}
        elif rows.dtype.str != meta["dtype"] or list(rows.shape[1:]) != meta["shape"][1:]:
            raise ValueError(f"{name}: appending {rows.dtype}{rows.shape} to {meta}")
        rows.tofile(self.files[name])
        self.nbytes += rows.nbytes
        meta["shape"][0] += len(rows)

    def commit(self):
        """Publish the partition; returns False (and publishes nothing) if the dataset was dropped."""
        for f in self.files.values():
            f.close()
        if is_dropped(self.dataset_id):
            self.abort()
            return False
        with open(os.path.join(self.staging, "meta.json"), "w") as f:
            json.dump(self.meta, f)
        if self.attrs:
            with open(os.path.join(self.staging, "attrs.json"), "w") as f:
                json.dump(self.attrs, f)
        try:
            os.makedirs(os.path.dirname(self.final), exist_ok=True)
            shutil.rmtree(self.final, ignore_errors=True)
            os.replace(self.staging, self.final)
        except FileNotFoundError:  # a concurrent drop removed the directories under us
            self.abort()
            if is_dropped(self.dataset_id):
                return False
            raise
        _evict(lambda key: key[:2] == self.key)
        if is_dropped(self.dataset_id):  # drop ran between the first check and the rename
            drop(self.dataset_id)
            return False
        return True

    def abort(self):
        for f in self.files.values():
            f.close()
        shutil.rmtree(self.staging, ignore_errors=True)

    def finish(self, keep):
        """``commit`` when ``keep`` (the partition's rows are good), else ``abort``."""
        return self.commit() if keep else self.abort()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        """An exception while writing (a bad batch, a killed task) leaves nothing behind."""
        if exc_type is not None:
            self.abort()
        return False


def _load_all(directory):
    """{name: ndarray} of a committed partition. Mode "c": a copy-on-write map, writable for
    torch.from_numpy, its pages shared with every other process until written."""
    with open(os.path.join(directory, "meta.json")) as f:
        meta = json.load(f)
    out = {}
    for name, m in meta.items():
        shape, dtype = tuple(m["shape"]), np.dtype(m["dtype"])
        if np.prod(shape) == 0:
            out[name] = np.zeros(shape, dtype)
        else:
            out[name] = np.memmap(os.path.join(directory, name + ".bin"), dtype=dtype, mode="c", shape=shape)
    return out


def partition_arrays(dataset_id, partition):
    """{name: ndarray} of a partition's committed arrays as stored (memory maps), for a job that reads them
    as numbers rather than as a training block (``sparkml.data.subset``)."""
    directory = _partition_dir(dataset_id, partition)
    if not os.path.isdir(directory):
        raise FileNotFoundError(
            f"blocks of partition {partition} (dataset {dataset_id}) are not on this executor ({directory})"
        )
    return _load_all(directory)


def open_partition(dataset_id, partition, device, dtype):
    """The partition's tensors on ``device``, computing in ``dtype``, opened once per worker process
    and then reused while the partition's directory exists."""
    import torch

    from sparkml.gpu import CsrBlock, DenseBlock
    from sparkml.gpu.factored import FactoredBlock

    key = (dataset_id, partition, str(device))
    directory = _partition_dir(dataset_id, partition)
    hit = _OPEN.get(key)
    if hit is not None and os.path.isdir(directory):  # a copy of deleted blocks is not served (one stat a task)
        return hit
    _evict(lambda k: not os.path.isdir(os.path.join(root_dir(), k[0])))
    if not os.path.isdir(directory):
        raise FileNotFoundError(
            f"training blocks of partition {partition} (dataset {dataset_id}) are not on this "
            f"executor ({directory}); the task ran away from the executor that converted it"
        )

    arrays = _load_all(directory)

    def tensor(name):
        return torch.from_numpy(arrays[name]).to(device)

    def values(name):
        """Float32 rows computed in float64 stay float32 (exact, half the memory); else cast."""
        t = tensor(name)
        return t if (t.dtype, dtype) == (torch.float32, torch.float64) else t.to(dtype)

    block: _Block
    if "rows" in arrays:  # a kernel block stored for its first rows and computed per pass for the rest
        block = _kernel_rows(arrays, directory, values, tensor, dtype)
    elif "x" in arrays:
        block = DenseBlock(values("x"), compute_dtype=dtype)
    else:
        shape = tuple(int(v) for v in arrays["shape"])
        block = CsrBlock(tensor("indptr"), tensor("indices"), values("values"), shape, compute_dtype=dtype)
    if "right" in arrays:  # derived features kept as two factors (``TrainingData.derive``)
        block = FactoredBlock(block, values("right"))
    data = PartitionData(block, tensor("y"), tensor("w"))
    _OPEN[key] = data
    return data


def _kernel_rows(arrays, directory, values, tensor, dtype):
    """K(X, L) of a partition (``sparkml.data.derive``): ``x`` holds it for the first rows (none, or all but
    the ``rows`` that the budget left out), ``rows`` the input rows whose kernel every pass computes
    (``sparkml.gpu.kernel_block``), with ``landmarks`` and the kernel in ``attrs.json``."""
    from sparkml.gpu import DenseBlock
    from sparkml.gpu.kernel_block import KernelBlock
    from sparkml.gpu.stacked import RowStack

    with open(os.path.join(directory, "attrs.json")) as f:
        attrs = json.load(f)
    parts: list[_Block] = []
    if "x" in arrays and len(arrays["x"]):
        parts.append(DenseBlock(values("x"), compute_dtype=dtype))
    if len(arrays["rows"]) or not parts:
        kernel = attrs["kernel"]
        parts.append(
            KernelBlock(
                values("rows"),
                tensor("landmarks"),
                kernel["kind"],
                gamma=kernel["gamma"],
                degree=kernel["degree"],
                coef0=kernel["coef0"],
                compute_dtype=dtype,
                take_bytes=attrs["take_bytes"],
            )
        )
    return parts[0] if len(parts) == 1 else RowStack(parts)


def drop_partitions(dataset_id, partitions):
    """Delete some partitions' blocks on this executor (the last pass over them is done)."""
    for p in partitions:
        shutil.rmtree(_partition_dir(dataset_id, p), ignore_errors=True)
    try:
        os.rmdir(os.path.join(root_dir(), dataset_id))  # the last one out removes the dataset's directory
    except OSError:
        pass
    _evict(lambda key: key[0] == dataset_id and key[1] in set(partitions))


def drop(dataset_id):
    """Delete a dataset's blocks on this executor, forget any opened tensors, and mark it dropped
    (the tombstone goes first: a writer that commits after it sees it and removes itself)."""
    root = root_dir()
    os.makedirs(root, exist_ok=True)
    with open(_tombstone(dataset_id), "w"):
        pass
    shutil.rmtree(os.path.join(root, dataset_id), ignore_errors=True)
    for staging in glob.glob(os.path.join(root, f".{glob.escape(dataset_id)}-*")):
        shutil.rmtree(staging, ignore_errors=True)
    _evict(lambda key: key[0] == dataset_id)
    _prune_tombstones(root)


def _prune_tombstones(root):
    cutoff = time.time() - _TOMBSTONE_TTL_S
    for path in glob.glob(os.path.join(root, ".*.dropped")):
        try:
            if os.path.getmtime(path) < cutoff:
                os.remove(path)
        except OSError:  # another worker pruned it first
            pass


def _evict(predicate):
    for key in [k for k in _OPEN if predicate(k)]:
        del _OPEN[key]
