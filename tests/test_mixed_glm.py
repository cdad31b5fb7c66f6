"""GeneralizedLinearMixedModel: block coordinate descent reaches the joint optimum of the whole objective (gaussian:
its normal equations; binomial and poisson: scipy's L-BFGS over every parameter at once), an entity unseen in
training scores with the fixed effect alone, no table reaches the driver (fitting, saving or loading), the model and
the estimator save and load, and bad input and damaged tables are refused."""

import os
import shutil

import numpy as np
import pandas as pd
import pytest
from pyspark.ml.linalg import Vectors, VectorUDT
from pyspark.sql import functions as F
from scipy.optimize import minimize
from support.helpers import glm_response

from sparkml.regression import GeneralizedLinearMixedModel, GeneralizedLinearMixedModelModel
from sparkml.saved.model_files import ModelFileError

N, M, D, P = 360, 12, 2, 1
REG, ENTITY_REG = 0.05, 2.0


def _data(family, seed=5):
    rng = np.random.default_rng(seed)
    e = rng.integers(0, M, N)
    x, z = rng.normal(size=(N, D)), rng.normal(size=(N, P))
    a, g = rng.normal(scale=0.7, size=M), rng.normal(scale=0.5, size=(M, P))
    o = rng.normal(scale=0.2, size=N)
    eta = 0.2 + x @ [0.6, -0.4] + a[e] + (z * g[e]).sum(1) + o
    y = glm_response(rng, family, eta, 0.5)
    w = rng.uniform(0.5, 1.5, N)
    return e, x, z, o, y, w


def _frame(spark, e, x, z, o, y, w):
    rows = [
        (Vectors.dense(x[i]), Vectors.dense(z[i]), f"u{e[i]}", float(o[i]), float(y[i]), float(w[i])) for i in range(N)
    ]
    return spark.createDataFrame(rows, ["features", "zf", "user", "o", "label", "w"]).repartition(3).cache()


def _loss(family, y, eta):
    if family == "gaussian":
        return 0.5 * (y - eta) ** 2, eta - y
    if family == "binomial":
        return np.logaddexp(0, eta) - y * eta, 1 / (1 + np.exp(-eta)) - y
    return np.exp(eta) - y * eta, np.exp(eta) - y


def _joint(family, e, x, z, o, y, w):
    """The minimum of the whole objective over (b, beta, a, g) at once: the reference."""
    codes = np.unique(e, return_inverse=True)[1]
    m = codes.max() + 1
    design = np.zeros((N, 1 + D + m * (1 + P)))
    design[:, 0], design[:, 1 : 1 + D] = 1.0, x
    for i in range(N):
        base = 1 + D + codes[i] * (1 + P)
        design[i, base], design[i, base + 1 : base + 1 + P] = 1.0, z[i]
    penalty = np.r_[0.0, np.full(D, REG * w.sum()), np.full(m * (1 + P), ENTITY_REG)]
    if family == "gaussian":
        theta = np.linalg.solve(design.T @ (w[:, None] * design) + np.diag(penalty), design.T @ (w * (y - o)))
    else:

        def f(theta):
            eta = design @ theta + o
            loss, d1 = _loss(family, y, eta)
            return (w * loss).sum() + 0.5 * penalty @ theta**2, design.T @ (w * d1) + penalty * theta

        theta = minimize(
            f,
            np.zeros(design.shape[1]),
            jac=True,
            method="L-BFGS-B",
            options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 5000},
        ).x
    loss, _ = _loss(family, y, design @ theta + o)
    return theta, (w * loss).sum() + 0.5 * penalty @ theta**2


def _estimator(family, **kwargs):
    params = dict(family=family, entityCols=["user"], entityFeaturesCols=["zf"], entityRegParams=[ENTITY_REG])
    params.update(regParam=REG, weightCol="w", offsetCol="o", tol=1e-9, maxIter=30)
    params.update(kwargs)
    return GeneralizedLinearMixedModel(**params)


@pytest.fixture(scope="module")
def collected(spark):
    """The rows each call that brings rows to the driver returned while the module's fits run: DataFrame's
    collect, take, toPandas and toLocalIterator, and an RDD's collect."""
    from pyspark import RDD
    from pyspark.sql import DataFrame

    counts, originals = [], []

    def counting(cls, name):
        original = getattr(cls, name)
        originals.append((cls, name, original))

        def counted(self, *args, **kwargs):
            result = original(self, *args, **kwargs)
            if name == "toLocalIterator":
                result = list(result)
            counts.append(len(result))
            return iter(result) if name == "toLocalIterator" else result

        setattr(cls, name, counted)

    for cls, name in [(DataFrame, "collect"), (DataFrame, "take"), (DataFrame, "toPandas"), (RDD, "collect")]:
        counting(cls, name)
    counting(DataFrame, "toLocalIterator")
    yield counts
    for cls, name, original in originals:
        setattr(cls, name, original)


