"""A GeneralizedLinearMixedModel's random-effect tables saved and loaded through Spark: each table
(``sparkml.saved.entity_tables``: its layout and checks) written and read by the executors, since a table can hold
millions of entities and never passes through the driver. Loading checks the schema, then one aggregate per table
(null ids or coefficients, arrays of the wrong length) and one grouping (repeated ids); a table that fails is a
``ModelFileError`` naming its directory. A fit's checkpoint (``checkpointDir``) keeps its tables the same way, in
the checkpoint's directory (``beside_checkpoint``, ``resumed_tables``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DoubleType, IntegralType, StringType

from sparkml.saved import entity_tables as files
from sparkml.saved.entity_tables import COLUMNS, table_path
from sparkml.saved.model_files import ModelFileError, first_line

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def save_tables(tables: list[DataFrame], path: str, mode: str) -> None:
    """Each table as ``path/randomEffects/<r>``."""
    for r, table in enumerate(tables):
        table.select(*COLUMNS).write.mode(mode).parquet(table_path(path, r))


def load_tables(spark: SparkSession, path: str, widths: list[int]) -> list[DataFrame]:
    """The tables of a model whose random effects have ``widths`` features (one per effect: the saved class's check
    has matched them to the metadata's entityCols), each checked (module docstring)."""
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
            raise files.missing_column(directory, name)
        if not ok(types[name]):
            raise files.wrong_type(directory, name, types[name].simpleString(), what)
    size = F.size("coefficients")
    nulls, misfits = table.agg(
        F.sum((F.col("entity").isNull() | F.col("coefficients").isNull()).cast("long")),
        F.sum((F.col("coefficients").isNotNull() & (size != width + 1)).cast("long")),
    ).first() or (0, 0)
    if nulls:
        raise files.nulls(directory, nulls)
    if misfits:
        raise files.misfits(directory, misfits, width)
    repeated = table.groupBy("entity").count().where(F.col("count") > 1).select("entity").first()
    if repeated is not None:
        raise files.repeated(directory, repeated[0])
    return table.select(*COLUMNS)


def _local(path: str) -> str:
    """A local (or mounted) directory as a URI Spark reads as such whatever its default file system (HDFS on YARN)."""
    return "file://" + path


def beside_checkpoint(tables: list[DataFrame]):
    """What ``optim.checkpoint.Checkpoint.save`` calls to write the tables into a checkpoint's directory, on the
    executors (the directory must be one they share with the driver: local mode's disk, or a mount)."""

    def write(directory: str) -> None:
        save_tables(tables, _local(directory), "error")

    return write


def resumed_tables(spark: SparkSession, directory: str, widths: list[int]) -> list[DataFrame]:
    """The tables of the checkpoint in ``directory``, checked as a saved model's, then checkpointed on the executors
    (the checkpoint's files are deleted when the next one is written); ValueError naming the checkpoint when one is
    damaged."""
    try:
        tables = load_tables(spark, _local(directory), widths)
    except ModelFileError as e:
        raise ValueError(
            f"cannot resume from the checkpoint {directory}: {e}. Remove it or set another checkpointDir to start "
            "afresh"
        ) from None
    return [table.localCheckpoint(eager=True) for table in tables]
