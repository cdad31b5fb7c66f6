"""Executor side of ``TrainingData.subset``: the training rows of one fold, read from a conversion that stored
every row's fold id, written as a dataset of their own, with their statistics (no pyspark here).

A search over k folds converts its DataFrame once, with each row's fold id (``convert_partition(folds=True)``);
fold i's training set is then every row whose id is not i, in the order the conversion stored them: the rows,
blocks and statistics a conversion of ``train`` (pyspark's filter of fold i's complement) would write, at the
cost of a copy between local files instead of a pass from the JVM.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from sparkml.data import block_store
from sparkml.data.statistics import PartitionStats

ROW_RUN = 65536  # dense rows copied at a time: memory stays flat in the partition's size


def _select_csr(arrays, keep):
    """The CSR (indptr, indices, values) of the rows where ``keep``."""
    indptr = np.asarray(arrays["indptr"], dtype=np.int64)
    counts = np.diff(indptr)
    entries = np.repeat(keep, counts)
    kept = np.zeros(int(keep.sum()) + 1, dtype=indptr.dtype)
    np.cumsum(counts[keep], out=kept[1:])
    return kept, np.asarray(arrays["indices"])[entries], np.asarray(arrays["values"])[entries]


def subset_partition(source, target, partition, rows, exclude):
    """Write dataset ``source``'s partition ``partition`` (``rows`` rows, stored with fold ids) less its rows of
    fold ``exclude`` as dataset ``target``'s; returns (rows written, info, moments): the conversion's statistics
    row (``convert.STATS_SCHEMA``) for them."""
    stats = PartitionStats()
    with block_store.PartitionWriter(target, partition) as writer:
        if rows:
            arrays = block_store.partition_arrays(source, partition)
            keep = np.asarray(arrays["fold"]) != exclude
            if "x" in arrays:
                x = arrays["x"]
                for i in range(0, len(keep), ROW_RUN):
                    run, sel = slice(i, i + ROW_RUN), keep[i : i + ROW_RUN]
                    y, w = stats.labels(pa.array(arrays["y"][run][sel]), pa.array(arrays["w"][run][sel]))
                    rows_x = np.ascontiguousarray(x[run][sel])
                    stats.features(rows_x, w, {x.shape[1]}, 0)
                    if len(y):
                        writer.append("x", rows_x)
                        writer.append("y", y)
                        writer.append("w", w)
            else:
                d = int(arrays["shape"][1])
                y, w = stats.labels(pa.array(arrays["y"][keep]), pa.array(arrays["w"][keep]))
                csr = _select_csr(arrays, keep)
                stats.features(csr, w, {d}, 0)
                for name, array in (("indptr", csr[0]), ("indices", csr[1]), ("values", csr[2])):
                    writer.append(name, array)
                writer.append("shape", np.array([len(y), d]))
                writer.append("y", y)
                writer.append("w", w)
        writer.finish(stats.rows > 0)
    info, moments = stats.info()
    info.update(partition=partition, store=block_store.store_key(), bytes=writer.nbytes)
    return stats.rows, info, moments


def fold_rows(source, partition, rows, fold):
    """(x, y, w) of dataset ``source``'s partition ``partition`` (``rows`` rows, stored with fold ids) whose fold
    id is ``fold``: fold ``fold``'s validation rows there, in stored order. ``x`` is an (n, d) array as stored
    or, for CSR blocks, a scipy CSR matrix; None when the partition holds none."""
    if not rows:
        return None
    arrays = block_store.partition_arrays(source, partition)
    keep = np.asarray(arrays["fold"]) == fold
    if not keep.any():
        return None
    y, w = np.asarray(arrays["y"])[keep], np.asarray(arrays["w"])[keep]
    if "x" in arrays:
        return np.ascontiguousarray(arrays["x"][keep]), y, w
    from scipy.sparse import csr_matrix

    indptr, indices, values = _select_csr(arrays, keep)
    return csr_matrix((values, indices, indptr), shape=(len(y), int(arrays["shape"][1]))), y, w
