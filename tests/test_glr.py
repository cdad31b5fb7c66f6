"""GeneralizedLinearRegression against pyspark.ml's, fitted side by side on the same rows: every family with
each link MLlib allows (weights, an offset, regParam > 0, no intercept included), the summary's fields, the
output columns, the model files, and MLlib's refusals; Apache Spark's own tests of the class; statsmodels' GLM
as a second reference for the estimates and standard errors."""

import warnings

import numpy as np
import pytest
from pyspark.ml.linalg import Vectors
from pyspark.ml.regression import GeneralizedLinearRegression as MLlibGLR
from pyspark.ml.regression import GeneralizedLinearRegressionModel as StockModel
from support.data_helpers import _schema

from sparkml.glm.irls import ConvergenceWarning
from sparkml.regression import GeneralizedLinearRegression, GeneralizedLinearRegressionModel

N, D = 1500, 3
BETA = np.array([0.3, -0.2, 0.15])


def _labels(family, link, eta, rng):
    """Labels whose mean is g^-1(eta) for the family (eta chosen in the link's domain)."""
    mean = {
        "identity": eta,
        "log": np.exp(eta),
        "inverse": 1.0 / eta,
        "logit": 1.0 / (1.0 + np.exp(-eta)),
        "probit": 0.5 * (1.0 + np.vectorize(__import__("math").erf)(eta / np.sqrt(2.0))),
        "cloglog": 1.0 - np.exp(-np.exp(eta)),
        "sqrt": eta**2,
    }[link]
    if family == "gaussian":
        return mean + 0.1 * rng.normal(size=len(eta))  # the inverse link's labels stay away from 0
    if family == "binomial":
        return (rng.uniform(size=len(eta)) < mean).astype(float)
    if family == "poisson":
        return rng.poisson(mean).astype(float)
    return rng.gamma(4.0, mean / 4.0)  # gamma, tweedie (variancePower >= 1: positive labels are allowed)


# each (family, link) with a linear predictor in the link's domain: (base, scale) of eta = base + scale x.beta + o
_CASES = {
    ("gaussian", "identity"): (1.0, 1.0),
    ("gaussian", "log"): (1.0, 1.0),
    ("gaussian", "inverse"): (2.0, 0.5),
    ("binomial", "logit"): (0.2, 1.0),
    ("binomial", "probit"): (0.1, 0.6),
    ("binomial", "cloglog"): (-0.3, 0.6),
    ("poisson", "log"): (0.5, 1.0),
    ("poisson", "identity"): (3.0, 1.0),
    ("poisson", "sqrt"): (1.8, 0.5),
    ("gamma", "inverse"): (2.0, 0.5),
    ("gamma", "identity"): (3.0, 1.0),
    ("gamma", "log"): (0.5, 1.0),
}


def _frame(spark, family, link, seed=3, offset_scale=0.1):
    base, scale = _CASES[(family, link)]
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, D))
    offset = offset_scale * rng.uniform(-1.0, 1.0, N)
    eta = base + scale * (x @ BETA) + offset
    y = _labels(family, link, eta, rng)
    w = rng.uniform(0.5, 2.0, N)
    rows = [(Vectors.dense(x[i]), float(y[i]), float(offset[i]), float(w[i])) for i in range(N)]
    schema = _schema(("features", "vector"), ("label", "double"), ("offset", "double"), ("w", "double"))
    return spark.createDataFrame(spark.sparkContext.parallelize(rows, 3), schema).cache()


def _estimates(model):
    return np.append(model.coefficients.toArray(), model.intercept)


def _assert_same_fit(ours, theirs, rtol=1e-6):
    np.testing.assert_allclose(_estimates(ours), _estimates(theirs), rtol=rtol, atol=1e-9)
    assert ours.summary.numIterations == theirs.summary.numIterations
    for field in ("coefficientStandardErrors", "tValues", "pValues"):
        np.testing.assert_allclose(
            getattr(ours.summary, field), getattr(theirs.summary, field), rtol=rtol, atol=1e-9, err_msg=field
        )
    for field in ("dispersion", "deviance", "nullDeviance", "aic", "residualDegreeOfFreedom", "rank", "numInstances"):
        if field == "aic" and ours.getFamily() == "tweedie":
            continue  # MLlib has no AIC for tweedie
        assert getattr(ours.summary, field) == pytest.approx(getattr(theirs.summary, field), rel=rtol), field


