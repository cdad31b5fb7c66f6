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

import time
from typing import TYPE_CHECKING, cast

import numpy as np
from pyspark.ml import Estimator
from pyspark.ml.functions import vector_to_array
from pyspark.ml.linalg import VectorUDT
from pyspark.sql import functions as F
from pyspark.sql.types import (
    IntegralType,
    NumericType,
    StringType,
)

from sparkml.base.estimator import TorchEstimator
from sparkml.base.params import declared_estimator
from sparkml.glm.mixed_blocks import (
    BASE_OFFSET,
    FEATURES,
    LABEL,
    OFFSET,
    WEIGHT,
    Effects,
    FixedEffect,
    entity_col,
    features_col,
    fixed_effect_frame,
    fixed_scores,
    objective,
    shifted,
    solve_effect,
    width,
)
from sparkml.glm.mixed_model import GeneralizedLinearMixedModelModel, MixedParams
from sparkml.glm.mixed_tables import beside_checkpoint, resumed_tables
from sparkml.optim.iterations import Iteration
from sparkml.params.mixed import CANONICAL_LINKS, GENERALIZED_LINEAR_MIXED_MODEL
from sparkml.runtime.cancellation import cancellable
from sparkml.runtime.session_kind import is_connect

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from typing_extensions import Self


