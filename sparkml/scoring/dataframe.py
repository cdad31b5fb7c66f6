"""Scoring a DataFrame in Python workers with a ``ScoringSpec``: the driver side of ``transform``.

The features column goes through ``vector_to_array`` (dense, float64) into a scalar UDF that scores a whole
Arrow batch (``sparkml.scoring.batch.score_batch``; ``sparkml.runtime.compat.vectorized_udf``: Spark's ``arrow_udf``
where it has one) and returns a struct of the output columns; the vector outputs come back as ``VectorUDT``
through ``array_to_vector``. The output columns, their names and types are MLlib's (``sparkml.scoring.kinds
.OUTPUTS``). The linear models use this path only where MLlib's own transform is not available; KernelSVC
always does.

Spark 4.3 feeds Arrow UDFs columnar input by default (``spark.sql.execution.arrow.pythonUDF.columnarInput
.enabled``), and that path fails with UNSUPPORTED_DATATYPE on any plan whose scan carries a vector column, e.g.
a features column read from Parquet, whatever the UDF reads. ``score_dataframe`` therefore switches the setting
off in the dataset's session (once, logged at INFO): the row path it falls back to is the one Spark used before
4.3.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pyspark.ml.functions import array_to_vector, vector_to_array
from pyspark.sql import functions as F

from sparkml.runtime.compat import require_connect_ml, vectorized_udf
from sparkml.scoring.batch import score_batch
from sparkml.scoring.kinds import OUTPUTS
from sparkml.scoring.spec import ScoringSpec

if TYPE_CHECKING:
    from pyspark.ml.param import Param
    from pyspark.sql import DataFrame

COLUMNAR_INPUT = "spark.sql.execution.arrow.pythonUDF.columnarInput.enabled"
_SCORES = "__sparkml_scores"


def use_row_input_for_arrow_udfs(dataset):
    """Turn off Spark 4.3's columnar input to Arrow UDFs in ``dataset``'s session (module docstring)."""
    try:
        spark = dataset.sparkSession
        if str(spark.conf.get(COLUMNAR_INPUT)).lower() != "true":
            return
        spark.conf.set(COLUMNAR_INPUT, "false")
    except Exception:  # a Spark without the setting
        return
    logging.getLogger(__name__).info(
        "set %s=false: Spark's columnar input to Arrow UDFs cannot carry vector columns", COLUMNAR_INPUT
    )


def _field_not_found(column, dataset):
    """MLlib's error for a missing input column (MLflow's autolog probes for it)."""
    from pyspark.errors import IllegalArgumentException

    return IllegalArgumentException(
        f"[FIELD_NOT_FOUND] No such struct field `{column}` in "
        f"{', '.join(f'`{c}`' for c in dataset.columns)}. SQLSTATE: 42704"
    )


def score_dataframe(dataset: DataFrame, features_col: str, columns: dict[str, str], spec: ScoringSpec) -> DataFrame:
    """``dataset`` with the output columns ``columns`` ({output key: column name}; an empty name skips the
    output, as in MLlib) of the model ``spec`` scores with, computed from ``features_col`` in Python
    workers."""
    if features_col not in dataset.columns:  # raised eagerly, as MLlib does
        raise _field_not_found(features_col, dataset)
    require_connect_ml(dataset.sparkSession)
    use_row_input_for_arrow_udfs(dataset)
    keys = tuple(k for k, name in columns.items() if name)
    if not keys:
        return dataset
    result_type = "struct<{}>".format(
        ", ".join(f"{k}: {'array<double>' if OUTPUTS[k].vector else 'double'}" for k in keys)
    )

    def scores(features):
        return score_batch(features, spec, keys, features_col)

    score = vectorized_udf(scores, result_type)
    out = dataset.withColumn(_SCORES, score(vector_to_array(F.col(features_col), "float64")))
    for key in keys:
        value = F.col(f"{_SCORES}.{key}")
        out = out.withColumn(columns[key], array_to_vector(value) if OUTPUTS[key].vector else value)
    return out.drop(_SCORES)


class ScoresWithSpec:
    """A fitted model that scores with a ``ScoringSpec``: it implements ``_build_scoring_spec()``, and
    ``scoringSpec()`` builds it once per set of Param values (a threshold set later builds a new one).
    ``_score_in_python(dataset)``: its output columns, named by its Params, scored in Python workers."""

    _paramMap: dict[Param, Any]
    _spec_cache: tuple[tuple[tuple[str, str], ...], ScoringSpec] | None = None

    if TYPE_CHECKING:

        def getFeaturesCol(self) -> str: ...
        def getOrDefault(self, param: Any) -> Any: ...

    def _build_scoring_spec(self) -> ScoringSpec:
        raise NotImplementedError

    def scoringSpec(self) -> ScoringSpec:
        """The ``ScoringSpec`` this model scores with (its coefficients, outputs and feature map, for its current
        Param values): what ``transform``, the saved file's scoring and a search's one pass over k models read
        (``sparkml.base.search_support.ScoredTogether``)."""
        params = tuple(sorted((p.name, repr(v)) for p, v in self._paramMap.items()))
        cached = self._spec_cache
        if cached is None or cached[0] != params:
            cached = self._spec_cache = (params, self._build_scoring_spec())
        return cached[1]

    def _score_in_python(self, dataset: DataFrame) -> DataFrame:
        spec = self.scoringSpec()
        columns = {k: self.getOrDefault(OUTPUTS[k].param) for k in spec.outputs}
        return score_dataframe(dataset, self.getFeaturesCol(), columns, spec)