# make test runs one link of each family and the links whose derivative is not a power (probit, cloglog);
# make test-full every pair
_DEFAULT_RUN = {
    ("gaussian", "inverse"),
    ("binomial", "probit"),
    ("binomial", "cloglog"),
    ("poisson", "sqrt"),
    ("gamma", "identity"),
}


@pytest.mark.parametrize(
    "family,link",
    [pytest.param(*case, marks=() if case in _DEFAULT_RUN else pytest.mark.full) for case in sorted(_CASES)],
    ids=lambda v: str(v),
)
def test_every_family_and_link_fits_mllibs_model(spark, family, link):
    df = _frame(spark, family, link)
    if (family, link) == ("poisson", "sqrt"):
        family, link = "Poisson", "SQRT"  # MLlib reads both in any case
    params = dict(family=family, link=link, weightCol="w", offsetCol="offset", tol=1e-10)
    theirs = MLlibGLR(**params).fit(df)
    ours = GeneralizedLinearRegression(**params).fit(df)
    _assert_same_fit(ours, theirs)
    df.unpersist()


@pytest.mark.parametrize(
    "family,link,extra",
    [
        ("poisson", "log", dict(regParam=0.05)),
        ("binomial", "logit", dict(regParam=0.02, fitIntercept=False)),
        ("gamma", "log", dict(fitIntercept=False)),
        ("gaussian", "identity", dict(regParam=0.1)),
    ],
    ids=["poisson-l2", "binomial-l2-no-intercept", "gamma-no-intercept", "gaussian-l2"],
)
def test_regularized_and_interceptless_fits_are_mllibs(spark, family, link, extra):
    """With regParam > 0 MLlib's model is the fixed point of its IRLS (an L2 term on each weighted least-squares
    step), which this fit reproduces; at MLlib's default tol."""
    df = _frame(spark, family, link, seed=5)
    params = dict(family=family, link=link, weightCol="w", offsetCol="offset", **extra)
    _assert_same_fit(GeneralizedLinearRegression(**params).fit(df), MLlibGLR(**params).fit(df))
    df.unpersist()


@pytest.mark.parametrize(
    "variance_power,link_power",
    [
        (1.5, 0.0),
        (1.2, None),
        pytest.param(2.5, 0.0, marks=pytest.mark.full),
        pytest.param(0.0, 1.0, marks=pytest.mark.full),
    ],
)
def test_tweedie_is_mllibs(spark, variance_power, link_power):
    df = _frame(spark, "gamma", "log", seed=9)
    params = dict(family="tweedie", variancePower=variance_power, weightCol="w", offsetCol="offset")
    if link_power is not None:
        params["linkPower"] = link_power
    _assert_same_fit(GeneralizedLinearRegression(**params).fit(df), MLlibGLR(**params).fit(df))
    df.unpersist()