@declared_estimator(GENERALIZED_LINEAR_MIXED_MODEL)
class GeneralizedLinearMixedModel(TorchEstimator, Estimator, MixedParams):
    """A generalized linear mixed model fitted by block coordinate descent on Spark (module docstring).

    A click model with a per-user intercept and per-user slopes on the user's own features::

        glmm = GeneralizedLinearMixedModel(
            family="binomial",
            featuresCol="features",            # the fixed effect's features (a vector column)
            entityCols=["user_id"],            # one random effect: the user (string or integer ids)
            entityFeaturesCols=["user_features"],  # its own features per row ("" for an intercept only)
            entityRegParams=[1.0],             # its L2 strength
            regParam=1e-4,
        )
        model = glmm.fit(train)
        model.transform(test)                  # "prediction": the click probability
        model.randomEffects[0]                 # user_id, intercept, coefficients (a DataFrame)

    ``model.objectiveHistory`` holds F after each pass.

    With ``checkpointDir`` set, every ``checkpointInterval`` passes the fit writes a checkpoint there: the fixed
    coefficients, the objective history and each random effect's table (a Parquet dataset, written by the
    executors: the directory must be one the driver and the executors share, as a local disk in local mode or a
    mount on a cluster). A fit of the same estimator on the same data that finds one there resumes after its pass
    and takes the passes the uninterrupted fit would have taken; a checkpoint of another fit (other Params or
    data) is refused with an error naming what differs. The checkpoints are removed when the fit succeeds.
    """

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
        if model.getEntityCols() != entities:
            raise ValueError(f"initial model has random effects on {model.getEntityCols()}, this fit on {entities}")
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
            aggregationDepth: int = 2,
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

        def setFamily(self, value: str) -> Self: ...

        def setLink(self, value: str) -> Self: ...

        def setFitIntercept(self, value: bool) -> Self: ...

        def setMaxIter(self, value: int) -> Self: ...

        def setTol(self, value: float) -> Self: ...

        def setRegParam(self, value: float) -> Self: ...

        def setElasticNetParam(self, value: float) -> Self: ...

        def setWeightCol(self, value: str) -> Self: ...

        def setOffsetCol(self, value: str) -> Self: ...

        def setEntityCols(self, value: list[str]) -> Self: ...

        def setEntityFeaturesCols(self, value: list[str]) -> Self: ...

        def setEntityRegParams(self, value: list[float]) -> Self: ...

        def setAggregationDepth(self, value: int) -> Self: ...

    # </param-stubs>

    def _lengths(self) -> dict[str, int]:
        """The length of each of the three lists (entityCols, entityFeaturesCols, entityRegParams) that is set."""
        names = ("entityCols", "entityFeaturesCols", "entityRegParams")
        return {n: len(self.getOrDefault(n)) for n in names if self.isDefined(n)}

    def _check_params(self):
        super()._check_params()
        if not self.isDefined("entityCols"):
            raise ValueError("GeneralizedLinearMixedModel needs entityCols: the random effects' entity id columns")
        lengths = self._lengths()
        if len(set(lengths.values())) != 1:
            found = ", ".join(f"{n} {k}" for n, k in lengths.items())
            raise ValueError(
                f"entityCols, entityFeaturesCols and entityRegParams must have one entry per random effect; got {found}"
            )
        family = self.getFamily().lower()
        if self.isSet("link") and self.getLink().lower() != CANONICAL_LINKS[family]:
            raise ValueError(
                f"family {family!r} takes its canonical link {CANONICAL_LINKS[family]!r}, not {self.getLink()!r}"
            )

    def _check_input(self, dataset: DataFrame):
        """Columns and types before any job; then one job: the rows, the weights' sum, nulls and label range."""
        schema = {f.name: f.dataType for f in dataset.schema.fields}
        effects = self.effects()

        def need(param, name, ok, what):
            if name not in schema:
                raise ValueError(f"{param} {name!r} is not a column of the dataset (columns: {sorted(schema)})")
            if not ok(schema[name]):
                raise ValueError(f"{param} {name!r} must be {what}; it is {schema[name].simpleString()}")

        need("featuresCol", self.getFeaturesCol(), lambda t: isinstance(t, VectorUDT), "a vector column")
        need("labelCol", self.getLabelCol(), lambda t: isinstance(t, NumericType), "numeric")
        for param in ("weightCol", "offsetCol"):
            if self.column(param):
                need(param, self.column(param), lambda t: isinstance(t, NumericType), "numeric")
        for entity, z, _ in effects:
            need(
                "entityCols", entity, lambda t: isinstance(t, (StringType, IntegralType)), "a string or integer column"
            )
            if z:
                need("entityFeaturesCols", z, lambda t: isinstance(t, VectorUDT), "a vector column")

    def _rows(self, dataset: DataFrame) -> DataFrame:
        """The columns the fit reads, under internal names (z as arrays), cached."""
        effects = self.effects()
        w, o = self.column("weightCol"), self.column("offsetCol")
        columns = [
            F.col(self.getFeaturesCol()).alias(FEATURES),
            F.col(self.getLabelCol()).cast("double").alias(LABEL),
            (F.col(w).cast("double") if w else F.lit(1.0)).alias(WEIGHT),
            (F.col(o).cast("double") if o else F.lit(0.0)).alias(BASE_OFFSET),
        ]
        for r, (entity, z, _) in enumerate(effects):
            columns.append(F.col(entity).alias(entity_col(r)))
            if z:
                # vector_to_array fails on a null vector: kept null, so _describe counts and refuses it
                array = F.when(F.col(z).isNotNull(), vector_to_array(F.col(z), "float64"))
                columns.append(array.alias(features_col(r)))
        return dataset.select(*columns)

    def _describe(self, rows: DataFrame):
        """The input's rows, W and sum_i w_i y_i (what a checkpoint records of the data), after refusing null ids,
        null per-entity feature vectors, labels outside the family's range and an empty frame: one job, before any
        training."""
        effects = self.effects()
        with_features = [r for r, (_, z, _) in enumerate(effects) if z]
        aggregates = [F.count(F.lit(1)), F.sum(WEIGHT), F.min(LABEL), F.max(LABEL), F.min(WEIGHT)]
        aggregates += [F.sum(F.col(WEIGHT) * F.col(LABEL))]
        aggregates += [F.sum(F.col(entity_col(r)).isNull().cast("long")) for r in range(len(effects))]
        aggregates += [F.sum(F.col(features_col(r)).isNull().cast("long")) for r in with_features]
        width = 6 + len(effects) + len(with_features)
        n, weight_sum, low, high, min_w, label_sum, *nulls = rows.agg(*aggregates).first() or [0] * width
        if n == 0:
            raise ValueError("GeneralizedLinearMixedModel: the dataset has no rows")
        for (entity, _, _), count in zip(effects, nulls):
            if count:
                raise ValueError(f"entityCols {entity!r} has {count} null ids: every row needs an entity")
        for r, count in zip(with_features, nulls[len(effects) :]):
            if count:
                raise ValueError(
                    f"entityFeaturesCols {effects[r][1]!r} has {count} null vectors of {n} rows: every row needs "
                    "its random effect's features (fill or drop those rows)"
                )
        if min_w is None or min_w < 0:
            raise ValueError(f"weightCol {self.column('weightCol')!r} has negative or null weights")
        family = self.getFamily().lower()
        if family == "binomial" and (low < 0 or high > 1):
            raise ValueError(f"labelCol {self.getLabelCol()!r}: the binomial family needs labels in [0, 1]")
        if family == "poisson" and low < 0:
            raise ValueError(f"labelCol {self.getLabelCol()!r}: the poisson family needs non-negative labels")
        return {"rows": int(n), "weight sum": float(weight_sum), "label sum": float(label_sum)}

    def _checkpoint_refusal(self):
        """None: a fit with ``checkpointDir`` writes a checkpoint every ``checkpointInterval`` passes (class
        docstring)."""
        return None

    def _fixed(self, start):
        est = FixedEffect(
            family=self.getFamily().lower(),
            featuresCol=FEATURES,
            labelCol=LABEL,
            weightCol=WEIGHT,
            offsetCol=OFFSET,
            fitIntercept=self.getFitIntercept(),
            regParam=self.getRegParam(),
            elasticNetParam=self.getElasticNetParam(),
            maxIter=100,
            tol=1e-10,
            aggregationDepth=self.getAggregationDepth(),
            strategy=self.getStrategy(),
            device=self.getDevice(),
            dtype=self.getDtype(),
            numWorkers=self.getNumWorkers(),
        )
        est._start = start
        return est

    def _fit(self, dataset: DataFrame) -> GeneralizedLinearMixedModelModel:
        self._check_params()
        if is_connect(dataset):
            raise NotImplementedError(
                "GeneralizedLinearMixedModel needs a classic Spark session: its random effects' tables are "
                "checkpointed on the executors between passes, which Spark Connect does not offer"
            )
        self._check_input(dataset)
        with cancellable(dataset.sparkSession, f"{type(self).__name__} fit"):
            return self._descend(dataset)

    def _descend(self, dataset: DataFrame) -> GeneralizedLinearMixedModelModel:
        effects = self.effects()
        family = self.getFamily().lower()
        # the rows partitioned by the first effect's entity once: its joins and solves then move no row
        partitions = max(dataset.rdd.getNumPartitions(), dataset.sparkSession.sparkContext.defaultParallelism)
        rows = self._rows(dataset).repartition(partitions, entity_col(0)).cache()
        kept: list[DataFrame] = [rows]
        try:
            data = self._describe(rows)
            weight_sum = data["weight sum"]
            blocks = Effects(
                tuple(f for _, f, _ in effects),
                tuple(reg for _, _, reg in effects),
                tuple(width(rows, r) if f else 0 for r, (_, f, _) in enumerate(effects)),
            )
            warm, initial_tables = self._warm_start(effects)
            tables: list[DataFrame | None] = initial_tables
            start: tuple[np.ndarray, float] = warm or (np.zeros(0), 0.0)
            history: list[float] = []
            progress = self._progress()
            data["effect widths"] = list(blocks.widths)
            checkpoint = self._checkpoint_of(data, None if warm is None else np.r_[warm[0], warm[1]])
            first = 1
            if checkpoint is not None and checkpoint.resume is not None:
                state = checkpoint.resume
                first, history = state["iteration"] + 1, list(state["history"])
                start = (np.asarray(state["beta"]), float(state["intercept"]))
                path = cast(str, checkpoint.resume_path)
                tables = list(resumed_tables(rows.sparkSession, path, list(blocks.widths)))
            for iteration in range(first, self.getMaxIter() + 1):
                began = time.perf_counter()
                fixed = self._fixed(start if warm or iteration > 1 else None)
                fixed_model = fixed.fit(fixed_effect_frame(rows, tables, blocks, partitions))
                start = (fixed_model.coefficients.toArray(), fixed_model.intercept)
                scored = fixed_scores(fixed_model, rows)
                for r in range(len(effects)):
                    tables[r] = solve_effect(scored, tables, blocks, r, family, partitions, self.getDevice())
                center = self.getFitIntercept()
                value, shifts = objective(tables, blocks, self._penalty(start[0], weight_sum), center)
                if center:  # each effect's mean intercept moved into b: eta unchanged, F lower
                    tables = [shifted(cast("DataFrame", t), -c) for t, c in zip(tables, shifts)]
                    start = (start[0], start[1] + sum(shifts))
                history.append(value)
                seconds, detail = time.perf_counter() - began, f"{len(effects)} random effects"
                progress(
                    Iteration(type(self).__name__, "coordinate descent pass", iteration, value, None, seconds, detail)
                )
                if len(history) > 1 and abs(history[-2] - value) <= self.getTol() * max(1.0, abs(value)):
                    break
                if checkpoint is not None and iteration % checkpoint.interval == 0 and iteration < self.getMaxIter():
                    state = {"iteration": iteration, "history": history, "beta": start[0], "intercept": start[1]}
                    checkpoint.save(iteration, state, beside=beside_checkpoint(cast("list[DataFrame]", tables)))
            model = GeneralizedLinearMixedModelModel(
                start[0], start[1], cast("list[DataFrame]", tables), list(blocks.widths)
            )
            self._copyValues(model)
            model.objectiveHistory = history
            model._resetUid(self.uid)
            if checkpoint is not None:
                checkpoint.remove()
            return model
        finally:
            for frame in kept:
                frame.unpersist()

    def _penalty(self, beta, weight_sum):
        """The fixed effect's penalty in F: regParam W [alpha |beta|_1 + (1 - alpha) / 2 |beta|^2]."""
        alpha, lam = self.getElasticNetParam(), self.getRegParam()
        return lam * weight_sum * (alpha * float(np.abs(beta).sum()) + (1 - alpha) / 2 * float((beta * beta).sum()))


__all__ = ["GeneralizedLinearMixedModel", "GeneralizedLinearMixedModelModel"]
