"""A GeneralizedLinearMixedModel's random-effect tables on disk: ``path/randomEffects/<r>/``, one Parquet dataset per
random effect, written and read by the executors (a table can hold millions of entities: it never passes through
the driver).

Each table has the columns ``entity`` (the id, string or integer, as the entity column was), ``coefficients``
(array<double>: the entity's intercept a, then its slopes g_1 .. g_p) and ``rows`` (its training rows). Loading
checks the schema, then one aggregate per table: no null id or coefficients, every array of length 1 + p (p from
the model's data row), and each id once (a repeated id would score its rows twice). A table that fails is a
``ModelFileError`` naming its directory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DoubleType, IntegralType, StringType

from sparkml.saved.model_files import ModelFileError, first_line

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FOLDER = "randomEffects"
COLUMNS = ("entity", "coefficients", "rows")


def table_path(path: str, r: int) -> str:
    return f"{path.rstrip('/')}/{FOLDER}/{r}"


def save_tables(tables: list[DataFrame], path: str, mode: str) -> None:
    """Each table as ``path/randomEffects/<r>``."""
    for r, table in enumerate(tables):
        table.select(*COLUMNS).write.mode(mode).parquet(table_path(path, r))


def load_tables(spark: SparkSession, path: str, widths: list[int], entities: list[str]) -> list[DataFrame]:
    """The tables of a model whose random effects (``entities``: their entity columns) have ``widths`` features,
    each checked (module docstring)."""
    if len(widths) != len(entities):
        raise ModelFileError(
            f"{path}: the data row has {len(widths)} random effects, the metadata's entityCols {len(entities)}"
        )
    return [_checked(spark, table_path(path, r), width) for r, width in enumerate(widths)]


def _checked(spark: SparkSession, directory: str, width: int) -> DataFrame:
    try:
        table = spark.read.parquet(directory)
    except Exception as e:
        raise ModelFileError(f"{directory}: cannot read this random effect's table ({first_line(e)})") from e
    types = {f.name: f.dataType for f in table.schema.fields}
    wanted = {
        "entity": (lambda t: isinstance(t, (StringType, IntegralType)), "a string or integer"),
        "coefficients": (lambda t: isinstance(t, ArrayType) and t.elementType == DoubleType(), "array<double>"),
        "rows": (lambda t: isinstance(t, IntegralType), "an integer"),
    }
    for name, (ok, what) in wanted.items():
        if name not in types:
            raise ModelFileError(f"{directory}: no column {name!r} (a random effect's table has {', '.join(COLUMNS)})")
        if not ok(types[name]):
            raise ModelFileError(f"{directory}: column {name!r} is {types[name].simpleString()}, expected {what}")
    size = F.size("coefficients")
    nulls, misfits = table.agg(
        F.sum((F.col("entity").isNull() | F.col("coefficients").isNull()).cast("long")),
        F.sum((F.col("coefficients").isNotNull() & (size != width + 1)).cast("long")),
    ).first() or (0, 0)
    if nulls:
        raise ModelFileError(f"{directory}: {nulls} rows have a null entity or null coefficients")
    if misfits:
        raise ModelFileError(
            f"{directory}: {misfits} entities' coefficients are not of length {width + 1} (an intercept and "
            f"{width} features, as the model's data row says)"
        )
    repeated = table.groupBy("entity").count().where(F.col("count") > 1).select("entity").first()
    if repeated is not None:
        raise ModelFileError(f"{directory}: entity {repeated[0]!r} has more than one row")
    return table.select(*COLUMNS)
