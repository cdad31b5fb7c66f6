"""The blocks of GeneralizedLinearMixedModel's coordinate descent, over the fit's rows.

The fit's rows carry the columns it reads under internal names: ``FEATURES``, ``LABEL``, ``WEIGHT``, the user's
offset ``BASE_OFFSET``, and per random effect r its entity ``entity_col(r)`` and its features as an array
``features_col(r)``. A random effect's table has one row per entity: ``entity``, ``coefficients`` (a, g_1 .. g_p),
``rows`` and, fresh from its solve, ``loss`` (its rows' loss at those coefficients). Every block reads the others'
scores by joining their tables to the rows by entity (``mixed_model.with_effects``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DoubleType, LongType, StructField, StructType

from sparkml.glm import entity_pass
from sparkml.glm.estimator import GeneralizedLinearRegression
from sparkml.glm.mixed_model import PREFIX, fixed_eta, with_effects

NAMES = ("x", "y", "w", "o", "offset", "eta_fixed")
FEATURES, LABEL, WEIGHT, BASE_OFFSET, OFFSET, ETA = (PREFIX + n for n in NAMES)
ENTITY_SOLVE_ITER, ENTITY_SOLVE_TOL = 100, 1e-10


def entity_col(r: int) -> str:
    return f"{PREFIX}e{r}"


def features_col(r: int) -> str:
    return f"{PREFIX}z{r}"


@dataclass(frozen=True)
class Effects:
    """The random effects of a fit: each one's features column as the user named it (None: intercept-only), its
    L2 strength and its number of features."""

    features: tuple[str | None, ...]
    regs: tuple[float, ...]
    widths: tuple[int, ...]

    @property
    def has_features(self) -> tuple[bool, ...]:
        return tuple(f is not None for f in self.features)

    def present(self, tables, skip=None):
        """(the tables fitted so far, their entity columns, their feature columns) leaving out effect ``skip``."""
        kept = [r for r, t in enumerate(tables) if t is not None and r != skip]
        return (
            [tables[r] for r in kept],
            [entity_col(r) for r in kept],
            [features_col(r) if self.has_features[r] else None for r in kept],
        )


class FixedEffect(GeneralizedLinearRegression):
    """GeneralizedLinearRegression's penalized fit, always (the exact minimum of the penalized deviance: IRLS with an
    L2 term is MLlib's fixed point, another model), from the previous pass's coefficients."""

    _start = None

    def _quasi_newton(self, d):
        return True

    def _penalized_start(self, s, d, family, link, has_offset):
        if self._start is None:
            return super()._penalized_start(s, d, family, link, has_offset)
        beta, b = self._start
        if beta.size != d:
            raise ValueError(f"initial model has {beta.size} fixed coefficients, but this fit's features have {d}")
        return beta.reshape(1, d), [b]


def _plus(base, scores):
    for score in scores:
        base = base + score
    return base


def fixed_effect_frame(rows: DataFrame, tables, effects: Effects, partitions: int) -> DataFrame:
    """The fixed effect's training rows: FEATURES, LABEL, WEIGHT and OFFSET, the user's offset plus every random
    effect's score."""
    present, entities, features = effects.present(tables)
    frame, scores = with_effects(rows, present, entities, features, partitions)
    return frame.select(FEATURES, LABEL, WEIGHT, _plus(F.col(BASE_OFFSET), scores).alias(OFFSET))


def fixed_scores(fixed_model, rows: DataFrame) -> DataFrame:
    """``rows`` with ETA = b + x . beta + the user's offset of the fixed effect's model, an expression of Spark SQL
    (recomputed where it is read: cheaper than a copy of the rows)."""
    eta = fixed_eta(fixed_model.intercept, fixed_model.coefficients.toArray(), F.col(FEATURES), F.col(BASE_OFFSET))
    return rows.withColumn(ETA, eta)


