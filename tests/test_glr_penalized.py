"""GeneralizedLinearRegression beyond MLlib: the elastic net (``elasticNetParam``) and more features than MLlib's
IRLS takes, fitted by L-BFGS / OWL-QN on the penalized mean deviance. Against glum (the same objective: its
``alpha`` is regParam, its ``l1_ratio`` elasticNetParam), against the maximum likelihood estimate at regParam 0
(statsmodels' GLM on the same rows: the model of this library's and MLlib's IRLS, ``tests/test_glr.py``), and the
files stock MLlib loads."""

import numpy as np
import pytest
import scipy.sparse as sp
from pyspark.ml.linalg import Vectors
from pyspark.ml.regression import GeneralizedLinearRegression as MLlibGLR
from pyspark.ml.regression import GeneralizedLinearRegressionModel as StockModel

from sparkml.glm import estimator as glr_estimator
from sparkml.regression import GeneralizedLinearRegression, GeneralizedLinearRegressionModel

N, D = 2000, 6
BETA = np.array([0.4, -0.3, 0.0, 0.2, 0.0, -0.1])


def _problem(family, seed=2):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, D)) * [1.0, 0.5, 2.0, 1.0, 1.0, 3.0]
    offset = np.log(rng.uniform(0.5, 2.0, N))  # log exposure
    w = rng.uniform(0.5, 2.0, N)
    mu = np.exp(0.3 + x @ BETA / 2 + offset)
    if family == "poisson":
        y = rng.poisson(mu).astype(float)
    elif family == "gamma":
        y = rng.gamma(3.0, mu / 3.0)
    else:  # tweedie 1.5: compound Poisson-gamma, zeros included
        counts = rng.poisson(mu**0.5 / 0.5)
        y = np.array([rng.gamma(2.0, m**0.5 / 2.0, c).sum() if c else 0.0 for c, m in zip(counts, mu)])
    return x, y, w, offset


def _frame(spark, x, y, w, offset):
    rows = [(Vectors.dense(x[i]), float(y[i]), float(w[i]), float(offset[i])) for i in range(len(y))]
    return spark.createDataFrame(rows, ["features", "label", "w", "offset"])


def _glum():
    """glum, a test dependency (the compatibility runs on older Spark lines go without it)."""
    return pytest.importorskip("glum")


def _glum_family(family):
    return _glum().TweedieDistribution(1.5) if family == "tweedie" else family


def _estimator(family, **kwargs):
    extra = {"variancePower": 1.5, "linkPower": 0.0} if family == "tweedie" else {"family": family, "link": "log"}
    if family == "tweedie":
        extra["family"] = "tweedie"
    return GeneralizedLinearRegression(weightCol="w", offsetCol="offset", **extra, **kwargs)


def _objective(family, x, y, w, offset, beta, b, lam, alpha):
    """The penalized mean deviance (``sparkml.glm.penalized``), in numpy."""
    mu = np.exp(x @ beta + b + offset)
    if family == "poisson":
        d = 2 * (np.where(y > 0, y * np.log(np.where(y > 0, y, 1) / mu), 0) - (y - mu))
    elif family == "gamma":
        d = -2 * (np.log(y / mu) - (y - mu) / mu)
    else:
        p = 1.5
        d = 2 * (
            y * (np.maximum(y, 0.1) ** (1 - p) - mu ** (1 - p)) / (1 - p) - (y ** (2 - p) - mu ** (2 - p)) / (2 - p)
        )
    return (w * d).sum() / (2 * w.sum()) + lam * (alpha * np.abs(beta).sum() + (1 - alpha) / 2 * beta @ beta)


@pytest.mark.parametrize(
    "family, lam, alpha",
    [("poisson", 0.02, 1.0), ("poisson", 0.01, 0.5), ("gamma", 0.01, 0.7), ("tweedie", 0.005, 1.0)],
)
def test_elastic_net_reaches_glums_minimum(spark, family, lam, alpha):
    x, y, w, offset = _problem(family)
    model = _estimator(family, regParam=lam, elasticNetParam=alpha, tol=1e-12, maxIter=500).fit(
        _frame(spark, x, y, w, offset)
    )
    reference = (
        _glum()
        .GeneralizedLinearRegressor(
            family=_glum_family(family), link="log", alpha=lam, l1_ratio=alpha, gradient_tol=1e-12, max_iter=1000
        )
        .fit(x, y, sample_weight=w, offset=offset)
    )
    ours = _objective(family, x, y, w, offset, model.coefficients.toArray(), model.intercept, lam, alpha)
    theirs = _objective(family, x, y, w, offset, reference.coef_, reference.intercept_, lam, alpha)
    assert ours <= theirs * (1 + 1e-6)
    np.testing.assert_allclose(model.coefficients.toArray(), reference.coef_, atol=2e-4)
    assert model.intercept == pytest.approx(reference.intercept_, abs=2e-4)
    zeros = np.abs(reference.coef_) < 1e-10
    if alpha > 0 and zeros.any():  # OWL-QN's exact zeros where glum's coordinate descent has them
        assert np.all(model.coefficients.toArray()[zeros] == 0.0)


