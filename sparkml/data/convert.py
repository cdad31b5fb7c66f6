"""Executor side of the data path: Arrow batches of one partition -> validated numpy blocks on disk.

Runs inside ``mapInArrow``. Dense input arrives as ``vector_to_array(features)`` (a list column);
sparse input as the ``VectorUDT`` struct itself (type, size, indices, values) and becomes CSR.
Every partition returns one row of statistics (weighted moments, label histogram, problem counts),
from which the driver validates the whole dataset and derives standardization before any iteration.
"""
import json

import numpy as np
import pyarrow as pa

from sparkml import block_store

STATS_SCHEMA = "partition int, rows long, info string, moments binary"
MAX_CLASSES = 10_000  # a label above this is reported, not histogrammed
_MOMENT_ROWS = 1024


def _concat(batches, name):
    """One Arrow array of a column across the batches (a ChunkedArray contributes its chunks)."""
    chunks = []
    for b in batches:
        col = b.column(name)
        chunks.extend(col.chunks if hasattr(col, "chunks") else [col])
    return pa.concat_arrays(chunks)


def _dense_rows(column, dtype):
    """A list<float> Arrow array -> ((n, d) array or None, sizes seen, null rows)."""
    lengths = np.asarray(column.value_lengths().fill_null(-1), dtype=np.int64)
    sizes = set(np.unique(lengths[lengths >= 0]).tolist())
    if column.null_count or len(sizes) != 1:
        return None, sizes, column.null_count
    d = sizes.pop()
    x = column.flatten().to_numpy(zero_copy_only=False).reshape(len(column), d).astype(dtype, copy=False)
    return x, {d}, 0


def _sparse_rows(column, dtype):
    """A VectorUDT struct column -> (CSR (indptr, indices, values) or None, sizes seen); dense-typed
    rows are expanded. None when rows are null or of different sizes."""
    if column.null_count:
        return None, set()
    kind = column.field("type").to_numpy(zero_copy_only=False)
    sizes = column.field("size").to_numpy(zero_copy_only=False)
    value_lists = column.field("values")
    index_lists = column.field("indices")
    n = len(column)
    row_nnz = np.asarray(value_lists.value_lengths(), dtype=np.int64)
    dense_rows = kind == 1
    if dense_rows.any():  # dense vectors carry no size field: their length is their size
        sizes = np.where(dense_rows, row_nnz, sizes)
    unique_sizes = np.unique(sizes)
    if len(unique_sizes) > 1:
        return None, set(unique_sizes.tolist())
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(row_nnz, out=indptr[1:])
    values = value_lists.flatten().to_numpy(zero_copy_only=False).astype(dtype, copy=False)
    if dense_rows.any():
        indices = np.empty(indptr[-1], dtype=np.int32)
        for i in np.flatnonzero(dense_rows):
            indices[indptr[i]:indptr[i + 1]] = np.arange(row_nnz[i], dtype=np.int32)
        sparse = np.flatnonzero(~dense_rows)
        if len(sparse):
            idx_flat = index_lists.flatten().to_numpy(zero_copy_only=False)
            idx_len = np.asarray(index_lists.value_lengths().fill_null(0), dtype=np.int64)
            idx_off = np.concatenate([[0], np.cumsum(idx_len)])
            for i in sparse:
                indices[indptr[i]:indptr[i + 1]] = idx_flat[idx_off[i]:idx_off[i + 1]]
    else:
        indices = index_lists.flatten().to_numpy(zero_copy_only=False).astype(np.int32, copy=False)
    return (indptr, indices, values), set(unique_sizes.tolist())


