"""Arrow columns of feature vectors -> numpy rows, on the executors (``convert.convert_partition``).

Two forms arrive: ``vector_to_array(features)``, a list of doubles per row (the dense path of a large input:
the JVM writes it about five times faster than the vector itself), and the ``VectorUDT`` struct itself (type,
size, indices, values: 0 sparse, 1 dense), which becomes CSR rows (the sparse path) or dense rows (a small input
converted in one block, whose first vector chooses the path in the conversion task: ``first_vector_layout``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

SPARSE_DENSITY = 0.5  # a first vector sparser than this: the sparse path (CSR blocks, the vector struct)


def concat(batches, name):
    """One Arrow array of a column across the batches (a ChunkedArray contributes its chunks)."""
    chunks: list[pa.Array] = []
    for b in batches:
        col = b.column(name)
        chunks.extend(col.chunks if hasattr(col, "chunks") else [col])
    return pa.concat_arrays(chunks)


def dense_rows(column, dtype):
    """A list<float> Arrow array -> ((n, d) array or None, sizes seen, null rows)."""
    lengths = np.asarray(column.value_lengths().fill_null(-1), dtype=np.int64)
    sizes = set(np.unique(lengths[lengths >= 0]).tolist())
    if column.null_count or len(sizes) != 1:
        return None, sizes, column.null_count
    d = sizes.pop()
    x = column.flatten().to_numpy(zero_copy_only=False).reshape(len(column), d).astype(dtype, copy=False)
    return x, {d}, 0


def first_vector_layout(column):
    """(whether it takes the sparse path, its size) of the first non-null vector of a struct column, or None
    where every row is null: a sparse vector with fewer than ``SPARSE_DENSITY`` of its entries stored takes
    the sparse path (the rule ``first_vector.is_sparse`` applies on the driver)."""
    valid = np.flatnonzero(column.is_valid().to_numpy(zero_copy_only=False))
    if not len(valid):
        return None
    i = int(valid[0])
    if column.field("type")[i].as_py() == 1:
        return False, int(column.field("values").value_lengths()[i].as_py() or 0)
    size = int(column.field("size")[i].as_py() or 0)
    stored = int(column.field("indices").value_lengths()[i].as_py() or 0)
    return size > 0 and stored < SPARSE_DENSITY * size, size


def _struct_fields(column):
    """(dense-typed rows, each row's size, each row's stored values, the values' and indices' list arrays)."""
    kind = column.field("type").to_numpy(zero_copy_only=False)
    # dense rows have a null size: filled, or the column would arrive as floats (NaN for the nulls)
    sizes = np.asarray(column.field("size").fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    value_lists, index_lists = column.field("values"), column.field("indices")
    row_nnz = np.asarray(value_lists.value_lengths().fill_null(0), dtype=np.int64)
    dense = kind == 1
    return dense, np.where(dense, row_nnz, sizes), row_nnz, value_lists, index_lists  # a dense row's size: its length


def struct_dense_rows(column, dtype):
    """A struct column -> ((n, d) array or None, sizes seen, null rows, invalid vectors): sparse-typed rows
    expanded, as ``vector_to_array`` expands them. None when rows are null, invalid or of different sizes."""
    if column.null_count:
        sizes = _struct_fields(column.drop_null())[1]
        return None, set(np.unique(sizes).tolist()), column.null_count, 0
    dense, sizes, row_nnz, value_lists, index_lists = _struct_fields(column)
    invalid = invalid_sparse_rows(index_lists, ~dense, sizes, row_nnz)
    unique = set(np.unique(sizes).tolist())
    if invalid or len(unique) != 1:
        return None, unique, 0, invalid
    n, d = len(column), unique.pop()
    values = value_lists.flatten().to_numpy(zero_copy_only=False)
    if dense.all():
        return values.reshape(n, d).astype(dtype, copy=False), {d}, 0, 0
    row_of = np.repeat(np.arange(n), row_nnz)
    starts = np.concatenate([[0], np.cumsum(row_nnz)[:-1]])
    cols = np.arange(len(values)) - starts[row_of]  # a dense row's values in order
    from_sparse = ~dense[row_of]
    cols[from_sparse] = index_lists.flatten().to_numpy(zero_copy_only=False)  # the sparse rows' indices, in order
    x = np.zeros((n, d), dtype=dtype)
    x[row_of, cols] = values
    return x, {d}, 0, 0


def sparse_rows(column, dtype):
    """A VectorUDT struct column -> (CSR (indptr, indices, values) or None, sizes seen, invalid vectors);
    dense-typed rows are expanded. None when rows are null, invalid or of different sizes. Invalid: a
    sparse row whose size is negative, or whose indices are not one per value, in [0, size) and strictly
    increasing (pyspark's and MLlib's SparseVector refuse these; rows built past their checks arrive here)."""
    if column.null_count:
        return None, set(), 0
    dense_typed, sizes, row_nnz, value_lists, index_lists = _struct_fields(column)
    n = len(column)
    invalid = invalid_sparse_rows(index_lists, ~dense_typed, sizes, row_nnz)
    unique_sizes = np.unique(sizes)
    if invalid or len(unique_sizes) > 1:
        return None, set(unique_sizes.tolist()), invalid
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(row_nnz, out=indptr[1:])
    values = value_lists.flatten().to_numpy(zero_copy_only=False).astype(dtype, copy=False)
    if dense_typed.any():
        indices = np.empty(indptr[-1], dtype=np.int32)
        for i in np.flatnonzero(dense_typed):
            indices[indptr[i] : indptr[i + 1]] = np.arange(row_nnz[i], dtype=np.int32)
        sparse = np.flatnonzero(~dense_typed)
        if len(sparse):
            idx_flat = index_lists.flatten().to_numpy(zero_copy_only=False)
            idx_len = np.asarray(index_lists.value_lengths().fill_null(0), dtype=np.int64)
            idx_off = np.concatenate([[0], np.cumsum(idx_len)])
            for i in sparse:
                indices[indptr[i] : indptr[i + 1]] = idx_flat[idx_off[i] : idx_off[i + 1]]
    else:
        indices = index_lists.flatten().to_numpy(zero_copy_only=False).astype(np.int32, copy=False)
    return (indptr, indices, values), set(unique_sizes.tolist()), 0


def invalid_sparse_rows(index_lists, sparse_typed, sizes, row_nnz):
    """How many sparse rows have a negative size, not one index per value, or indices outside [0, size)
    or not strictly increasing."""
    idx_len = np.asarray(index_lists.value_lengths().fill_null(0), dtype=np.int64)
    idx = np.asarray(index_lists.flatten().to_numpy(zero_copy_only=False), dtype=np.int64)
    row_of = np.repeat(np.arange(len(idx_len)), idx_len)
    bad = sparse_typed & ((idx_len != row_nnz) | (sizes < 0))
    bad[row_of[(idx < 0) | (idx >= sizes[row_of])]] = True
    bad[row_of[1:][(row_of[1:] == row_of[:-1]) & (idx[1:] <= idx[:-1])]] = True
    return int(np.count_nonzero(bad))
