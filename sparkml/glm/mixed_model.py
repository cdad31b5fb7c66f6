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
from pyspark.ml.linalg import DenseVector
from pyspark.sql import functions as F

from sparkml.base.model import HasCoefficientVector

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


def unit_loss(family: str, y: Column, eta: Column) -> Column:
    """l(y, eta): the negative log-likelihood per unit weight, up to a constant (``sparkml.gpu.entity_glm``)."""
    if family == "gaussian":
        return (y - eta) * (y - eta) / 2.0
    if family == "binomial":  # log(1 + e^eta), stable on both sides
        return F.greatest(eta, F.lit(0.0)) + F.log1p(F.exp(-F.abs(eta))) - y * eta
    return F.exp(eta) - y * eta


def mean_of(family: str, eta: Column) -> Column:
    """g^-1(eta) of the family's canonical link."""
    if family == "gaussian":
        return eta
    if family == "binomial":
        return F.lit(1.0) / (F.lit(1.0) + F.exp(-eta))
    return F.exp(eta)


def with_effects(rows: DataFrame, tables: list[DataFrame], entities: list[str], features: list[str | None]):
    """(``rows`` left-joined to each table by its entity column, the score column of each effect)."""
    scores = []
    for r, (table, entity, z) in enumerate(zip(tables, entities, features)):
        name = f"{PREFIX}coef{r}"
        rows = rows.join(table.select(F.col("entity").alias(entity), F.col(COEFFICIENTS).alias(name)), entity, "left")
        scores.append(effect_score(F.col(name), None if z is None else F.col(z)))
    return rows, scores


class GeneralizedLinearMixedModelModel(HasCoefficientVector, Model):
    """A fitted ``GeneralizedLinearMixedModel`` (module docstring): ``coefficients`` and ``intercept`` of the fixed
    effect, and ``randomEffects``: one DataFrame per random effect (its entity column, ``intercept``,
    ``coefficients``)."""

    def __init__(self, coefficients: Any, intercept: float, tables: list[DataFrame], params: Any):
        super().__init__()
        self._coefficients, self._intercept, self._tables = DenseVector(coefficients), float(intercept), tables
        self._values = params  # the estimator's Param values: columns, family, effects
        self.objectiveHistory: list[float] = []

    @property
    def randomEffects(self) -> list[DataFrame]:
        """Each random effect's table: the entity column (named as in ``entityCols``), ``intercept`` and
        ``coefficients`` (a vector, empty for an intercept-only effect)."""
        out = []
        for table, entity in zip(self._tables, self._values["entityCols"]):
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
        p = self._values
        beta = F.array(*[F.lit(float(v)) for v in self._coefficients.toArray()])
        x = vector_to_array(F.col(p["featuresCol"]))
        fixed = F.lit(self._intercept) + F.aggregate(
            F.zip_with(x, beta, lambda a, b: a * b), F.lit(0.0), lambda s, v: s + v
        )
        if p["offsetCol"]:
            fixed = fixed + F.col(p["offsetCol"]).cast("double")
        feature_cols = []
        rows = dataset
        for r, z in enumerate(p["entityFeaturesCols"]):
            name = None
            if z:
                name = f"{PREFIX}z{r}"
                rows = rows.withColumn(name, vector_to_array(F.col(z)))
            feature_cols.append(name)
        rows, scores = with_effects(rows, self._tables, p["entityCols"], feature_cols)
        eta = fixed
        for score in scores:
            eta = eta + score
        out = rows.withColumn(p["predictionCol"], mean_of(p["family"], eta))
        return out.drop(*[c for c in out.columns if c.startswith(PREFIX)])

    def copy(self, extra=None):
        copied = GeneralizedLinearMixedModelModel(self._coefficients, self._intercept, self._tables, dict(self._values))
        copied.objectiveHistory = list(self.objectiveHistory)
        copied._resetUid(self.uid)
        return copied
