"""The fitted GeneralizedLinearMixedModel: fixed coefficients plus one coefficient table per random effect.

A row's linear predictor is

    eta_i = b + x_i . beta + o_i + sum_r (a_{r,e_r(i)} + z_ir . g_{r,e_r(i)})

and its prediction the mean g^-1(eta_i) (identity, logistic, exp). Each random effect's table holds one row per
entity seen in training: its id and its coefficients (a, g_1 .. g_p) as an array. ``transform`` joins the rows
to each table by entity in Spark SQL (an entity the table lacks scores 0 there: the fixed effect alone), so the
tables stay where they are, as DataFrames, however many entities they hold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.ml import Model
from pyspark.ml.functions import array_to_vector, vector_to_array
from pyspark.ml.linalg import DenseVector, VectorUDT
from pyspark.ml.param.shared import (
    HasAggregationDepth,
    HasElasticNetParam,
    HasFeaturesCol,
    HasFitIntercept,
    HasLabelCol,
    HasMaxIter,
    HasPredictionCol,
    HasRegParam,
    HasTol,
    HasWeightCol,
)
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DoubleType, IntegerType, StructField, StructType

from sparkml.base.model import HasCoefficientVector, ModelIO
from sparkml.base.params import HasTrainingParams, declares
from sparkml.glm.mixed_tables import load_tables, save_tables
from sparkml.params.mixed import GENERALIZED_LINEAR_MIXED_MODEL

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

PREFIX = "__glmm_"  # the internal columns' names: none of a user's frame's columns starts with it
COEFFICIENTS = "coefficients"


def effect_score(coefficients: Column, features: Column | None) -> Column:
    """a + z . g of a table's ``coefficients`` array (a, g_1 .. g_p) and the effect's ``features`` array (None:
    intercept-only); 0 where the entity has no row in the table."""
    if features is None:
        score = coefficients[0]
    else:
        slopes = F.slice(coefficients, 2, F.size(coefficients) - 1)
        products = F.zip_with(features, slopes, lambda z, g: z * g)
        score = coefficients[0] + F.aggregate(products, F.lit(0.0), lambda acc, v: acc + v)
    return F.coalesce(score, F.lit(0.0))


def fixed_eta(intercept: float, coefficients, features: Column, offset: Column | None) -> Column:
    """b + x . beta (+ the offset) of the vector column ``features``, computed in Spark SQL (no Python worker)."""
    beta = F.array(*[F.lit(float(v)) for v in coefficients])
    eta = F.lit(float(intercept)) + F.aggregate(
        F.zip_with(vector_to_array(features), beta, lambda a, b: a * b), F.lit(0.0), lambda s, v: s + v
    )
    return eta if offset is None else eta + offset


def mean_of(family: str, eta: Column) -> Column:
    """g^-1(eta) of the family's canonical link."""
    if family == "gaussian":
        return eta
    if family == "binomial":
        return F.lit(1.0) / (F.lit(1.0) + F.exp(-eta))
    return F.exp(eta)


def with_effects(
    rows: DataFrame,
    tables: list[DataFrame],
    entities: list[str],
    features: list[str | None],
    partitions: int | None = None,
):
    """(``rows`` left-joined to each table by its entity column, the score column of each effect).
    ``partitions``: the rows are hash-partitioned by each entity column into that many partitions before its
    join (rows already partitioned so are not moved, and the table is shuffled to match them), instead of both
    into ``spark.sql.shuffle.partitions``."""
    scores = []
    for r, (table, entity, z) in enumerate(zip(tables, entities, features)):
        name = f"{PREFIX}coef{r}"
        if partitions:
            rows = rows.repartition(partitions, entity)
        rows = rows.join(table.select(F.col("entity").alias(entity), F.col(COEFFICIENTS).alias(name)), entity, "left")
        scores.append(effect_score(F.col(name), None if z is None else F.col(z)))
    return rows, scores


@declares(*GENERALIZED_LINEAR_MIXED_MODEL)
class MixedParams(
    HasLabelCol,
    HasFeaturesCol,
    HasPredictionCol,
    HasFitIntercept,
    HasMaxIter,
    HasTol,
    HasRegParam,
    HasElasticNetParam,
    HasWeightCol,
    HasAggregationDepth,
    HasTrainingParams,
):
    """The Params of the estimator and its model (``sparkml.params.mixed``)."""

    # <param-stubs>
    if TYPE_CHECKING:  # made from the Params' declarations (tools/write_param_stubs.py)

        def getFamily(self) -> str: ...

        def getLink(self) -> str: ...

        def getOffsetCol(self) -> str: ...

        def getEntityCols(self) -> list[str]: ...

        def getEntityFeaturesCols(self) -> list[str]: ...

        def getEntityRegParams(self) -> list[float]: ...

    # </param-stubs>

    def effects(self) -> list[tuple[str, str | None, float]]:
        """[(entity column, its features column or None, L2 strength)] of each random effect."""
        entities = self.getEntityCols() if self.isDefined("entityCols") else []
        features = self.getEntityFeaturesCols() if self.isDefined("entityFeaturesCols") else [""] * len(entities)
        regs = self.getEntityRegParams() if self.isDefined("entityRegParams") else [1.0] * len(entities)
        return list(zip(entities, [f or None for f in features], regs))

    def column(self, name: str) -> str | None:
        """The column a Param names; None where it is unset or empty."""
        return (self.getOrDefault(name) if self.isDefined(name) else None) or None