def test_outputs_and_model_files_are_mllibs(spark, tmp_path):
    df = _frame(spark, "poisson", "log")
    params = dict(family="poisson", offsetCol="offset", linkPredictionCol="eta")
    ours = GeneralizedLinearRegression(**params).fit(df)
    theirs = MLlibGLR(**params).fit(df)
    a = np.array([(r.prediction, r.eta) for r in ours.transform(df).select("prediction", "eta").collect()])
    b = np.array([(r.prediction, r.eta) for r in theirs.transform(df).select("prediction", "eta").collect()])
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)
    x = df.first().features
    assert ours.predict(x) == pytest.approx(theirs.predict(x), rel=1e-6)  # no offset: MLlib's predict
    ours.save(str(tmp_path / "glr"))
    stock = StockModel.load(str(tmp_path / "glr"))
    assert stock.uid == ours.uid and stock.getFamily() == "poisson" and stock.getOffsetCol() == "offset"
    np.testing.assert_allclose(_estimates(stock), _estimates(ours), rtol=0, atol=0)
    loaded = GeneralizedLinearRegressionModel.load(str(tmp_path / "glr"))
    np.testing.assert_allclose(_estimates(loaded), _estimates(ours), rtol=0, atol=0)
    # served without Spark (sparkml.serving, MLflow's python_function flavor): the offset from its column
    import pandas as pd

    from sparkml import serving

    rows = df.select("features", "offset").collect()
    frame = pd.DataFrame({"features": [list(r.features) for r in rows], "offset": [r.offset for r in rows]})
    served = serving.PandasModel(serving.load(str(tmp_path / "glr"))).predict(frame)
    np.testing.assert_allclose(served["prediction"].to_numpy(), a[:, 0], rtol=1e-12)
    with pytest.raises(ValueError, match="offset column 'offset'"):
        serving.PandasModel(serving.load(str(tmp_path / "glr"))).predict(frame[["features"]])
    import mlflow.pyfunc

    from sparkml.mlflow import save_model

    save_model(str(tmp_path / "glr"), str(tmp_path / "mlflow"))  # its signature: features and the offset
    logged = mlflow.pyfunc.load_model(str(tmp_path / "mlflow")).predict(frame)
    np.testing.assert_allclose(logged["prediction"].to_numpy(), a[:, 0], rtol=1e-12)
    estimator = GeneralizedLinearRegression(**params, regParam=0.1, strategy="sync")
    estimator.save(str(tmp_path / "estimator"))
    reloaded = GeneralizedLinearRegression.load(str(tmp_path / "estimator"))
    assert reloaded.uid == estimator.uid and reloaded.extractParamMap() == estimator.extractParamMap()
    evaluated = ours.evaluate(df)
    assert evaluated.deviance == pytest.approx(theirs.evaluate(df).deviance, rel=1e-6)
    df.unpersist()


def test_sparse_features_with_an_offset_fit_as_dense(spark):
    dense = _frame(spark, "poisson", "log", seed=13)
    rows = [
        (Vectors.sparse(D, {j: v for j, v in enumerate(r.features) if j != 1}), r.label, r.offset)
        for r in dense.collect()
    ]
    sparse = spark.createDataFrame(rows, ["features", "label", "offset"])
    dense_rows = [(Vectors.dense(r[0].toArray()), r[1], r[2]) for r in rows]
    dense = spark.createDataFrame(dense_rows, ["features", "label", "offset"])
    params = dict(family="poisson", offsetCol="offset", tol=1e-10)
    np.testing.assert_allclose(
        _estimates(GeneralizedLinearRegression(**params).fit(sparse)),
        _estimates(MLlibGLR(**params).fit(dense)),
        rtol=1e-6,
        atol=1e-9,
    )


