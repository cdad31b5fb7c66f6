"""Executor side of the data path: Arrow batches of one partition -> validated numpy blocks on disk.

Runs inside ``mapInArrow``. Dense input arrives as ``vector_to_array(features)`` (a list column);
sparse input as the ``VectorUDT`` struct itself (type, size, indices, values) and becomes CSR; a small input
converted in one block arrives as the struct too, and the partition's first vector chooses its path
(``vector_columns``).
Every partition returns one row of statistics (``statistics.PartitionStats``: weighted moments,
label histogram, problem counts), from which the driver validates the whole dataset and derives
standardization before any iteration.
"""

import itertools
import json

import numpy as np
import pyarrow as pa

from sparkml.data import block_store
from sparkml.data.gram import GramSums
from sparkml.data.statistics import PartitionStats
from sparkml.data.vector_columns import concat, dense_rows, first_vector_layout, sparse_rows, struct_dense_rows
from sparkml.runtime import fault_injection, task_context, worker_socket

STATS_SCHEMA = "partition int, rows long, info string, moments binary"
INVALID_FOLD = -2  # a row's fold id that names no fold (``convert_partition(folds=True)``)


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


def _offsets(column, stats):
    """A double Arrow column of offsets -> float64 array, its null, NaN and infinite values counted in
    ``stats`` (``bad_offsets``, reported by the driver naming the column) and stored as 0."""
    values = column.to_numpy(zero_copy_only=False).astype(np.float64, copy=True)
    bad = ~np.isfinite(values)  # a null arrives as NaN
    if bad.any():
        stats.problems["bad_offsets"] += int(bad.sum())
        values[bad] = 0.0
    return values


def _partition():
    return task_context.current().partitionId()


def _with_dense_offset(x, offsets):
    """(n, d) rows -> (n, d + 1): the offset as the last column."""
    return np.column_stack([x, offsets.astype(x.dtype, copy=False)])


def _with_sparse_offset(csr, offsets, d):
    """CSR (indptr, indices, values) of n x d -> n x (d + 1): each row's offset stored at column d."""
    indptr, indices, values = csr
    n, counts = len(indptr) - 1, np.diff(indptr)
    new_indptr = indptr + np.arange(n + 1, dtype=indptr.dtype)
    moved = np.arange(len(indices)) + np.repeat(np.arange(n), counts)  # each earlier row gained one entry
    new_indices = np.empty(len(indices) + n, dtype=indices.dtype)
    new_values = np.empty(len(values) + n, dtype=values.dtype)
    new_indices[moved], new_values[moved] = indices, values
    new_indices[new_indptr[1:] - 1], new_values[new_indptr[1:] - 1] = d, offsets
    return new_indptr, new_indices, new_values


def _fold_ids(column):
    """An integer Arrow column of fold ids -> int32 array (a null as ``INVALID_FOLD``)."""
    return np.asarray(column.fill_null(INVALID_FOLD).to_numpy(zero_copy_only=False), dtype=np.int32)


def _with_first_layout(batches):
    """(the batches, those read included, and ``vector_columns.first_vector_layout`` of the first non-null
    vector of their struct column ``x``, or None)."""
    batches, read = iter(batches), []
    for batch in batches:
        read.append(batch)
        layout = first_vector_layout(batch.column("x")) if batch.num_rows else None
        if layout is not None:
            return itertools.chain(read, batches), layout
    return iter(read), None