def _moments(x, w):
    """(sum w x, sum w x^2) per feature, float64, for dense (n, d) or CSR parts."""
    if isinstance(x, tuple):
        indptr, indices, values = x
        rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        wv = w[rows] * values.astype(np.float64)
        d = int(indices.max()) + 1 if len(indices) else 0
        return np.bincount(indices, wv, d), np.bincount(indices, wv * values, d)
    d = x.shape[1]
    s1, s2 = np.zeros(d), np.zeros(d)
    # float64 copies of 1024 rows and their squares in two reused buffers that stay in cache:
    # 0.6x the time of converting 8192-row chunks into fresh arrays (250k x 100 float32, one core)
    c, cc = np.empty((_MOMENT_ROWS, d)), np.empty((_MOMENT_ROWS, d))
    for i in range(0, len(x), _MOMENT_ROWS):
        k = min(_MOMENT_ROWS, len(x) - i)
        np.copyto(c[:k], x[i:i + k])
        np.multiply(c[:k], c[:k], out=cc[:k])
        s1 += w[i:i + k] @ c[:k]
        s2 += w[i:i + k] @ cc[:k]
    return s1, s2


def _nonfinite_count(x):
    values = x[2] if isinstance(x, tuple) else x
    return int(values.size - np.count_nonzero(np.isfinite(values)))


class PartitionStats:
    """Statistics and input problems of one partition, accumulated batch by batch."""

    def __init__(self):
        self.rows, self.sizes = 0, set()
        self.problems = dict.fromkeys(("null_features", "null_labels", "null_weights", "nonfinite_features",
                                       "nonfinite_labels", "negative_weights", "nonfinite_weights"), 0)
        self.sx = self.sxx = None
        self.w_sum = self.w_sq_sum = self.wy_sum = self.wy_sq_sum = 0.0
        self.label_min, self.label_max, self.label_integral = np.inf, -np.inf, True
        self.hist = np.zeros(0)  # weighted label histogram, while every label is a class index

    def labels(self, y_col, w_col):
        """The batch's (y, w) as float64 (nulls filled), counting their problems."""
        p = self.problems
        p["null_labels"] += y_col.null_count
        p["null_weights"] += w_col.null_count
        y = np.asarray(y_col.fill_null(0.0).to_numpy(zero_copy_only=False), dtype=np.float64)
        w = np.asarray(w_col.fill_null(1.0).to_numpy(zero_copy_only=False), dtype=np.float64)
        finite = np.isfinite(y)
        p["nonfinite_labels"] += int(len(y) - np.count_nonzero(finite))
        p["negative_weights"] += int(np.count_nonzero(w < 0))
        p["nonfinite_weights"] += int(len(w) - np.count_nonzero(np.isfinite(w)))
        fy = y[finite]
        if len(fy):
            self.label_min, self.label_max = min(self.label_min, fy.min()), max(self.label_max, fy.max())
            self.label_integral &= bool(np.all(fy == np.round(fy)))
        self.rows += len(y)
        self.w_sum += float(w.sum())
        self.w_sq_sum += float(w @ w)
        self.wy_sum += float(w @ y)
        self.wy_sq_sum += float(w @ (y * y))
        if self.hist is not None:
            if len(fy) == len(y) and self.label_integral and self.label_min >= 0 and self.label_max < MAX_CLASSES:
                h = np.bincount(y.astype(np.int64), w, len(self.hist))
                h[:len(self.hist)] += self.hist
                self.hist = h
            elif len(y):
                self.hist = None  # NaN, fractional, negative or huge labels: reported, not histogrammed
        return y, w

    def features(self, x, w, sizes, nulls):
        """Add the batch's features (None when its rows are null or ragged)."""
        self.problems["null_features"] += int(nulls)
        self.sizes |= sizes
        if x is None:
            return
        s1, s2 = _moments(x, w)
        d = max(self.sizes)
        if not (np.all(np.isfinite(s1)) and np.all(np.isfinite(s2))):
            # NaN/inf in x always reaches the weighted sums (0 * inf is NaN): count only then
            self.problems["nonfinite_features"] += _nonfinite_count(x)
        if self.sx is None:
            self.sx, self.sxx = np.zeros(d), np.zeros(d)
        if len(s1) <= len(self.sx):
            self.sx[:len(s1)] += s1
            self.sxx[:len(s2)] += s2

    def has_problems(self):
        return any(self.problems.values()) or len(self.sizes) > 1

    def info(self):
        info = {k: int(v) for k, v in self.problems.items()}
        if len(self.sizes) > 1:
            info["feature_sizes"] = sorted(int(s) for s in self.sizes)[:5]
        d = max(self.sizes) if self.sizes else 0
        info.update(rows=self.rows, n_features=d, label_min=float(self.label_min), label_max=float(self.label_max),
                    label_integral=bool(self.label_integral), w_sum=self.w_sum, w_sq_sum=self.w_sq_sum,
                    wy_sum=self.wy_sum, wy_sq_sum=self.wy_sq_sum)
        hist = self.hist if self.hist is not None else np.zeros(0)
        info["n_classes_hist"] = len(hist)
        sx = self.sx if self.sx is not None else np.zeros(d)
        sxx = self.sxx if self.sxx is not None else np.zeros(d)
        return info, np.concatenate([sx, sxx, hist]).astype(np.float64).tobytes()