def test_irls_halves_steps_that_leave_the_domain_where_mlllib_runs_off(spark):
    """Gamma with the inverse link on log-link data: MLlib's IRLS steps to negative means, runs off to coefficients of
    1e30 and more and returns them without a word. Here such steps are halved (R's glm.fit): the fit converges to the
    maximum likelihood, where the score equations of the canonical link, X~^T (y - mu) = 0, hold (closed form), with
    every mean positive. Poisson with the sqrt link on the same kind of data (MLlib's cycles, its deviance rising
    and falling) lowers its deviance at every step, halving the steps that would raise it, to below MLlib's after
    the same iterations, and warns that it stopped; a fit cut short by maxIter warns; a fit
    that converges does not."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 3))
    y = rng.gamma(2.0, np.exp(x @ [1.0, -0.8, 0.5] + 0.5) / 2.0)
    counts = rng.poisson(np.exp(x @ [1.0, -0.8, 0.5] + 0.5)).astype(float)
    rows = [(Vectors.dense(a), float(b), float(c)) for a, b, c in zip(x, y, counts)]
    schema = _schema(("features", "vector"), ("label", "double"), ("count", "double"))
    df = spark.createDataFrame(rows, schema).cache()
    params = dict(family="gamma", link="inverse", maxIter=25, tol=1e-10)
    theirs = MLlibGLR(**{**params, "maxIter": 10}).fit(df)  # already run off by then
    assert np.abs(_estimates(theirs)).max() > 1e30
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        ours = GeneralizedLinearRegression(**params).fit(df)
    x32 = x.astype(np.float32).astype(np.float64)  # the features as the fit holds them (dtype float32)
    eta = x32 @ ours.coefficients.toArray() + ours.intercept
    assert eta.min() > 0
    score = np.c_[x32, np.ones(len(y))].T @ (y - 1.0 / eta)
    np.testing.assert_allclose(score, 0.0, atol=1e-6)
    assert ours.summary.numIterations < 25

    with pytest.warns(ConvergenceWarning, match="IRLS did not converge in maxIter=2 iterations"):
        GeneralizedLinearRegression(**{**params, "maxIter": 2}).fit(df)

    sqrt = dict(family="poisson", link="sqrt", labelCol="count", maxIter=10)
    theirs = MLlibGLR(**sqrt).fit(df)
    with pytest.warns(ConvergenceWarning, match="IRLS (did not converge in maxIter=10|stopped after)"):
        stalled = GeneralizedLinearRegression(**sqrt).fit(df)
    assert stalled.summary.deviance < theirs.summary.deviance
    df.unpersist()


def test_tweedie_whose_mlllib_iterates_leave_the_numbers_converges(spark):
    """Tweedie with variancePower 3 and linkPower -2 (its canonical link) on gamma-like labels: MLlib's iterates
    leave the domain and the numbers (it fails, or returns NaN coefficients); here the halved steps converge to
    the maximum likelihood, where the canonical score equations X~^T (y - mu) = 0 hold (closed form). A NaN
    linkPower is refused by its rule, before any job."""
    df = _frame(spark, "gamma", "log", seed=4)
    params = dict(family="tweedie", variancePower=3.0, linkPower=-2.0, tol=1e-10)
    try:
        theirs = _estimates(MLlibGLR(**params).fit(df))
    except Exception as error:  # MLlib's own failure (an assertion on the weights) is the point
        theirs = error
    assert isinstance(theirs, Exception) or not np.all(np.isfinite(theirs))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        ours = GeneralizedLinearRegression(**params).fit(df)
    rows = df.select("features", "label").collect()
    x = np.array([r[0].toArray() for r in rows]).astype(np.float32).astype(np.float64)  # as the fit holds them
    y = np.array([r[1] for r in rows])
    eta = x @ ours.coefficients.toArray() + ours.intercept
    assert eta.min() > 0
    score = np.c_[x, np.ones(len(y))].T @ (y - eta**-0.5)
    np.testing.assert_allclose(score, 0.0, atol=1e-6)
    with pytest.raises(ValueError, match="linkPower must be a finite number; got nan"):
        GeneralizedLinearRegression(family="tweedie", variancePower=1.5, linkPower=float("nan")).fit(df)
    df.unpersist()


@pytest.mark.parametrize(
    "params,match",
    [
        (dict(family="poisson", link="logit"), "does not support family 'poisson' with link 'logit'"),
        (dict(family="gamma", link="probit"), "does not support family 'gamma' with link 'probit'"),
        (dict(family="tweedie", link="log"), "takes its link from linkPower"),
        (dict(family="negative-binomial"), "family"),
        (dict(family="tweedie", variancePower=0.5), "variancePower"),
    ],
)
def test_bad_family_and_link_are_refused_before_any_job(spark, params, match):
    df = spark.createDataFrame([(Vectors.dense([1.0]), 1.0)], ["features", "label"])
    with pytest.raises(ValueError, match=match):
        GeneralizedLinearRegression(**params).fit(df)


@pytest.mark.parametrize(
    "family,label,match",
    [("poisson", -1.0, "non-negative labels"), ("gamma", 0.0, "positive labels"), ("binomial", 2.0, r"\[0, 1\]")],
)
def test_labels_outside_the_familys_domain_are_refused(spark, family, label, match):
    df = spark.createDataFrame([(Vectors.dense([1.0]), 1.0), (Vectors.dense([2.0]), label)], ["features", "label"])
    with pytest.raises(ValueError, match=f"labelCol 'label'.*{match}"):
        GeneralizedLinearRegression(family=family).fit(df)


def test_bad_offsets_are_named(spark):
    """Null, NaN and infinite offsets are counted by the conversion and reported on the driver naming offsetCol
    (not as a task's error, nor as the features' NaN values); a string or missing offset column before any job."""
    rows = [(Vectors.dense([1.0]), 1.0, v) for v in (None, float("nan"), float("inf"), -float("inf"), 0.5, 0.1)]
    df = spark.createDataFrame(rows, _schema(("features", "vector"), ("label", "double"), ("exposure", "double")))
    with pytest.raises(ValueError, match=r"^offsetCol 'exposure' has 4 null, NaN or infinite values: offsets must"):
        GeneralizedLinearRegression(family="poisson", offsetCol="exposure").fit(df)
    text = df.withColumn("exposure", df.exposure.cast("string"))
    with pytest.raises(ValueError, match="^offset column 'exposure' must be numeric, got string"):
        GeneralizedLinearRegression(family="poisson", offsetCol="exposure").fit(text)
    with pytest.raises(ValueError, match="^offset column 'nope' is not in the DataFrame"):
        GeneralizedLinearRegression(family="poisson", offsetCol="nope").fit(df)


def test_apache_sparks_doctest_passes_with_the_import_swapped(spark, tmp_path):
    """The examples of pyspark.ml's GeneralizedLinearRegression docstring (Spark's own doctests) with this
    library's classes in its place."""
    import doctest

    import pyspark.ml.regression as stock

    globs = {
        "spark": spark,
        "temp_path": str(tmp_path),
        "GeneralizedLinearRegression": GeneralizedLinearRegression,
        "GeneralizedLinearRegressionModel": GeneralizedLinearRegressionModel,
    }
    test = doctest.DocTestParser().get_doctest(stock.GeneralizedLinearRegression.__doc__, globs, "glr", None, 0)
    assert len(test.examples) >= 25  # pyspark 4.3: 29
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.tries == len(test.examples) and runner.failures == 0


