"""The estimator base (``sparkml.base.estimator.TorchEstimator``) driven by a dummy estimator: a
ridge-free least-squares fit that supplies only its ``_train``. The base must check the Params
before touching data, convert the data once, build the strategy its Params name, report every
optimizer iteration to the fit's callbacks, and release the blocks when training fails."""

import numpy as np
import pytest
from pyspark.ml import PredictionModel, Predictor
from pyspark.ml.param.shared import HasAggregationDepth, HasFitIntercept, HasMaxIter, HasTol, HasWeightCol
from support.helpers import executor_datasets

from sparkml.base.estimator import TorchEstimator
from sparkml.base.model import KeepsTrainingSummary
from sparkml.base.params import HasTorchTrainingParams
from sparkml.data import background_release
from sparkml.data.training_data import TrainingData
from sparkml.gpu import SquaredLoss
from sparkml.optim.linear_objective import LinearObjective

pytestmark = pytest.mark.usefixtures("conversions_not_kept")  # counts conversions or blocks


class _DummyParams(HasMaxIter, HasTol, HasFitIntercept, HasWeightCol, HasAggregationDepth, HasTorchTrainingParams):
    def __init__(self, *args):
        super().__init__(*args)
        self._setDefault(maxIter=100, tol=1e-12, fitIntercept=True, aggregationDepth=2)


class DummyModel(PredictionModel, _DummyParams, KeepsTrainingSummary):
    def __init__(self, theta=None):
        super().__init__()
        self.theta = theta

    @property
    def numFeatures(self):
        return len(self.theta) - 1

    def predict(self, value):
        return float(np.dot(self.theta[:-1], value.toArray()) + self.theta[-1])

    def _transform(self, dataset):
        raise NotImplementedError("the dummy model is only compared by its coefficients")


class DummyLeastSquares(TorchEstimator, Predictor, _DummyParams):
    """min (1/2W) sum w_i (x_i.beta + b - y_i)^2 in the original space, no penalty."""

    fail_in_train = False

    def __init__(self, **params):
        super().__init__()
        self._set(**params)
        self.strategies = []

    def _train(self, data, last_pass):
        s = data.summary
        strategy = self._make_strategy(data, SquaredLoss(fit_intercept=True))
        self.strategies.append((strategy.name, strategy.row.transport, strategy.row.solver))
        if self.fail_in_train:
            raise RuntimeError("training failed")
        objective = LinearObjective(  # no data sum: the strategy's solver plugs in its transport's
            n_features=s.n_features,
            n_outputs=1,
            fit_intercept=True,
            mean=np.zeros(s.n_features),
            std=np.ones(s.n_features),
            weight_sum=s.weight_sum,
            reg_l2=0.0,
            reg_l1=0.0,
            standardization=False,
        )
        theta, summary = strategy.minimize(
            objective,
            np.zeros(objective.size),
            max_iter=self.getMaxIter(),
            tol=self.getTol(),
            name="Dummy",
            last_pass=last_pass,
            progress=self._progress(),
        )
        beta, b = objective.to_original(theta)
        return self._fitted(DummyModel(np.append(beta[0], b[0])), [summary], data.source)


@pytest.fixture(scope="module")
def data(spark):
    from support.data_helpers import linear_frame

    df = linear_frame(spark, n=400, d=3, partitions=4, seed=11)
    df.count()
    rows = df.select("features", "y").collect()
    x = np.array([r.features.toArray() for r in rows])
    y = np.array([r.y for r in rows])
    exact = np.linalg.lstsq(np.hstack([x, np.ones((len(x), 1))]), y, rcond=None)[0]
    yield df.withColumnRenamed("label", "binary").withColumnRenamed("y", "label"), exact
    df.unpersist()


@pytest.fixture
def prepares(monkeypatch):
    """One entry per ``TrainingData.prepare`` call (a conversion job) and per ``release``."""
    calls = {"prepare": 0, "release": 0}
    prepare, release = TrainingData.prepare.__func__, TrainingData.release

    def counting_prepare(cls, *args, **kwargs):
        calls["prepare"] += 1
        return prepare(cls, *args, **kwargs)

    def counting_release(self, *args, **kwargs):
        calls["release"] += 1
        return release(self, *args, **kwargs)

    monkeypatch.setattr(TrainingData, "prepare", classmethod(counting_prepare))
    monkeypatch.setattr(TrainingData, "release", counting_release)
    return calls


@pytest.mark.parametrize("strategy", ["sync", "averaging"])
def test_one_conversion_the_named_strategy_and_a_callback_per_iteration(data, prepares, strategy):
    df, exact = data
    est = DummyLeastSquares(strategy=strategy, dtype="float64", maxIter=50, localIter=5)
    events = []
    model = est._add_iteration_callback(events.append).fit(df)
    background_release.wait()  # the blocks are deleted after the fit returns
    assert prepares == {"prepare": 1, "release": 1}
    pairs = {"sync": ("sync", "jobs", "quasi-newton"), "averaging": ("averaging", "jobs", "dane")}
    assert est.strategies == [pairs[strategy]]
    np.testing.assert_allclose(model.theta, exact, rtol=0, atol=1e-6)
    summary = model.summary
    assert [e.iteration for e in events] == list(range(1, summary.totalIterations + 1))
    assert summary.totalIterations >= 2
    assert [e.objective for e in events] == summary.objectiveHistory[1:]
    assert {e.name for e in events} == {"Dummy"} and all(e.seconds >= 0 for e in events)
    # the last iterate reported is the model's (original space == the optimizer's here: no scaling)
    np.testing.assert_allclose(events[-1].x, model.theta, rtol=0, atol=1e-12)


def test_allreduce_reaches_the_same_model(data, prepares):
    df, exact = data
    est = DummyLeastSquares(strategy="allreduce", dtype="float64", maxIter=50)
    model = est.fit(df)
    background_release.wait()
    assert est.strategies == [("allreduce", "barrier", "quasi-newton")] and prepares == {"prepare": 1, "release": 1}
    np.testing.assert_allclose(model.theta, exact, rtol=0, atol=1e-6)


def test_params_are_checked_before_any_data_is_touched(data, prepares):
    df, _ = data
    with pytest.raises(ValueError, match="maxIter must be >= 0; got -1"):
        DummyLeastSquares(maxIter=-1).fit(df)
    with pytest.raises(ValueError, match="localIter must be >= 1; got 0"):
        DummyLeastSquares(strategy="averaging", localIter=0).fit(df)
    assert prepares == {"prepare": 0, "release": 0}


def test_blocks_are_released_when_training_fails(spark, data, prepares):
    df, _ = data
    before = executor_datasets(spark)
    est = DummyLeastSquares(strategy="sync")
    est.fail_in_train = True
    with pytest.raises(RuntimeError, match="training failed"):
        est.fit(df)
    assert prepares == {"prepare": 1, "release": 1}
    assert executor_datasets(spark) == before


def test_fit_multiple_converts_once_for_the_grid(data, prepares):
    df, exact = data
    est = DummyLeastSquares(strategy="sync", dtype="float64")
    maps = [{est.maxIter: 1}, {est.maxIter: 3}, {est.maxIter: 50}]
    models = dict(est.fitMultiple(df, maps))
    assert prepares == {"prepare": 1, "release": 1}
    assert [models[i].summary.totalIterations for i in range(3)][:2] == [1, 3]
    np.testing.assert_allclose(models[2].theta, exact, rtol=0, atol=1e-6)
