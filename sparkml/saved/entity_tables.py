"""A GeneralizedLinearMixedModel's random-effect tables on disk, and their checks, without pyspark.

A saved mixed model keeps each random effect's table beside its data row, as the Parquet dataset
``path/randomEffects/<r>/``: one row per entity, with the columns ``entity`` (the id, string or integer),
``coefficients`` (array<double>: the entity's intercept, then its p slopes) and ``rows`` (its training rows). A
table is well formed when no id or coefficients are null, every array has 1 + p values (p from the model's data
row) and each id appears once (a repeated id would score its rows twice). The Spark loader
(``sparkml.glm.mixed_tables``) checks that on the executors; ``read_local`` reads and checks a local table with
pyarrow for serving. Both raise the same ``ModelFileError`` messages, naming the table's directory.
"""

from __future__ import annotations

import numpy as np

from sparkml.saved.model_files import ModelFileError, first_line

FOLDER = "randomEffects"
COLUMNS = ("entity", "coefficients", "rows")


def table_path(path: str, r: int) -> str:
    """The directory of random effect ``r``'s table in the model directory ``path``."""
    return f"{str(path).rstrip('/')}/{FOLDER}/{r}"


def missing_column(directory: str, name: str) -> ModelFileError:
    return ModelFileError(f"{directory}: no column {name!r} (a random effect's table has {', '.join(COLUMNS)})")


def wrong_type(directory: str, name: str, found: str, wanted: str) -> ModelFileError:
    return ModelFileError(f"{directory}: column {name!r} is {found}, expected {wanted}")


def nulls(directory: str, count: int) -> ModelFileError:
    return ModelFileError(f"{directory}: {count} rows have a null entity or null coefficients")


def misfits(directory: str, count: int, width: int) -> ModelFileError:
    return ModelFileError(
        f"{directory}: {count} entities' coefficients are not of length {width + 1} (an intercept and {width} "
        "features, as the model's data row says)"
    )


def repeated(directory: str, entity) -> ModelFileError:
    return ModelFileError(f"{directory}: entity {entity!r} has more than one row")


def read_local(directory: str, width: int) -> tuple[list, np.ndarray]:
    """(the entity ids, their (m, 1 + ``width``) coefficients) of the local table at ``directory``, checked."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        dataset = pq.ParquetDataset(directory)  # Hadoop's hidden files (_SUCCESS, .crc) skipped, as Spark does
        schema = dataset.schema
    except Exception as e:
        raise ModelFileError(f"{directory}: cannot read this random effect's table ({first_line(e)})") from e
    for name in COLUMNS[:2]:
        if name not in schema.names:
            raise missing_column(directory, name)
    entity, coefficients = schema.field("entity").type, schema.field("coefficients").type
    if not (pa.types.is_integer(entity) or pa.types.is_string(entity) or pa.types.is_large_string(entity)):
        raise wrong_type(directory, "entity", str(entity), "a string or integer")
    if not (pa.types.is_list(coefficients) and pa.types.is_float64(coefficients.value_type)):
        raise wrong_type(directory, "coefficients", str(coefficients), "array<double>")
    table = dataset.read(columns=["entity", "coefficients"]).combine_chunks()
    ids = pa.concat_arrays(table.column("entity").chunks) if table.num_rows else pa.array([], entity)
    lists = pa.concat_arrays(table.column("coefficients").chunks) if table.num_rows else pa.array([], coefficients)
    missing = int(pa.compute.sum(pa.compute.or_(ids.is_null(), lists.is_null())).as_py() or 0)
    if missing:
        raise nulls(directory, missing)
    wrong = int((np.asarray(lists.value_lengths(), dtype=np.int64) != width + 1).sum())
    if wrong:
        raise misfits(directory, wrong, width)
    entities = ids.to_pylist()
    if len(set(entities)) != len(entities):
        seen: set = set()
        for entity_id in entities:
            if entity_id in seen:
                raise repeated(directory, entity_id)
            seen.add(entity_id)
    values = np.asarray(lists.flatten(), dtype=np.float64)
    return entities, values.reshape(len(entities), width + 1)