@pytest.mark.compat
def test_apache_sparks_regression_test_passes_with_the_import_swapped(spark, tmp_path):
    """Apache Spark's ``test_generalized_linear_regression`` (python/pyspark/ml/tests/test_regression.py): its
    data, Params and expected numbers, with this library's classes."""
    from pyspark.ml.regression import GeneralizedLinearRegressionSummary, GeneralizedLinearRegressionTrainingSummary

    rows = [(1, 1.0, Vectors.dense(0.0, 0.0)), (2, 1.0, Vectors.dense(1.0, 2.0))]
    rows += [(3, 2.0, Vectors.dense(0.0, 0.0)), (4, 2.0, Vectors.dense(1.0, 1.0))]
    df = spark.createDataFrame(rows, ["index", "label", "features"]).coalesce(1).sortWithinPartitions("index")
    df = df.select("label", "features")
    glr = GeneralizedLinearRegression(family="gaussian", link="identity", linkPredictionCol="p")
    glr.setRegParam(0.1)
    glr.setMaxIter(1)
    assert (glr.getFamily(), glr.getLink(), glr.getLinkPredictionCol()) == ("gaussian", "identity", "p")
    assert (glr.getRegParam(), glr.getMaxIter()) == (0.1, 1)
    model = glr.fit(df)
    assert model.intercept == pytest.approx(1.543859649122807, abs=1e-4)
    np.testing.assert_allclose(model.coefficients.toArray(), [0.43859649, -0.35087719], atol=1e-4)
    assert model.numFeatures == 2
    assert model.predict(Vectors.dense(1.0, 2.0)) == pytest.approx(1.280701754385965, abs=1e-4)
    output = model.transform(df)
    assert output.columns == ["label", "features", "p", "prediction"] and output.count() == 4
    assert model.hasSummary
    summary = model.summary
    assert isinstance(summary, GeneralizedLinearRegressionTrainingSummary)
    assert (summary.numIterations, summary.numInstances, summary.rank) == (1, 4, 3)
    np.testing.assert_allclose(
        summary.tValues, [0.3725037662281711, -0.49418209022924164, 2.6589353685797654], atol=1e-4
    )
    np.testing.assert_allclose(summary.pValues, [0.7729938686180984, 0.707802691825973, 0.22900885781807023], atol=1e-4)
    assert summary.predictions.columns == ["label", "features", "p", "prediction"]
    assert summary.residuals().columns == ["devianceResiduals"] and summary.residuals().count() == 4
    evaluated = model.evaluate(df)
    assert isinstance(evaluated, GeneralizedLinearRegressionSummary)
    assert not isinstance(evaluated, GeneralizedLinearRegressionTrainingSummary)
    assert (evaluated.numInstances, evaluated.rank) == (4, 3)
    glr.write().overwrite().save(str(tmp_path / "glr"))
    assert str(GeneralizedLinearRegression.load(str(tmp_path / "glr"))) == str(glr)
    model.write().overwrite().save(str(tmp_path / "glr"))
    assert str(GeneralizedLinearRegressionModel.load(str(tmp_path / "glr"))) == str(model)