@pytest.mark.parametrize("family", ["poisson", "gamma", "tweedie"])
def test_quasi_newton_finds_irls_maximum_likelihood(spark, family, monkeypatch):
    """regParam 0: the penalized deviance's minimum is the MLE, the model of MLlib's IRLS: here statsmodels' IRLS on
    the same rows (prior weights as var_weights, the offset), which ``tests/test_glr.py`` holds this library's
    and MLlib's IRLS to (a fit of this library's IRLS is a Spark job per iteration and its summary's)."""
    sm = pytest.importorskip("statsmodels.api")
    x, y, w, offset = _problem(family)
    log = sm.families.links.Log()
    families = {
        "poisson": sm.families.Poisson(log),
        "gamma": sm.families.Gamma(log),
        "tweedie": sm.families.Tweedie(var_power=1.5, link=log),
    }
    design = np.column_stack([x, np.ones(len(y))])  # the intercept last
    mle = sm.GLM(y, design, family=families[family], offset=offset, var_weights=w).fit(tol=1e-12, maxiter=1000)
    assert mle.converged
    monkeypatch.setattr(glr_estimator, "IRLS_MAX_FEATURES", 0)
    quasi = _estimator(family, tol=1e-12, maxIter=500).fit(_frame(spark, x, y, w, offset))
    np.testing.assert_allclose(quasi.coefficients.toArray(), mle.params[:-1], rtol=1e-5, atol=1e-7)
    assert quasi.intercept == pytest.approx(mle.params[-1], rel=1e-5)
    with pytest.raises(Exception, match="No Std. Error"):  # MLlib's answer for a fit without IRLS's matrix
        quasi.summary.coefficientStandardErrors


def test_wider_than_mllib_sparse(spark):
    """5,000 hashed sparse features: MLlib's IRLS refuses more than 4,096; this fit reaches glum's objective."""
    rng = np.random.default_rng(5)
    n, d, nnz = 3000, 5000, 8
    cols = rng.integers(0, d, size=(n, nnz))
    vals = rng.normal(size=(n, nnz))
    x = sp.csr_matrix((vals.ravel(), cols.ravel(), np.arange(0, n * nnz + 1, nnz)), shape=(n, d))
    x.sum_duplicates()
    beta = np.zeros(d)
    beta[:50] = rng.normal(scale=0.3, size=50)
    y = rng.poisson(np.exp(0.2 + x @ beta)).astype(float)
    rows = [
        (
            Vectors.sparse(d, x.indices[x.indptr[i] : x.indptr[i + 1]], x.data[x.indptr[i] : x.indptr[i + 1]]),
            float(y[i]),
        )
        for i in range(n)
    ]
    df = spark.createDataFrame(rows, ["features", "label"])
    with pytest.raises(Exception, match="4096"):
        MLlibGLR(family="poisson", regParam=0.01).fit(df)
    lam, alpha = 0.01, 0.5
    model = GeneralizedLinearRegression(family="poisson", regParam=lam, elasticNetParam=alpha, tol=1e-12, maxIter=500)
    fitted = model.fit(df)
    reference = (
        _glum()
        .GeneralizedLinearRegressor(family="poisson", alpha=lam, l1_ratio=alpha, gradient_tol=1e-12, max_iter=1000)
        .fit(x, y)
    )
    zero = np.zeros(n)
    ours = _objective("poisson", x, y, np.ones(n), zero, fitted.coefficients.toArray(), fitted.intercept, lam, alpha)
    theirs = _objective("poisson", x, y, np.ones(n), zero, reference.coef_, reference.intercept_, lam, alpha)
    assert ours <= theirs * (1 + 1e-6)