def _warm_torch():
    """Import torch in the background while this task waits on Arrow batches: the next stage
    (an iteration, or the allreduce barrier stage) then finds it loaded in this reused worker."""
    import threading

    def load():
        try:
            import torch  # noqa: F401
        except Exception:  # the iteration's own import reports it
            pass

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    return thread


def convert_partition(batches, dataset_id, sparse, dtype):
    """Validate one partition, write its blocks batch by batch, and return its statistics row."""
    from pyspark import TaskContext

    partition = TaskContext.get().partitionId()
    warm = _warm_torch()
    stats, dtype = PartitionStats(), np.dtype(dtype)
    writer = block_store.PartitionWriter(dataset_id, partition)
    try:
        if sparse:  # CSR needs the whole partition (row offsets); sparse partitions are small
            batches = [b for b in batches if b.num_rows]
            if batches:
                y, w = stats.labels(_concat(batches, "y"), _concat(batches, "w"))
                column = _concat(batches, "x")
                x, sizes = _sparse_rows(column, dtype)
                stats.features(x, w, sizes, column.null_count)
                if not stats.has_problems():
                    indptr, indices, values = x
                    for name, array in (("indptr", indptr), ("indices", indices), ("values", values),
                                        ("shape", np.array([len(y), max(sizes)])), ("y", y), ("w", w)):
                        writer.append(name, array)
        else:
            for batch in batches:
                if not batch.num_rows:
                    continue
                y, w = stats.labels(batch.column("y"), batch.column("w"))
                x, sizes, nulls = _dense_rows(batch.column("x"), dtype)
                stats.features(x, w, sizes, nulls)
                if not stats.has_problems():  # after a problem: keep counting, stop writing
                    writer.append("x", x)
                    writer.append("y", y)
                    writer.append("w", w)
        if stats.rows and not stats.has_problems():
            writer.commit()
        else:
            writer.abort()
    except BaseException:
        writer.abort()
        raise
    finally:
        warm.join()
    info, moments = stats.info()
    info.update(partition=partition, store=block_store.store_key())
    yield stats_batch(partition, info["rows"], json.dumps(info), moments)


def stats_batch(partition, rows, info, moments):
    """One handle row (``STATS_SCHEMA``) as an Arrow batch."""
    schema = pa.schema([("partition", pa.int32()), ("rows", pa.int64()), ("info", pa.string()),
                        ("moments", pa.binary())])
    return pa.RecordBatch.from_pydict({"partition": [partition], "rows": [rows], "info": [info],
                                       "moments": [moments]}, schema=schema)


PROBLEM_KEYS = ("null_features", "feature_sizes", "null_labels", "null_weights", "nonfinite_features",
                "nonfinite_labels", "negative_weights", "nonfinite_weights")


