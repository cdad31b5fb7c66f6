"""GeneralizedLinearMixedModel: a global GLM plus one small GLM per entity of each random effect (GLMix, GAME).

The model (``mixed_model``): eta_i = b + x_i . beta + o_i + sum_r (a_{r,e_r(i)} + z_ir . g_{r,e_r(i)}), the mean
g^-1(eta_i) under the family's canonical link. The fit minimizes, with W the sum of the weights, no
standardization and the fixed intercept b unpenalized,

    F = sum_i w_i l(y_i, eta_i) + regParam W [alpha |beta|_1 + (1 - alpha) / 2 |beta|^2]
        + sum_r entityRegParams[r] / 2 sum_e (a_re^2 + |g_re|^2)

(alpha = ``elasticNetParam``; l the family's negative log-likelihood per unit weight up to a constant: gaussian
(y - eta)^2 / 2, binomial log(1 + e^eta) - y eta, poisson e^eta - y eta). F is strictly convex in the random
effects and convex in (b, beta), so block coordinate descent reaches its minimum. Each pass:

1. the fixed effect: GeneralizedLinearRegression's penalized fit (L-BFGS / OWL-QN over the strategy's distributed
   sums: ``sparkml.glm.penalized``), with the random effects' scores added to the offset, warm-started from the
   previous pass;
2. each random effect in turn: the rows, with every other block's score as their offset, partitioned by entity,
   and every partition's entities solved together by batched Newton (``sparkml.glm.entity_pass``,
   ``sparkml.gpu.entity_glm``), each from its previous coefficients. The result is the effect's table (entity ->
   coefficients), a DataFrame kept on the executors (checkpointed locally, so its lineage does not grow).

Only scores cross between the blocks, as joins by entity in Spark SQL; no table is collected on the driver. The
passes stop when F falls by less than ``tol`` relative, or after ``maxIter`` passes.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, cast

import numpy as np
from pyspark.ml import Estimator
from pyspark.ml.functions import vector_to_array
from pyspark.ml.linalg import VectorUDT
from pyspark.ml.param.shared import (
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
from pyspark.sql.types import (
    ArrayType,
    DoubleType,
    IntegralType,
    LongType,
    NumericType,
    StringType,
    StructField,
    StructType,
)

from sparkml.base.estimator import TorchEstimator
from sparkml.base.params import HasTrainingParams, declared_estimator
from sparkml.glm import entity_pass
from sparkml.glm.estimator import GeneralizedLinearRegression
from sparkml.glm.mixed_model import PREFIX, GeneralizedLinearMixedModelModel, mean_of, unit_loss, with_effects
from sparkml.optim.iterations import Iteration
from sparkml.params.mixed import GENERALIZED_LINEAR_MIXED_MODEL
from sparkml.runtime.cancellation import cancellable

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from typing_extensions import Self

_X, _Y, _W, _O, _OFF, _ETA = (PREFIX + n for n in ("x", "y", "w", "o", "offset", "eta_fixed"))
_ENTITY_SOLVE_ITER, _ENTITY_SOLVE_TOL = 100, 1e-10


def _entity(r):
    return f"{PREFIX}e{r}"


def _z(r):
    return f"{PREFIX}z{r}"


class _FixedEffect(GeneralizedLinearRegression):
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


class _Params(
    HasLabelCol,
    HasFeaturesCol,
    HasPredictionCol,
    HasFitIntercept,
    HasMaxIter,
    HasTol,
    HasRegParam,
    HasElasticNetParam,
    HasWeightCol,
    HasTrainingParams,
):
    pass


@declared_estimator(GENERALIZED_LINEAR_MIXED_MODEL)
class GeneralizedLinearMixedModel(TorchEstimator, Estimator, _Params):
    """A generalized linear mixed model fitted by block coordinate descent on Spark (module docstring)."""

    _initial_model: GeneralizedLinearMixedModelModel | None = None

    def setInitialModel(self, model: GeneralizedLinearMixedModelModel) -> Self:
        """Warm start from ``model``: its fixed coefficients and each random effect's table (an entity it has not
        seen starts at 0). It must have the same random effects (entity columns) and features."""
        self._initial_model = model
        return self

    def _warm_start(self, effects):
        """(fixed start or None, each effect's start table or None) from the initial model."""
        model = self._initial_model
        if model is None:
            return None, [None] * len(effects)
        entities = [e for e, _, _ in effects]
        if model._values["entityCols"] != entities:
            raise ValueError(
                f"initial model has random effects on {model._values['entityCols']}, this fit on {entities}"
            )
        return (model.coefficients.toArray(), model.intercept), list(model._tables)

    # <param-stubs>
    if TYPE_CHECKING:  # made from the Params' declarations (tools/write_param_stubs.py)

        def __init__(
            self,
            *,
            labelCol: str = "label",
            featuresCol: str = "features",
            predictionCol: str = "prediction",
            family: str = "gaussian",
            link: str | None = None,
            fitIntercept: bool = True,
            maxIter: int = 20,
            tol: float = 1e-06,
            regParam: float = 0.0,
            elasticNetParam: float = 0.0,
            weightCol: str | None = None,
            offsetCol: str | None = None,
            entityCols: list[str] | None = None,
            entityFeaturesCols: list[str] | None = None,
            entityRegParams: list[float] | None = None,
            strategy: str = "auto",
            device: str = "auto",
            dtype: str = "float64",
            numWorkers: int = 0,
            checkpointDir: str | None = None,
            checkpointInterval: int = 10,
        ) -> None: ...

        def setLabelCol(self, value: str) -> Self: ...

        def setFeaturesCol(self, value: str) -> Self: ...

        def setPredictionCol(self, value: str) -> Self: ...

        def getFamily(self) -> str: ...

        def setFamily(self, value: str) -> Self: ...

        def getLink(self) -> str: ...

        def setLink(self, value: str) -> Self: ...

        def setFitIntercept(self, value: bool) -> Self: ...

        def setMaxIter(self, value: int) -> Self: ...

        def setTol(self, value: float) -> Self: ...

        def setRegParam(self, value: float) -> Self: ...

        def setElasticNetParam(self, value: float) -> Self: ...

        def setWeightCol(self, value: str) -> Self: ...

        def getOffsetCol(self) -> str: ...

        def setOffsetCol(self, value: str) -> Self: ...

        def getEntityCols(self) -> list[str]: ...

        def setEntityCols(self, value: list[str]) -> Self: ...

        def getEntityFeaturesCols(self) -> list[str]: ...

        def setEntityFeaturesCols(self, value: list[str]) -> Self: ...

        def getEntityRegParams(self) -> list[float]: ...

        def setEntityRegParams(self, value: list[float]) -> Self: ...

    # </param-stubs>

    def _effects(self):
        """[(entity column, features column or None, L2 strength)] of each random effect."""
        entities = self.getEntityCols() if self.isDefined("entityCols") else []
        features = self.getEntityFeaturesCols() if self.isDefined("entityFeaturesCols") else [""] * len(entities)
        regs = self.getEntityRegParams() if self.isDefined("entityRegParams") else [1.0] * len(entities)
        return list(zip(entities, [f or None for f in features], regs)), (len(entities), len(features), len(regs))

    def _check_params(self):
        super()._check_params()
        if not self.isDefined("entityCols"):
            raise ValueError("GeneralizedLinearMixedModel needs entityCols: the random effects' entity id columns")
        _, lengths = self._effects()
        if len(set(lengths)) != 1:
            raise ValueError(
                "entityCols, entityFeaturesCols and entityRegParams must have one entry per random effect; got "
                f"{lengths[0]}, {lengths[1]} and {lengths[2]}"
            )
        family = self.getFamily().lower()
        if self.isSet("link") and self.getLink().lower() != mean_link(family):
            raise ValueError(
                f"family {family!r} takes its canonical link {mean_link(family)!r}, not {self.getLink()!r}"
            )

    def _column(self, name):
        return (self.getOrDefault(name) if self.isDefined(name) else None) or None

    def _check_input(self, dataset: DataFrame):
        """Columns and types before any job; then one job: the rows, the weights' sum, nulls and label range."""
        schema = {f.name: f.dataType for f in dataset.schema.fields}
        effects, _ = self._effects()

        def need(param, name, ok, what):
            if name not in schema:
                raise ValueError(f"{param} {name!r} is not a column of the dataset (columns: {sorted(schema)})")
            if not ok(schema[name]):
                raise ValueError(f"{param} {name!r} must be {what}; it is {schema[name].simpleString()}")

        need("featuresCol", self.getFeaturesCol(), lambda t: isinstance(t, VectorUDT), "a vector column")
        need("labelCol", self.getLabelCol(), lambda t: isinstance(t, NumericType), "numeric")
        for param in ("weightCol", "offsetCol"):
            if self._column(param):
                need(param, self._column(param), lambda t: isinstance(t, NumericType), "numeric")
        for entity, z, _ in effects:
            need(
                "entityCols", entity, lambda t: isinstance(t, (StringType, IntegralType)), "a string or integer column"
            )
            if z:
                need("entityFeaturesCols", z, lambda t: isinstance(t, VectorUDT), "a vector column")

    def _rows(self, dataset: DataFrame) -> DataFrame:
        """The columns the fit reads, under internal names (z as arrays), cached."""
        effects, _ = self._effects()
        w, o = self._column("weightCol"), self._column("offsetCol")
        columns = [
            F.col(self.getFeaturesCol()).alias(_X),
            F.col(self.getLabelCol()).cast("double").alias(_Y),
            (F.col(w).cast("double") if w else F.lit(1.0)).alias(_W),
            (F.col(o).cast("double") if o else F.lit(0.0)).alias(_O),
        ]
        for r, (entity, z, _) in enumerate(effects):
            columns.append(F.col(entity).alias(_entity(r)))
            if z:
                columns.append(vector_to_array(F.col(z), "float64").alias(_z(r)))
        return dataset.select(*columns)

    def _describe(self, rows: DataFrame):
        """(rows, W) of the input, after refusing null ids, labels outside the family's range and an empty frame."""
        effects, _ = self._effects()
        aggregates = [F.count(F.lit(1)), F.sum(_W), F.min(_Y), F.max(_Y), F.min(_W)]
        aggregates += [F.sum(F.col(_entity(r)).isNull().cast("long")) for r in range(len(effects))]
        n, weight_sum, low, high, min_w, *nulls = rows.agg(*aggregates).first() or [0] * (5 + len(effects))
        if n == 0:
            raise ValueError("GeneralizedLinearMixedModel: the dataset has no rows")
        for (entity, _, _), count in zip(effects, nulls):
            if count:
                raise ValueError(f"entityCols {entity!r} has {count} null ids: every row needs an entity")
        if min_w is None or min_w < 0:
            raise ValueError(f"weightCol {self._column('weightCol')!r} has negative or null weights")
        family = self.getFamily().lower()
        if family == "binomial" and (low < 0 or high > 1):
            raise ValueError(f"labelCol {self.getLabelCol()!r}: the binomial family needs labels in [0, 1]")
        if family == "poisson" and low < 0:
            raise ValueError(f"labelCol {self.getLabelCol()!r}: the poisson family needs non-negative labels")
        return n, float(weight_sum)

    def _fixed(self, start):
        est = _FixedEffect(
            family=self.getFamily().lower(),
            featuresCol=_X,
            labelCol=_Y,
            weightCol=_W,
            offsetCol=_OFF,
            fitIntercept=self.getFitIntercept(),
            regParam=self.getRegParam(),
            elasticNetParam=self.getElasticNetParam(),
            maxIter=100,
            tol=1e-10,
            strategy=self.getStrategy(),
            device=self.getDevice(),
            dtype=self.getDtype(),
            numWorkers=self.getNumWorkers(),
        )
        est._start = start
        return est

    def _fit(self, dataset: DataFrame) -> GeneralizedLinearMixedModelModel:
        self._check_params()
        self._check_input(dataset)
        with cancellable(dataset.sparkSession, f"{type(self).__name__} fit"):
            return self._descend(dataset)

    def _descend(self, dataset: DataFrame) -> GeneralizedLinearMixedModelModel:
        effects, _ = self._effects()
        family = self.getFamily().lower()
        rows = self._rows(dataset).cache()
        kept: list[DataFrame] = [rows]
        try:
            _, weight_sum = self._describe(rows)
            partitions = max(rows.rdd.getNumPartitions(), dataset.sparkSession.sparkContext.defaultParallelism)
            widths = [self._effect_width(rows, r) if z else 0 for r, (_, z, _) in enumerate(effects)]
            warm, initial_tables = self._warm_start(effects)
            tables: list[DataFrame | None] = initial_tables
            start: tuple[np.ndarray, float] = warm or (np.zeros(0), 0.0)
            history: list[float] = []
            previous = None
            progress = self._progress()
            for iteration in range(1, self.getMaxIter() + 1):
                began = time.perf_counter()
                fixed_model = self._fit_fixed(rows, tables, effects, start if warm or iteration > 1 else None)
                start = (fixed_model.coefficients.toArray(), fixed_model.intercept)
                scored = self._fixed_scores(fixed_model, rows).cache()
                kept.append(scored)
                for r, (_, _, reg) in enumerate(effects):
                    tables[r] = self._solve_effect(scored, tables, effects, r, family, reg, partitions, widths[r])
                objective, shifts = self._objective(scored, tables, effects, family, start[0], weight_sum)
                if self.getFitIntercept():  # each effect's mean intercept moved into b: eta unchanged, F lower
                    tables = [_shifted(cast("DataFrame", t), -c) for t, c in zip(tables, shifts)]
                    start = (start[0], start[1] + sum(shifts))
                history.append(objective)
                progress(
                    Iteration(
                        type(self).__name__,
                        "coordinate descent pass",
                        iteration,
                        objective,
                        None,
                        time.perf_counter() - began,
                        f"{len(effects)} random effects",
                    )
                )
                if previous is not None and abs(previous - objective) <= self.getTol() * max(1.0, abs(objective)):
                    break
                previous = objective
            params = {
                "featuresCol": self.getFeaturesCol(),
                "predictionCol": self.getPredictionCol(),
                "offsetCol": self._column("offsetCol"),
                "family": family,
                "entityCols": [e for e, _, _ in effects],
                "entityFeaturesCols": [z or "" for _, z, _ in effects],
            }
            model = GeneralizedLinearMixedModelModel(start[0], start[1], cast("list[DataFrame]", tables), params)
            model.objectiveHistory = history
            model._resetUid(self.uid)
            return model
        finally:
            for frame in kept:
                frame.unpersist()

    def _fit_fixed(self, rows, tables, effects, start):
        frame, scores = with_effects(rows, [t for t in tables if t is not None], *self._present(tables, effects))
        offset = F.col(_O)
        for score in scores:
            offset = offset + score
        return self._fixed(start).fit(frame.select(_X, _Y, _W, offset.alias(_OFF)))

    @staticmethod
    def _present(tables, effects, skip=None):
        kept = [r for r, t in enumerate(tables) if t is not None and r != skip]
        return [_entity(r) for r in kept], [_z(r) if effects[r][1] else None for r in kept]

    @staticmethod
    def _fixed_scores(fixed_model, rows):
        scorer = fixed_model.copy({fixed_model.linkPredictionCol: _ETA, fixed_model.offsetCol: _O})
        scorer = scorer.copy({scorer.featuresCol: _X, scorer.predictionCol: PREFIX + "mu"})
        return scorer.transform(rows).drop(PREFIX + "mu")

    def _solve_effect(self, scored, tables, effects, r, family, reg, partitions, n_features):
        others = [t for q, t in enumerate(tables) if t is not None and q != r]
        frame, scores = with_effects(scored, others, *self._present(tables, effects, skip=r))
        offset = F.col(_ETA)
        for score in scores:
            offset = offset + score
        own = tables[r]
        if own is not None:
            frame = frame.join(
                own.select(F.col("entity").alias(_entity(r)), F.col("coefficients").alias("start")), _entity(r), "left"
            )
        else:
            frame = frame.withColumn("start", F.lit(None).cast(ArrayType(DoubleType())))
        z = effects[r][1]
        columns = [F.col(_entity(r)).alias("entity")]
        columns += [F.col(_z(r)).alias("z")] if z else []
        columns += [F.col(_Y).alias("y"), F.col(_W).alias("w"), offset.alias("offset"), F.col("start")]
        solve = functools.partial(
            entity_pass.solve_partition,
            family=family,
            reg_param=float(reg),
            n_features=n_features,
            features_name=z or "",
            max_iter=_ENTITY_SOLVE_ITER,
            tol=_ENTITY_SOLVE_TOL,
            device=self.getDevice(),
        )
        entity_type = scored.schema[_entity(r)].dataType
        schema = StructType(
            [
                StructField("entity", entity_type),
                StructField("coefficients", ArrayType(DoubleType())),
                StructField("rows", LongType()),
            ]
        )
        table = frame.select(*columns).repartition(partitions, "entity").mapInArrow(solve, schema)
        return table.localCheckpoint(eager=True)

    @staticmethod
    def _effect_width(scored, r):
        first = scored.select(F.size(_z(r))).where(F.col(_z(r)).isNotNull()).first()
        if first is None:
            raise ValueError("a random effect's feature vectors are all null")
        return int(first[0])

    def _objective(self, scored, tables, effects, family, beta, weight_sum):
        """(F, shifts): F after moving each effect's mean entity intercept c_r into the fixed intercept (when it
        is fitted: the shift leaves every eta unchanged, since each row has one entity per effect, and lowers
        each penalty to lambda_r / 2 sum_e ((a_e - c_r)^2 + |g_e|^2)), and the c_r (0 without an intercept)."""
        frame, scores = with_effects(scored, tables, *self._present(tables, effects))
        eta = F.col(_ETA)
        for score in scores:
            eta = eta + score
        data = frame.agg(F.sum(F.col(_W) * unit_loss(family, F.col(_Y), eta))).first()[0]
        alpha, lam = self.getElasticNetParam(), self.getRegParam()
        fixed = lam * weight_sum * (alpha * float(abs(beta).sum()) + (1 - alpha) / 2 * float((beta * beta).sum()))
        random, shifts = 0.0, []
        squares = F.aggregate(F.col("coefficients"), F.lit(0.0), lambda s, v: s + v * v)
        for table, (_, _, reg) in zip(tables, effects):
            total, count, sum_sq = table.agg(F.sum(F.col("coefficients")[0]), F.count(F.lit(1)), F.sum(squares)).first()
            c = total / count if self.getFitIntercept() else 0.0
            shifts.append(c)
            random += reg / 2 * (sum_sq - 2 * c * total + count * c * c)
        return float(data) + fixed + random, shifts


def _shifted(table: DataFrame, shift: float) -> DataFrame:
    """``table`` with ``shift`` added to every entity's intercept (the coefficients' first entry)."""
    coefficients = F.col("coefficients")
    moved = F.concat(F.array(coefficients[0] + F.lit(shift)), F.slice(coefficients, 2, F.size(coefficients) - 1))
    return table.select("entity", moved.alias("coefficients"), "rows")


def mean_link(family: str) -> str:
    from sparkml.params.mixed import CANONICAL_LINKS

    return CANONICAL_LINKS[family]


__all__ = ["GeneralizedLinearMixedModel", "GeneralizedLinearMixedModelModel", "mean_of"]