@pytest.fixture(scope="module")
def weighted_fits(spark):
    """(family, link) -> (frame, this library's fit on it with weights and an offset at tol 1e-10), once per module:
    the statsmodels comparison and the summary built without MLlib's class read the same fit."""
    cache = {}

    def get(family, link):
        if (family, link) not in cache:
            df = _frame(spark, family, link, seed=21)
            params = dict(family=family, link=link, weightCol="w", offsetCol="offset", tol=1e-10)
            cache[family, link] = df, GeneralizedLinearRegression(**params).fit(df)
        return cache[family, link]

    yield get
    for df, _ in cache.values():
        df.unpersist()


@pytest.mark.parametrize("family,link", [("poisson", "log"), ("gamma", "log")])
def test_estimates_and_standard_errors_are_statsmodels(weighted_fits, family, link):
    """statsmodels' GLM (prior weights as var_weights, the offset, Pearson's dispersion for gamma) on the same rows:
    a second, independent reference for the estimates and their standard errors."""
    sm = pytest.importorskip("statsmodels.api")
    df, ours = weighted_fits(family, link)
    rows = df.collect()
    x = np.array([r.features.toArray() for r in rows])
    design = np.column_stack([x, np.ones(len(rows))])  # the intercept last, as MLlib's summary lists it
    families = {"poisson": sm.families.Poisson(), "gamma": sm.families.Gamma(sm.families.links.Log())}
    reference = sm.GLM(
        np.array([r.label for r in rows]),
        design,
        family=families[family],
        offset=np.array([r.offset for r in rows]),
        var_weights=np.array([r.w for r in rows]),
    ).fit(tol=1e-12, scale=None if family == "poisson" else "X2")
    np.testing.assert_allclose(_estimates(ours), reference.params, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(ours.summary.coefficientStandardErrors, reference.bse, rtol=1e-5)
    assert ours.summary.dispersion == pytest.approx(reference.scale, rel=1e-6)


@pytest.mark.parametrize("family,link", [("poisson", "log"), ("gamma", "log")])
def test_the_summary_built_without_mllibs_training_summary_class_is_mllibs(weighted_fits, family, link):
    """Where the JVM's GeneralizedLinearRegressionTrainingSummary cannot be built (Spark Connect), the summary is
    MLlib's evaluation plus this fit's standard errors: the same numbers as MLlib's training summary, here both
    in one classic session (normal p-values for poisson, Student's t for gamma)."""
    from pyspark.ml.regression import GeneralizedLinearRegressionTrainingSummary as Stock

    df, model = weighted_fits(family, link)
    jvm = model.summary
    built = model._summary_from_evaluation(model._summaries[0], df)
    assert isinstance(built, Stock)
    assert (built.numIterations, built.solver) == (jvm.numIterations, jvm.solver) and built.numIterations > 1
    for name in ("coefficientStandardErrors", "tValues", "pValues"):
        np.testing.assert_allclose(getattr(built, name), getattr(jvm, name), rtol=1e-9, atol=1e-15, err_msg=name)
    for name in ("dispersion", "deviance", "nullDeviance", "aic", "residualDegreeOfFreedom", "rank"):
        assert getattr(built, name) == pytest.approx(getattr(jvm, name), rel=1e-12), name