@pytest.mark.parametrize("family", ["gaussian", "binomial", pytest.param("poisson", marks=pytest.mark.full)])
def test_coordinate_descent_reaches_the_joint_optimum(spark, collected, family):
    data = _data(family)
    df = _frame(spark, *data)
    collected.clear()
    model = _estimator(family).fit(df)
    assert collected and max(collected) <= 4  # aggregates, first rows and the fixed effect's sums: no table
    theta, optimum = _joint(family, *data)
    assert model.objectiveHistory[-1] == pytest.approx(optimum, rel=1e-6)
    assert model.objectiveHistory[-1] >= optimum - 1e-9 * abs(optimum)  # the reference is the minimum
    np.testing.assert_allclose(model.intercept, theta[0], atol=1e-3)
    np.testing.assert_allclose(model.coefficients.toArray(), theta[1 : 1 + D], atol=1e-3)
    table = {r.user: (r.intercept, *r.coefficients.toArray()) for r in model.randomEffects[0].toLocalIterator()}
    users = np.unique(data[0])
    ours = np.array([table[f"u{u}"] for u in users])
    np.testing.assert_allclose(ours, theta[1 + D :].reshape(len(users), 1 + P), atol=1e-3)
    # the predictions: the mean of eta = b + x . beta + o + a_e + z . g_e
    e, x, z, o, _, _ = data
    eta = model.intercept + x @ model.coefficients.toArray() + o + ours[e, 0] + (z * ours[e, 1:]).sum(1)
    mean = {"gaussian": eta, "binomial": 1 / (1 + np.exp(-eta)), "poisson": np.exp(eta)}[family]
    scored = model.transform(df.withColumn("i", F.monotonically_increasing_id())).toPandas()
    expected = {(row.user, row.label, row.o): m for row, m in zip(_pandas(data), mean)}
    for row in scored.itertuples():
        assert row.prediction == pytest.approx(expected[(row.user, row.label, row.o)], rel=1e-9, abs=1e-12)
    df.unpersist()


def _pandas(data):
    import pandas as pd

    e, _, _, o, y, _ = data
    return pd.DataFrame({"user": [f"u{v}" for v in e], "label": y, "o": o}).itertuples()


def test_a_warm_start_reaches_the_cold_fits_optimum(spark):
    """Warm-started from a model of part of the rows after two passes (entities it has not seen start at 0), the
    fit reaches the joint optimum a cold fit reaches (``test_coordinate_descent_reaches_the_joint_optimum``);
    started at that optimum, it stops after the pass that finds nothing to change."""
    data = _data("gaussian", seed=11)
    df = _frame(spark, *data)
    _, optimum = _joint("gaussian", *data)
    part = _estimator("gaussian", maxIter=2).fit(df.where(~F.col("user").isin("u0", "u1", "u2")))
    warm = _estimator("gaussian").setInitialModel(part).fit(df)
    assert warm.objectiveHistory[-1] == pytest.approx(optimum, rel=1e-8)
    again = _estimator("gaussian").setInitialModel(warm).fit(df)
    assert len(again.objectiveHistory) == 2
    assert again.objectiveHistory[0] == pytest.approx(warm.objectiveHistory[-1], rel=1e-9)
    with pytest.raises(ValueError, match="initial model has random effects on \\['user'\\]"):
        _estimator("gaussian", entityCols=["region"]).setInitialModel(part).fit(df.withColumn("region", F.lit(1)))
    df.unpersist()