def solve_effect(scored, tables, effects: Effects, r, family, partitions, device) -> DataFrame:
    """Effect r's new table: the rows with every other block's score as offset and the entity's previous
    coefficients as start, partitioned by entity, each partition's entities solved together
    (``entity_pass.solve_partition``) in ``partitions`` partitions; locally checkpointed, so the next pass does
    not recompute it. Rows already partitioned by the entity (the fit's, by the first effect's) are not moved
    again: Spark drops a repartition whose child already has it; only the table is shuffled to meet them."""
    present, entities, features = effects.present(tables, skip=r)
    frame, scores = with_effects(scored, present, entities, features, partitions)
    own = tables[r]
    if own is not None:
        start = own.select(F.col("entity").alias(entity_col(r)), F.col("coefficients").alias("start"))
        frame = frame.repartition(partitions, entity_col(r)).join(start, entity_col(r), "left")
    else:
        frame = frame.withColumn("start", F.lit(None).cast(ArrayType(DoubleType())))
    columns = [F.col(entity_col(r)).alias("entity")]
    columns += [F.col(features_col(r)).alias("z")] if effects.has_features[r] else []
    columns += [F.col(LABEL).alias("y"), F.col(WEIGHT).alias("w"), _plus(F.col(ETA), scores).alias("offset")]
    columns += [F.col("start")]
    solve = functools.partial(
        entity_pass.solve_partition,
        family=family,
        reg_param=float(effects.regs[r]),
        n_features=effects.widths[r],
        features_name=effects.features[r] or "",
        max_iter=ENTITY_SOLVE_ITER,
        tol=ENTITY_SOLVE_TOL,
        device=device,
    )
    schema = StructType(
        [
            StructField("entity", scored.schema[entity_col(r)].dataType),
            StructField("coefficients", ArrayType(DoubleType())),
            StructField("rows", LongType()),
            StructField("loss", DoubleType()),
        ]
    )
    table = frame.select(*columns).repartition(partitions, "entity").mapInArrow(solve, schema)
    return table.localCheckpoint(eager=True)


def width(rows: DataFrame, r: int) -> int:
    """Effect r's number of features: the size of its first non-null vector."""
    first = rows.select(F.size(features_col(r))).where(F.col(features_col(r)).isNotNull()).first()
    if first is None:
        raise ValueError("a random effect's feature vectors are all null")
    return int(first[0])


def objective(tables, effects: Effects, penalty, center):
    """(F, shifts) read from the tables alone, one aggregate each: F's data term is the last table's sum of its
    entities' losses (its solve saw every row, each with every other block's current score as offset, and
    evaluated the loss at the coefficients it returns), the fixed effect's ``penalty`` is given, and each effect's
    penalty comes from its table. When ``center`` (the fixed intercept is fitted), each effect's mean entity
    intercept c_r moves into the fixed intercept: that leaves every eta unchanged, since each row has one entity
    per effect, and lowers the effect's penalty to lambda_r / 2 sum_e ((a_e - c_r)^2 + |g_e|^2). The shifts c_r are
    returned (0 without centering)."""
    random, shifts, data = 0.0, [], 0.0
    squares = F.aggregate(F.col("coefficients"), F.lit(0.0), lambda s, v: s + v * v)
    last = len(tables) - 1
    for r, (table, reg) in enumerate(zip(tables, effects.regs)):
        sums = [F.sum(F.col("coefficients")[0]), F.count(F.lit(1)), F.sum(squares)]
        total, count, sum_sq, *loss = table.agg(*sums, *([F.sum("loss")] if r == last else [])).first()
        if r == last:
            data = float(loss[0])
        c = total / count if center else 0.0
        shifts.append(c)
        random += reg / 2 * (sum_sq - 2 * c * total + count * c * c)
    return data + penalty + random, shifts


def shifted(table: DataFrame, shift: float) -> DataFrame:
    """``table`` with ``shift`` added to every entity's intercept (the coefficients' first entry)."""
    coefficients = F.col("coefficients")
    moved = F.concat(F.array(coefficients[0] + F.lit(shift)), F.slice(coefficients, 2, F.size(coefficients) - 1))
    return table.select("entity", moved.alias("coefficients"), "rows")