def convert_partition(batches, dataset_id, sparse, dtype, offset_col=None, folds=False, gram=None):
    """Validate one partition, write its blocks batch by batch, and return its statistics row. ``sparse``: the
    path (True: CSR blocks from the struct; False: dense blocks from ``vector_to_array``'s lists); None: the
    struct, and the partition's first vector chooses (``info["sparse"]`` says which). ``offset_col``:
    the batches carry the offsets as column ``o``, stored as the features' last column. ``folds``: they carry
    each row's fold id as column ``f``, stored as the array ``fold`` (``TrainingData.subset`` reads it); the
    statistics row counts the ids that are ``INVALID_FOLD``. ``gram``: a ``GramPlan``: with at most
    ``gram.max_features`` features, the rows' Gram sums (``data.gram``) follow the statistics in the row
    (``info["gram"]``), and no block is written unless the plan needs the rows."""
    worker_socket.acknowledge_promptly()  # before the first batch: no 40 ms wait for it
    partition = _partition()
    warm = _warm_torch()
    stats, dtype = PartitionStats(), np.dtype(dtype)
    invalid_folds = 0
    sums: GramSums | None = None  # the Gram sums, once the first rows showed d <= gram.max_features
    writer = block_store.PartitionWriter(dataset_id, partition)
    struct = sparse is None
    if struct:
        batches, layout = _with_first_layout(batches)
        sparse = bool(layout and layout[0])
    try:
        with writer:
            if sparse:  # CSR needs the whole partition (row offsets); sparse partitions are small
                batches = [b for b in batches if b.num_rows]
                if batches:
                    y, w = stats.labels(concat(batches, "y"), concat(batches, "w"))
                    column = concat(batches, "x")
                    x, sizes, invalid = sparse_rows(column, dtype)
                    if offset_col and x is not None:
                        d = max(sizes)
                        x, sizes = _with_sparse_offset(x, _offsets(concat(batches, "o"), stats), d), {d + 1}
                    stats.features(x, w, sizes, column.null_count, invalid)
                    if gram and not stats.has_problems() and max(sizes) <= gram.max_features:
                        sums = GramSums(max(sizes), gram)
                        sums.add(x, y, w)
                    if not stats.has_problems() and (sums is None or gram.rows):
                        indptr, indices, values = x
                        arrays = [("indptr", indptr), ("indices", indices), ("values", values)]
                        arrays += [("shape", np.array([len(y), max(sizes)])), ("y", y), ("w", w)]
                        if folds:
                            fold = _fold_ids(concat(batches, "f"))
                            arrays.append(("fold", fold))
                            invalid_folds += int(np.count_nonzero(fold == INVALID_FOLD))
                        for name, array in arrays:
                            writer.append(name, array)
            else:
                for batch in batches:
                    if not batch.num_rows:
                        continue
                    y, w = stats.labels(batch.column("y"), batch.column("w"))
                    if struct:
                        x, sizes, nulls, invalid = struct_dense_rows(batch.column("x"), dtype)
                    else:
                        (x, sizes, nulls), invalid = dense_rows(batch.column("x"), dtype), 0
                    if offset_col and x is not None:
                        x, sizes = _with_dense_offset(x, _offsets(batch.column("o"), stats)), {x.shape[1] + 1}
                    stats.features(x, w, sizes, nulls, invalid)
                    if gram and not stats.has_problems() and x.shape[1] <= gram.max_features:  # every batch's d
                        sums = sums or GramSums(x.shape[1], gram)
                        sums.add(x, y, w)
                    # after a problem: keep counting, stop writing
                    if not stats.has_problems() and (sums is None or gram.rows):
                        writer.append("x", x)
                        writer.append("y", y)
                        writer.append("w", w)
                        if folds:
                            fold = _fold_ids(batch.column("f"))
                            writer.append("fold", fold)
                            invalid_folds += int(np.count_nonzero(fold == INVALID_FOLD))
            writer.finish(stats.rows > 0 and not stats.has_problems() and (sums is None or gram.rows))
    finally:
        warm.join()
    task_context.freeze_imports()  # torch is imported now: the daemon's collection after this task skips it
    info, moments = stats.info()
    info.update(partition=partition, store=block_store.store_key(), bytes=writer.nbytes)
    if sums is not None and not stats.has_problems():
        info["gram"] = True
        moments += sums.to_bytes()
    if folds:
        info["invalid_folds"] = invalid_folds
    if struct:
        info["sparse"] = sparse
    try:
        fault_injection.inject("convert", partition)
        yield stats_batch(partition, info["rows"], json.dumps(info), moments)
    except BaseException:  # the attempt failed after its commit: its retry may run on another executor
        block_store.drop_partitions(dataset_id, [partition])
        raise


def stats_batch(partition, rows, info, moments):
    """One handle row (``STATS_SCHEMA``) as an Arrow batch."""
    schema = pa.schema(
        [("partition", pa.int32()), ("rows", pa.int64()), ("info", pa.string()), ("moments", pa.binary())]
    )
    return pa.RecordBatch.from_pydict(
        {"partition": [partition], "rows": [rows], "info": [info], "moments": [moments]}, schema=schema
    )


def handle_rows(batches):
    """The (partition, rows) pairs of Arrow batches of a handles DataFrame (``STATS_SCHEMA``)."""
    rows: list[tuple[int, int]] = []
    for b in batches:
        rows.extend(zip(b.column("partition").to_pylist(), b.column("rows").to_pylist()))
    return rows


def handle_pairs(rows):
    """(partition, rows) of each handle row a task reads, the worker's socket set first (``worker_socket``)."""
    worker_socket.acknowledge_promptly()
    return [(r[0], r[1]) for r in rows]