def test_an_entity_unseen_in_training_scores_with_the_fixed_effect_and_the_model_saves_and_loads(
    spark, collected, tmp_path
):
    """An entity the tables lack scores with the fixed effect alone. The model saves in MLlib's layout with each
    table as a Parquet dataset beside it and loads back (Params, uid, every prediction), writing and reading the
    tables on the executors; MLflow's python_function flavor serves it without Spark, with the same predictions;
    damaged tables are refused naming their directory, by both loaders; the estimator saves too."""
    data = _data("poisson", seed=9)
    df = _frame(spark, *data)
    model = _estimator("poisson", maxIter=3).fit(df)
    new = spark.createDataFrame(
        [(Vectors.dense([0.5, -1.0]), Vectors.dense([2.0]), "stranger", 0.1)], ["features", "zf", "user", "o"]
    )
    (row,) = model.transform(new).collect()
    fixed = model.intercept + 0.5 * model.coefficients[0] - model.coefficients[1] + 0.1
    assert row.prediction == pytest.approx(np.exp(fixed), rel=1e-12)

    path = str(tmp_path / "model")
    collected.clear()
    model.save(path)
    loaded = GeneralizedLinearMixedModelModel.load(path)
    assert not collected or max(collected) <= 1  # the metadata and data row: no table passes through the driver
    assert sorted(os.listdir(path)) == ["data", "metadata", "randomEffects"]
    assert loaded.uid == model.uid and loaded.getEntityCols() == ["user"] and loaded.getFamily() == "poisson"
    assert loaded.getOffsetCol() == "o" and loaded.getEntityFeaturesCols() == ["zf"]
    np.testing.assert_array_equal(loaded.coefficients.toArray(), model.coefficients.toArray())
    keyed = df.withColumn("i", F.monotonically_increasing_id()).cache()
    before = {r.i: r.prediction for r in model.transform(keyed).select("i", "prediction").collect()}
    after = {r.i: r.prediction for r in loaded.transform(keyed).select("i", "prediction").collect()}
    assert after == before and len(after) == N
    assert loaded.randomEffects[0].count() == model.randomEffects[0].count() == M

    # serving without Spark: MLflow's python_function flavor looks each row's entity up (the stranger: fixed alone)
    import mlflow.pyfunc

    from sparkml import serving
    from sparkml.mlflow import save_model

    save_model(path, str(tmp_path / "mlflow"))
    served = mlflow.pyfunc.load_model(str(tmp_path / "mlflow"))
    rows = keyed.select("i", "features", "zf", "user", "o").toPandas()
    rows = pd.concat([rows, pd.DataFrame({"i": [-1], "user": ["stranger"], "o": [0.1]})], ignore_index=True)
    rows.at[N, "features"], rows.at[N, "zf"] = [0.5, -1.0], [2.0]
    for column in ("features", "zf"):
        rows[column] = [list(v) for v in rows[column]]
    predicted = served.predict(rows.drop(columns="i"))["prediction"]
    assert dict(zip(rows["i"][:N], predicted[:N])) == pytest.approx(before, rel=1e-12)
    assert predicted[N] == pytest.approx(row.prediction, rel=1e-12)
    with pytest.raises(ValueError, match="lacks this model's columns \\['zf'\\]"):
        serving.load(path).predict_frame(rows.drop(columns="zf"))

    table = spark.read.parquet(f"{path}/randomEffects/0")
    damaged = {
        "short": (table.withColumn("coefficients", F.slice("coefficients", 1, 1)), "not of length 2"),
        "repeated": (table.unionByName(table.limit(1)), "has more than one row"),
        "untyped": (table.withColumn("entity", F.lit(1.5)), "column 'entity' is double"),
    }
    for name, (frame, message) in damaged.items():
        copy = str(tmp_path / name)
        shutil.copytree(path, copy)
        frame.write.mode("overwrite").parquet(f"{copy}/randomEffects/0")
        for load in (GeneralizedLinearMixedModelModel.load, serving.load):  # the same checks with and without Spark
            with pytest.raises(ModelFileError, match=f"{copy}/randomEffects/0: .*{message}"):
                load(copy)
    # the data row must agree with the metadata's random effects: one width per entity column, the right one
    data_row = spark.read.parquet(f"{path}/data")
    for name, widths, message in [
        ("extra_width", [1, 1], "'effectWidths' has 2 values; the model has 1 random effects"),
        ("zero_width", [0], "'effectWidths' gives random effect 0 \\(zf\\) 0 features"),
        ("wrong_width", [3], "randomEffects/0: .*not of length 4"),
    ]:
        copy = str(tmp_path / name)
        shutil.copytree(path, copy)
        changed = data_row.withColumn("effectWidths", F.array(*[F.lit(w) for w in widths]).cast("array<int>"))
        changed.write.mode("overwrite").parquet(f"{copy}/data")
        for load in (GeneralizedLinearMixedModelModel.load, serving.load):
            with pytest.raises(ModelFileError, match=message):
                load(copy)
    shutil.rmtree(f"{path}/randomEffects")
    with pytest.raises(ModelFileError, match="randomEffects/0: cannot read"):
        GeneralizedLinearMixedModelModel.load(path)

    estimator = _estimator("poisson", maxIter=3)
    estimator.save(str(tmp_path / "estimator"))
    again = GeneralizedLinearMixedModel.load(str(tmp_path / "estimator"))
    assert again.uid == estimator.uid and again.extractParamMap() == {
        again.getParam(p.name): v for p, v in estimator.extractParamMap().items()
    }
    keyed.unpersist()
    df.unpersist()