class GeneralizedLinearMixedModelModel(HasCoefficientVector, Model, MixedParams, ModelIO):
    """A fitted ``GeneralizedLinearMixedModel`` (module docstring): ``coefficients`` and ``intercept`` of the fixed
    effect, and ``randomEffects``: one DataFrame per random effect (its entity column, ``intercept``,
    ``coefficients``).

    Saved in MLlib's layout (``metadata/``, and ``data/``: the fixed effect and each random effect's width) plus
    ``randomEffects/<r>/``, each table as a Parquet dataset written and read by the executors (never collected).
    """

    _java_class = "sparkml.regression.GeneralizedLinearMixedModelModel"  # no Scala twin: MLlib has no mixed model
    _data_schema = StructType(
        [
            StructField("intercept", DoubleType()),
            StructField("coefficients", VectorUDT()),
            StructField("effectWidths", ArrayType(IntegerType())),  # each random effect's number of features
        ]
    )

    def __init__(
        self,
        coefficients: Any = None,
        intercept: float = 0.0,
        tables: list[DataFrame] | None = None,
        widths: list[int] | None = None,
    ):
        super().__init__()
        self._coefficients = DenseVector([] if coefficients is None else coefficients)
        self._intercept, self._tables = float(intercept), list(tables or [])
        self._widths = [int(w) for w in widths or []]
        self.objectiveHistory: list[float] = []

    def setFeaturesCol(self, value: str) -> GeneralizedLinearMixedModelModel:
        return self._set(featuresCol=value)

    def setPredictionCol(self, value: str) -> GeneralizedLinearMixedModelModel:
        return self._set(predictionCol=value)

    @property
    def numFeatures(self) -> int:
        return len(self._coefficients)

    # ---- persistence: the data row here, the tables beside it (``mixed_tables``) ----

    def _data_frame(self, spark):
        return spark.createDataFrame([(self._intercept, self._coefficients, self._widths)], self._data_schema)

    @classmethod
    def _from_data(cls, row):
        return cls(row.coefficients.toArray(), row.intercept, None, list(row.effectWidths))

    def _save_beside(self, spark, path, mode):
        save_tables(self._tables, path, mode)

    def _load_beside(self, spark, path):
        self._tables = load_tables(spark, path, self._widths)

    def _read_fully(self):
        """The tables checkpointed on the executors (they were read lazily from the model's files)."""
        self._tables = [t.localCheckpoint(eager=True) for t in self._tables]

    @property
    def randomEffects(self) -> list[DataFrame]:
        """Each random effect's table: the entity column (named as in ``entityCols``), ``intercept`` and
        ``coefficients`` (a vector, empty for an intercept-only effect)."""
        out = []
        for table, entity in zip(self._tables, self.getEntityCols()):
            slopes = F.slice(COEFFICIENTS, 2, F.size(COEFFICIENTS) - 1)
            out.append(
                table.select(
                    F.col("entity").alias(entity),
                    F.col(COEFFICIENTS)[0].alias("intercept"),
                    array_to_vector(slopes).alias("coefficients"),
                )
            )
        return out

    def _transform(self, dataset: DataFrame) -> DataFrame:
        offset = self.column("offsetCol")
        fixed = fixed_eta(
            self._intercept,
            self._coefficients.toArray(),
            F.col(self.getFeaturesCol()),
            F.col(offset).cast("double") if offset else None,
        )
        feature_cols = []
        rows = dataset
        effects = self.effects()
        for r, (_, z, _) in enumerate(effects):
            name = None
            if z:
                name = f"{PREFIX}z{r}"
                rows = rows.withColumn(name, vector_to_array(F.col(z)))
            feature_cols.append(name)
        rows, scores = with_effects(rows, self._tables, [e for e, _, _ in effects], feature_cols)
        eta = fixed
        for score in scores:
            eta = eta + score
        out = rows.withColumn(self.getPredictionCol(), mean_of(self.getFamily().lower(), eta))
        return out.drop(*[c for c in out.columns if c.startswith(PREFIX)])

    def copy(self, extra=None):
        copied = super().copy(extra)
        copied._tables, copied._widths = list(self._tables), list(self._widths)
        copied.objectiveHistory = list(self.objectiveHistory)
        return copied
