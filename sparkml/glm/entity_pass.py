"""One random effect's pass on one partition: every entity whose rows the partition holds, solved together.

The driver partitions the rows by entity (``GeneralizedLinearMixedModel``), so each entity's rows are all in
one partition, and runs ``solve_partition`` there through ``mapInArrow``. Its input columns: ``entity`` (the
id, string or integer), ``z`` (the effect's features as an array of doubles; absent for an intercept-only
effect), ``y``, ``w``, ``offset`` (every other block's score plus the user's offset) and ``start`` (the
entity's coefficients from the previous pass, null for an entity not seen before: it starts at 0). It yields
one row per entity: the id, its coefficients (a_e, g_e) as an array, its row count and its rows' loss
sum_i w_i l(y_i, eta_i) at those coefficients (``sparkml.gpu.entity_glm`` states the problem and the solver). No
pyspark: the task imports it alone.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import torch

from sparkml.gpu.device import resolve_device
from sparkml.gpu.entity_glm import solve_entities
from sparkml.runtime import worker_socket

ENTITY, FEATURES, LABEL, WEIGHT, OFFSET, START = "entity", "z", "y", "w", "offset", "start"
COEFFICIENTS, ROWS, LOSS = "coefficients", "rows", "loss"


def output_schema(entity_type: pa.DataType) -> pa.Schema:
    """The schema ``solve_partition`` yields: (entity, coefficients, rows, loss)."""
    return pa.schema(
        [(ENTITY, entity_type), (COEFFICIENTS, pa.list_(pa.float64())), (ROWS, pa.int64()), (LOSS, pa.float64())]
    )


def _doubles(table: pa.Table, name: str) -> np.ndarray:
    return table.column(name).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)


def _features(table: pa.Table, n_features: int, column_name: str) -> np.ndarray | None:
    """The (n, p) features of the effect, or None for an intercept-only effect; ValueError naming the user's
    column for a null vector or one of another size."""
    if n_features == 0:
        return None
    column = table.column(FEATURES).combine_chunks()
    if column.null_count:
        raise ValueError(f"entityFeaturesCols {column_name!r} has null vectors: fill or drop those rows")
    sizes = column.value_lengths().to_numpy(zero_copy_only=False)
    if (sizes != n_features).any():
        bad = int(sizes[sizes != n_features][0])
        raise ValueError(f"entityFeaturesCols {column_name!r} has vectors of size {bad}, others of size {n_features}")
    return column.flatten().to_numpy(zero_copy_only=False).reshape(-1, n_features)


def _starts(table: pa.Table, codes: np.ndarray, m: int, k: int) -> np.ndarray:
    """Each entity's start: its previous coefficients where its rows carry them (read from its first row), else
    zeros."""
    start = np.zeros((m, k))
    column = table.column(START).combine_chunks()
    if column.null_count == len(column):
        return start
    first = np.full(m, -1)
    first[codes[::-1]] = np.arange(len(codes))[::-1]  # each entity's first row
    taken = column.take(pa.array(first))
    valid = taken.is_valid().to_numpy(zero_copy_only=False)
    start[valid] = taken.filter(taken.is_valid()).flatten().to_numpy(zero_copy_only=False).reshape(-1, k)
    return start


def solve_partition(
    batches: Iterator[pa.RecordBatch],
    *,
    family: str,
    reg_param: float,
    n_features: int,
    features_name: str,
    max_iter: int,
    tol: float,
    device: str,
) -> Iterator[pa.RecordBatch]:
    """The partition's entities solved (module docstring); nothing for an empty partition."""
    worker_socket.acknowledge_promptly()
    read = list(batches)
    if not read or sum(b.num_rows for b in read) == 0:
        return
    table = pa.Table.from_batches(read)
    encoded = table.column(ENTITY).combine_chunks().dictionary_encode()
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    m, k = len(encoded.dictionary), 1 + n_features
    on = resolve_device(device)

    def tensor(a):
        return torch.tensor(a, dtype=torch.float64, device=on)

    z = _features(table, n_features, features_name)
    solution = solve_entities(
        family,
        torch.as_tensor(codes, device=on),
        None if z is None else tensor(z),
        tensor(_doubles(table, LABEL)),
        tensor(_doubles(table, WEIGHT)),
        tensor(_doubles(table, OFFSET)),
        reg_param,
        m,
        start=tensor(_starts(table, codes, m, k)),
        max_iter=max_iter,
        tol=tol,
    )
    theta = solution.theta.cpu().numpy()
    loss = solution.objective.cpu().numpy() - 0.5 * reg_param * (theta * theta).sum(axis=1)  # F_e less its penalty
    rows = np.bincount(codes, minlength=m).astype(np.int64)
    coefficients = pa.ListArray.from_arrays(
        pa.array(np.arange(0, m * k + 1, k, dtype=np.int32)), pa.array(theta.ravel())
    )
    yield pa.RecordBatch.from_arrays(
        [encoded.dictionary, coefficients, pa.array(rows), pa.array(loss)],
        schema=output_schema(encoded.dictionary.type),
    )