def test_a_fit_that_fails_in_a_pass_resumes_from_its_checkpoint(spark, tmp_path, monkeypatch):
    """With ``checkpointDir``, a fit whose third pass fails leaves the checkpoint of its second (the fixed
    coefficients, the history, the table as Parquet); the same fit resumes after it and takes the passes the
    uninterrupted fit takes (its objective history and model), then removes the checkpoints. Another fit's
    checkpoint is refused before training, naming what differs."""
    from sparkml.glm import mixed

    data = _data("binomial", seed=3)
    df = _frame(spark, *data)
    reference = _estimator("binomial", maxIter=4, tol=0.0).fit(df)
    directory = tmp_path / "checkpoints"
    solves, solve = [], mixed.solve_effect

    def failing(*args, **kwargs):
        solves.append(1)
        if len(solves) == 3:
            raise RuntimeError("executor lost in pass 3")
        return solve(*args, **kwargs)

    monkeypatch.setattr(mixed, "solve_effect", failing)
    estimator = _estimator("binomial", maxIter=4, tol=0.0, checkpointDir=str(directory), checkpointInterval=1)
    with pytest.raises(RuntimeError, match="executor lost in pass 3"):
        estimator.fit(df)
    assert os.listdir(directory) == ["iteration-000002"]
    assert {"state.json", "beta.npy", "randomEffects"} <= set(os.listdir(directory / "iteration-000002"))
    with pytest.raises(ValueError, match="params regParam: checkpoint 0.05, this fit 0.1"):
        estimator.copy({estimator.regParam: 0.1}).fit(df)
    resumed = estimator.fit(df)
    assert len(solves) == 3 + 2  # passes 3 and 4 after the failure, not 1 and 2 again
    np.testing.assert_allclose(resumed.objectiveHistory, reference.objectiveHistory, rtol=1e-10)
    np.testing.assert_allclose(resumed.coefficients.toArray(), reference.coefficients.toArray(), rtol=1e-8)
    assert resumed.intercept == pytest.approx(reference.intercept, rel=1e-8)
    ours = {r.user: r.coefficients.toArray() for r in resumed.randomEffects[0].toLocalIterator()}
    theirs = {r.user: r.coefficients.toArray() for r in reference.randomEffects[0].toLocalIterator()}
    assert ours.keys() == theirs.keys()
    for user, coefficients in theirs.items():
        np.testing.assert_allclose(ours[user], coefficients, rtol=1e-8, atol=1e-12)
    assert not directory.exists()
    df.unpersist()


@pytest.mark.parametrize(
    "change, kwargs, message",
    [
        (
            lambda df: df.withColumn("user", F.when(F.col("label") > 1, None).otherwise(F.col("user"))),
            {},
            "entityCols 'user' has .* null ids",
        ),
        (lambda df: df.withColumn("user", F.lit(1.5)), {}, "entityCols 'user' must be a string or integer column"),
        (lambda df: df, {"entityRegParams": [1.0, 2.0]}, "one entry per random effect"),
        (lambda df: df, {"entityCols": ["region"]}, "entityCols 'region' is not a column"),
        (lambda df: df, {"family": "binomial"}, "binomial family needs labels in \\[0, 1\\]"),
        (lambda df: df, {"entityRegParams": [0.0]}, "entityRegParams"),
        (lambda df: df.limit(0), {}, "no rows"),
        (
            lambda df: df.withColumn("zf", F.when(F.col("label") > 1, None).otherwise(F.col("zf"))),
            {},
            "entityFeaturesCols 'zf' has [0-9]+ null vectors",
        ),
        (
            lambda df: df.withColumn("zf", F.lit(None).cast(VectorUDT())),
            {},
            "entityFeaturesCols 'zf' has 360 null vectors of 360 rows",
        ),
    ],
    ids=[
        "null-ids",
        "double-ids",
        "lengths",
        "missing-column",
        "labels",
        "no-penalty",
        "empty",
        "null-z",
        "all-null-z",
    ],
)
def test_bad_input_is_refused_before_training(spark, change, kwargs, message):
    df = change(_frame(spark, *_data("poisson", seed=2)))
    with pytest.raises(ValueError, match=message):
        _estimator(kwargs.pop("family", "poisson"), **kwargs).fit(df)


def test_a_spark_connect_session_is_refused_before_any_job(spark, monkeypatch):
    import sparkml.glm.mixed as mixed

    df = _frame(spark, *_data("gaussian", seed=2))
    monkeypatch.setattr(mixed, "is_connect", lambda frame: frame is df)
    with pytest.raises(NotImplementedError, match="needs a classic Spark session"):
        _estimator("gaussian").fit(df)
    df.unpersist()


def test_the_declared_families_are_the_solvers():
    from sparkml.gpu.entity_glm import ENTITY_FAMILIES
    from sparkml.params.mixed import CANONICAL_LINKS, MIXED_FAMILIES

    assert MIXED_FAMILIES == ENTITY_FAMILIES == tuple(CANONICAL_LINKS)
