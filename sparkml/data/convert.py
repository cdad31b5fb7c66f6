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
_MOMENT_ROWS = 8192


def _chunks(batches, name):
    """The Arrow arrays of one column across the batches (a ChunkedArray contributes its chunks)."""
    chunks = []
    for b in batches:
        col = b.column(name)
        chunks.extend(col.chunks if hasattr(col, "chunks") else [col])
    return chunks


def _concat(batches, name):
    return pa.concat_arrays(_chunks(batches, name))


def _dense_rows(chunks, dtype):
    """list<float> chunks -> one (n, d) array, filled chunk by chunk (no concatenated Arrow copy);
    reports null rows and ragged sizes instead of raising."""
    lengths = np.concatenate([np.asarray(c.value_lengths().fill_null(-1), dtype=np.int64) for c in chunks])
    nulls = sum(c.null_count for c in chunks)
    problems = {"null_features": int(nulls)}
    sizes = np.unique(lengths[lengths >= 0])
    if len(sizes) > 1:
        problems["feature_sizes"] = [int(s) for s in sizes[:5]]
    if nulls or len(sizes) > 1 or len(lengths) == 0:
        return None, problems, int(sizes[0]) if len(sizes) else 0
    d = int(sizes[0])
    out, at = np.empty((len(lengths), d), dtype=dtype), 0
    for c in chunks:
        out[at:at + len(c)] = c.flatten().to_numpy(zero_copy_only=False).reshape(len(c), d)
        at += len(c)
    return out, problems, d


def _sparse_rows(column, dtype):
    """A VectorUDT struct column -> CSR (indptr, indices, values); dense-typed rows are expanded."""
    problems = {"null_features": int(column.null_count)}
    if column.null_count:
        return None, problems, 0
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
        problems["feature_sizes"] = [int(s) for s in unique_sizes[:5]]
        return None, problems, 0
    d = int(unique_sizes[0]) if n else 0
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
    return (indptr, indices, values), problems, d


def _moments(x, w):
    """(sum w x, sum w x^2) per feature, float64, for dense (n, d) or CSR parts."""
    if isinstance(x, tuple):
        indptr, indices, values = x
        rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        wv = w[rows] * values.astype(np.float64)
        d = int(indices.max()) + 1 if len(indices) else 0
        return np.bincount(indices, wv, d), np.bincount(indices, wv * values, d)
    s1, s2 = np.zeros(x.shape[1]), np.zeros(x.shape[1])
    for i in range(0, len(x), _MOMENT_ROWS):  # chunks: no (n, d) temporary for x * x
        c, wc = x[i:i + _MOMENT_ROWS].astype(np.float64, copy=False), w[i:i + _MOMENT_ROWS]
        s1 += wc @ c
        s2 += wc @ (c * c)
    return s1, s2


def _nonfinite_count(x):
    values = x[2] if isinstance(x, tuple) else x
    return int(values.size - np.count_nonzero(np.isfinite(values)))


def convert_partition(batches, dataset_id, sparse, dtype):
    """Validate one partition, write its blocks, and return its statistics row."""
    from pyspark import TaskContext

    partition = TaskContext.get().partitionId()
    batches = [b for b in batches if b.num_rows]
    info = {"partition": partition, "rows": 0, "store": block_store.store_key()}
    moments = b""
    if batches:
        if sparse:
            x, problems, d = _sparse_rows(_concat(batches, "x"), np.dtype(dtype))
        else:
            x, problems, d = _dense_rows(_chunks(batches, "x"), np.dtype(dtype))
        y_col = _concat(batches, "y")
        w_col = _concat(batches, "w")
        info.update(problems)
        info["null_labels"] = int(y_col.null_count)
        info["null_weights"] = int(w_col.null_count)
        y = y_col.fill_null(0.0).to_numpy(zero_copy_only=False).astype(np.float64)
        w = w_col.fill_null(1.0).to_numpy(zero_copy_only=False).astype(np.float64)
        info.update(rows=len(y), n_features=d, nonfinite_labels=int(np.sum(~np.isfinite(y))),
                    negative_weights=int(np.sum(w < 0)), nonfinite_weights=int(np.sum(~np.isfinite(w))))
        if x is not None:
            sx, sxx = _moments(x, w)
            # NaN/inf in x always reaches the weighted sums (0 * inf is NaN): count only then
            finite = bool(np.all(np.isfinite(sx)) and np.all(np.isfinite(sxx)))
            info["nonfinite_features"] = 0 if finite else _nonfinite_count(x)
            finite_y = y[np.isfinite(y)]
            info.update(label_min=float(finite_y.min(initial=np.inf)), label_max=float(finite_y.max(initial=-np.inf)),
                        label_integral=bool(np.all(finite_y == np.round(finite_y))),
                        w_sum=float(w.sum()), w_sq_sum=float((w * w).sum()),
                        wy_sum=float(w @ y), wy_sq_sum=float(w @ (y * y)))
            sx, sxx = np.pad(sx, (0, d - len(sx))), np.pad(sxx, (0, d - len(sxx)))
            hist = np.zeros(0)
            if (not info["nonfinite_labels"] and info["label_integral"] and 0 <= info["label_min"]
                    and info["label_max"] < MAX_CLASSES):  # NaN labels are reported, not histogrammed
                hist = np.bincount(y.astype(np.int64), w, int(info["label_max"]) + 1)
            info["n_classes_hist"] = len(hist)
            moments = np.concatenate([sx, sxx, hist]).astype(np.float64).tobytes()
            if not _has_problems(info):
                arrays = {"y": y, "w": w}
                if sparse:
                    arrays.update(indptr=x[0], indices=x[1], values=x[2], shape=np.array([len(y), d]))
                else:
                    arrays["x"] = x
                block_store.write_partition(dataset_id, partition, arrays)
    yield pa.RecordBatch.from_pydict(
        {"partition": [partition], "rows": [info["rows"]], "info": [json.dumps(info)], "moments": [moments]},
        schema=pa.schema([("partition", pa.int32()), ("rows", pa.int64()), ("info", pa.string()), ("moments", pa.binary())]),
    )


PROBLEM_KEYS = ("null_features", "feature_sizes", "null_labels", "null_weights", "nonfinite_features",
                "nonfinite_labels", "negative_weights", "nonfinite_weights")


def _has_problems(info):
    return any(info.get(k) for k in PROBLEM_KEYS)