@pytest.mark.compat
def test_elastic_net_param_is_saved_beside_mllibs(spark, tmp_path):
    x, y, w, offset = _problem("poisson")
    df = _frame(spark, x, y, w, offset)
    model = _estimator("poisson", regParam=0.02, elasticNetParam=1.0).fit(df)
    assert model.getElasticNetParam() == 1.0
    path = str(tmp_path / "model")
    model.save(path)
    stock = StockModel.load(path)
    np.testing.assert_array_equal(stock.coefficients.toArray(), model.coefficients.toArray())
    loaded = GeneralizedLinearRegressionModel.load(path)
    assert loaded.getElasticNetParam() == 1.0
    expected = np.array([r.prediction for r in model.transform(df).select("prediction").collect()])
    np.testing.assert_allclose([r.prediction for r in stock.transform(df).select("prediction").collect()], expected)
    # served without Spark, the offset read from its column
    import pandas as pd

    from sparkml import serving

    frame = pd.DataFrame({"features": list(x), "offset": offset})
    served = serving.PandasModel(serving.load(path)).predict(frame)
    np.testing.assert_allclose(served["prediction"].to_numpy(), expected, rtol=1e-12)


def test_elastic_net_param_out_of_range_is_refused():
    with pytest.raises(ValueError, match="elasticNetParam"):
        GeneralizedLinearRegression(elasticNetParam=1.5)._check_params()


@pytest.mark.parametrize(
    "solver, extra",
    [
        ("irls", dict(regParam=0.01, tol=0.0, maxIter=8)),
        # the linear estimators' checkpoint path, tested with them in test_checkpoint.py
        pytest.param("owlqn", dict(regParam=0.01, elasticNetParam=0.5, maxIter=8), marks=pytest.mark.full),
    ],
)
def test_a_fit_resumed_from_a_checkpoint_ends_at_the_uninterrupted_model(spark, tmp_path, solver, extra):
    """MLlib's IRLS and the penalized fits (OWL-QN here) checkpoint every checkpointInterval iterations; a fit
    that finds the checkpoint a killed fit left resumes from it and ends at the uninterrupted fit's model."""
    import os
    import shutil

    df = _frame(spark, *_problem("poisson"))
    directory, copy = str(tmp_path / "checkpoints"), str(tmp_path / "copy")

    def make():
        return _estimator("poisson", checkpointDir=directory, checkpointInterval=2, **extra)

    def keep(event):  # what a fit killed in its iteration 5 leaves behind
        if event.iteration == 5:
            shutil.copytree(directory, copy)

    reference = make()._add_iteration_callback(keep).fit(df)
    assert not os.path.exists(directory)  # removed once the fit succeeded
    assert os.listdir(copy) == ["iteration-000004"] and reference.summary.numIterations > 5
    os.rename(copy, directory)
    seen = []
    resumed = make()._add_iteration_callback(lambda event: seen.append(event.iteration)).fit(df)
    assert seen[0] == 5  # iterations 1 to 4 came from the checkpoint
    np.testing.assert_allclose(resumed.coefficients.toArray(), reference.coefficients.toArray(), rtol=0, atol=1e-12)
    assert resumed.intercept == pytest.approx(reference.intercept, abs=1e-12)
    assert resumed.summary.numIterations == reference.summary.numIterations
    assert not os.path.exists(directory)
    if solver == "irls":  # the standard errors of the last weighted least-squares solve, as uninterrupted
        np.testing.assert_allclose(
            resumed.summary.coefficientStandardErrors, reference.summary.coefficientStandardErrors, rtol=1e-12
        )


def test_a_checkpoint_of_other_coefficients_is_refused(tmp_path):
    """A checkpoint whose coefficients do not fit the data (a damaged or foreign file) is refused by name, before
    any pass."""
    from sparkml.glm.irls import irls
    from sparkml.optim.checkpoint import Checkpoint

    checkpoint = Checkpoint(str(tmp_path / "ck"), 1, {"estimator": "x"}, "GeneralizedLinearRegression")
    checkpoint.resume = {"beta": np.zeros(3), "intercept": 0.0, "iteration": 2, "history": [1.0, 0.5]}

    def no_pass(coef, initial):
        raise AssertionError("a pass ran")

    with pytest.raises(ValueError, match=r"holds 3 coefficients, this fit has 5 features"):
        irls(
            no_pass,
            5,
            False,
            fit_intercept=True,
            reg_param=0.0,
            max_iter=10,
            tol=1e-6,
            identity_gaussian=False,
            checkpoint=checkpoint,
        )
