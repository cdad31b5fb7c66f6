"""The conversion's query, planned while the first vector is read.

Before the conversion job can start, two things happen on the driver: the first vector of the features column is
read (one small Spark job, ``first_vector``: it decides between the dense and the sparse path and gives the size),
and Spark plans the conversion's query (the columns, ``mapInArrow``, the RDD of its rows: 40-50 ms of analysis and
planning on a small fit, about as long as the first job). The dense path is by far the common one, so in a classic
session its query is planned in a second thread while the first vector is read, and planned again, the first plan
dropped, only where the vector chooses the other path or its size turns the Gram sums off (``gram.GRAM_MAX_FEATURES``).
Planning runs no Spark job: the fit's jobs stay in its thread (its job group, its cancellation).

A small input converted in one block (``TrainingData.prepare(max_partitions=1)``, Spark's estimate below
``STRUCT_INPUT_BYTES``) skips that job: its conversion reads the vectors as the struct, and the one task's first
vector chooses the path there (``convert.convert_partition(sparse=None)``), the choice the driver's read would make.
Where the input is larger, the first job pays for itself: ``vector_to_array``'s lists reach Python about five
times faster than the struct, and blocks of several partitions must agree on one path.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import Any

from pyspark.ml.functions import vector_to_array
from pyspark.sql import functions as F

from sparkml.data import block_store
from sparkml.data import class_weight as class_weights
from sparkml.data.convert import STATS_SCHEMA, convert_partition
from sparkml.data.first_vector import first_layout
from sparkml.data.gram import GRAM_MAX_FEATURES
from sparkml.runtime.session_kind import estimated_bytes, is_connect

# a one-block input Spark estimates below this many bytes converts from the vector struct without reading its first
# vector first: the struct's slower transfer (~0.17 us a value in one task: ~20 ms at this size) costs it less than
# that read (~50 ms)
STRUCT_INPUT_BYTES = 1 << 20


@dataclass
class Columns:
    """What ``TrainingData.prepare`` converts: the column names, the storage dtype, the class weights resolved,
    and the fold ids' Column (or None)."""

    features: str
    label: str
    weight: str | None
    offset: str | None
    fold: Any
    dtype: str
    by_class: dict | None


@dataclass
class ConversionPlan:
    """One planned conversion query: ``converted`` (the statistics rows' DataFrame) and ``handles`` (its rows,
    cached on the executors by the conversion job; None where nothing is stored), for ``sparse`` (None: the
    struct, each partition's first vector choosing) and ``gram``."""

    sparse: bool | None
    gram: Any
    dataset_id: str
    converted: Any
    handles: Any

    def drop(self):
        """Forget a plan that will not run (its handles were never computed)."""
        if self.handles is not None:
            self.handles.unpersist(blocking=False)


def plan(df, columns: Columns, sparse: bool | None, gram) -> ConversionPlan:
    """The conversion query of ``df`` for the dense or sparse path (None: chosen by the partition's first vector),
    computing ``gram`` (a ``GramPlan`` or None)."""
    feats = F.col(columns.features)
    # vector_to_array fails on a null vector: keep nulls null so the conversion pass reports them
    x = feats if sparse is not False else F.when(feats.isNotNull(), vector_to_array(feats, columns.dtype))
    w = F.col(columns.weight).cast("double") if columns.weight else F.lit(1.0)
    w = class_weights.weighted(w, F.col(columns.label).cast("double"), columns.by_class)
    selected = [x.alias("x"), F.col(columns.label).cast("double").alias("y"), w.alias("w")]
    if columns.offset:
        selected.append(F.col(columns.offset).cast("double").alias("o"))
    if columns.fold is not None:
        selected.append(columns.fold.cast("int").alias("f"))
    dataset_id, folds = block_store.new_dataset_id(), columns.fold is not None
    dtype, offset_col = columns.dtype, columns.offset  # the closure holds these, not ``columns`` (a Column)

    def convert(batches):
        return convert_partition(batches, dataset_id, sparse, dtype, offset_col, folds, gram)

    converted = df.select(*selected).mapInArrow(convert, STATS_SCHEMA)
    if gram and not gram.rows and sparse is not None:  # nothing stored: no later job reads the handles (not cached)
        handles = None
    elif is_connect(df):
        handles = converted.cache()
    else:  # the rows as the JVM pickles them, cached there (a Python map would cost each task a second worker)
        handles = converted.rdd.cache()
    return ConversionPlan(sparse, gram, dataset_id, converted, handles)


def gram_for(gram, columns: Columns, size):
    """``gram`` where the conversion can compute it: no fold ids, and a known size of at most the limit (0: the
    one-block conversion's task compares its size); the limit travels with it to the tasks."""
    if gram is None or columns.fold is not None or size is None or size + bool(columns.offset) > GRAM_MAX_FEATURES:
        return None
    return dataclasses.replace(gram, max_features=GRAM_MAX_FEATURES)


def layout_and_plan(df, columns: Columns, gram, one_block=False) -> ConversionPlan:
    """Read the first vector (``first_vector.first_layout``) and plan the conversion for what it shows; the dense
    plan made meanwhile in a second thread (classic sessions) is kept where it fits. ``one_block``: ``df`` has at
    most one partition; if it is also small, the plan reads the struct and no first vector is read (module
    docstring)."""
    if one_block and (estimated_bytes(df) or STRUCT_INPUT_BYTES) < STRUCT_INPUT_BYTES:
        return plan(df, columns, None, gram_for(gram, columns, 0))
    guess: dict[str, Any] = {}
    thread = None
    if not is_connect(df):

        def plan_dense():
            try:
                guess["plan"] = plan(df, columns, False, gram_for(gram, columns, 0))
            except Exception:  # planned again below, in the fit's thread, where the error is raised
                pass

        thread = threading.Thread(target=plan_dense, name="sparkml-conversion-plan", daemon=True)
        thread.start()
    try:
        sparse, size = first_layout(df, columns.features)
    except BaseException:
        if thread is not None:
            thread.join()
        if "plan" in guess:  # the first vector was refused: no conversion
            guess["plan"].drop()
        raise
    if thread is not None:
        thread.join()
    planned, gram = guess.get("plan"), gram_for(gram, columns, size)
    if planned is not None and (planned.sparse, planned.gram) == (sparse, gram):
        return planned
    if planned is not None:
        planned.drop()
    return plan(df, columns, sparse, gram)
