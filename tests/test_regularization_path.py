"""``fitMultiple`` solves the maps that differ only in the penalty and the stopping rule in one strategy run
(``sparkml.base.regularization_path``): side by side for one output (each model its cold ``fit``'s run, iteration for
iteration), on a warm-started regularization path for the multinomial model (each model a cold ``fit``'s
objective, measured on MLlib's objective written out here in numpy); one conversion and one strategy run (one
barrier stage with ``allreduce``) per group; each model keeps its own Params and training summary."""

import numpy as np
import pytest
from pyspark.ml.evaluation import BinaryClassificationEvaluator
from pyspark.ml.linalg import Vectors
from pyspark.ml.tuning import CrossValidator, ParamGridBuilder
from scipy.special import logsumexp
from support.helpers import coefficient_vector

from sparkml.base.regularization_path import path_steps
from sparkml.classification import LinearSVC, LogisticRegression
from sparkml.data import conversion_plan
from sparkml.data.training_data import TrainingData
from sparkml.optim import minimize_lbfgs
from sparkml.regression import LinearRegression
from sparkml.strategies import barrier_transport
from sparkml.strategies.composed import ComposedStrategy

pytestmark = pytest.mark.usefixtures("conversions_not_kept")  # counts conversions or blocks

N = 800


@pytest.fixture(scope="module")
def frame(spark):
    """(DataFrame, numpy columns): 4 features of different scales (two correlated), a binary label, a
    3-class label and a real target, 4 partitions, cached."""
    rng = np.random.default_rng(21)
    x = rng.normal(size=(N, 4)) * [1.0, 3.0, 0.5, 2.0] + [0.0, 1.0, -1.0, 0.5]
    x[:, 3] = 1.5 * x[:, 0] + rng.normal(scale=0.8, size=N)
    m = x @ [0.8, -0.3, 1.5, 0.1] - 0.1
    x = x.astype(np.float32).astype(np.float64)  # the fits store float32: the same numbers as here
    columns = {
        "x": x,
        "label": (m + rng.logistic(size=N) > 0).astype(float),
        "label3": np.digitize(m + rng.normal(scale=0.7, size=N), [-1.0, 1.0]).astype(float),
        "y": (m + rng.normal(scale=0.5, size=N)).astype(np.float32).astype(np.float64),
    }
    rows = [
        (Vectors.dense(x[i]), float(columns["label"][i]), float(columns["label3"][i]), float(columns["y"][i]))
        for i in range(N)
    ]
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 4), ["features", "label", "label3", "y"]).cache()
    df.count()
    yield df, columns
    df.unpersist()


@pytest.fixture
def conversions(monkeypatch):
    """The arguments of every ``TrainingData.prepare`` call (each is one conversion job)."""
    calls = []
    original = TrainingData.prepare.__func__

    def prepare(cls, df, *args, **kwargs):
        calls.append(kwargs)
        return original(cls, df, *args, **kwargs)

    monkeypatch.setattr(TrainingData, "prepare", classmethod(prepare))
    return calls


@pytest.fixture
def stages(monkeypatch):
    """One entry per barrier stage run."""
    calls = []
    original = barrier_transport.run_barrier_stage

    def run(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(barrier_transport, "run_barrier_stage", run)
    return calls


def mllib_objective(model, columns, kind):
    """MLlib's objective at the model's coefficients, in the user's space (``optim.linear_objective``'s docstring):
    the mean loss / sigma_y^2 + lambda (1 - a) / (2 sigma_y) sum (s_j beta_j / sigma_y)^2
    + lambda a / sigma_y sum |s_j beta_j| / sigma_y, s_j the feature's (unbiased) std with standardization,
    sigma_y the label's (LinearRegression; 1 otherwise)."""
    x = columns["x"]
    lam = model.getRegParam()
    a = model.getElasticNetParam() if model.hasParam("elasticNetParam") else 0.0
    s = x.std(axis=0, ddof=1) if model.getStandardization() else np.ones(x.shape[1])
    if hasattr(model, "coefficientMatrix"):
        beta, b = model.coefficientMatrix.toArray(), model.interceptVector.toArray()
    else:
        beta, b = model.coefficients.toArray()[None, :], np.array([model.intercept])
    margins = x @ beta.T + b
    scale = 1.0
    if kind == "linreg":
        y = columns["y"]
        scale = y.std(ddof=1)
        loss = 0.5 * (margins[:, 0] - y) ** 2
    elif kind == "svc":
        loss = np.maximum(0.0, 1.0 - (2 * columns["label"] - 1) * margins[:, 0])
    elif kind == "binomial":
        loss = np.logaddexp(0.0, margins[:, 0]) - columns["label"] * margins[:, 0]
    else:
        y = columns["label3"].astype(int)
        loss = logsumexp(margins, axis=1) - margins[np.arange(len(y)), y]
    scaled = beta * s / scale
    return (
        loss.mean() / scale**2
        + lam * (1 - a) / (2 * scale) * np.sum(scaled**2)
        + lam * a / scale * np.sum(np.abs(scaled))
    )


REGS = [0.2, 0.02, 0.002]
# REGS' ends: the grids whose maps are each solved from its own fit's start (one output, side by side; the normal
# equations) or searched; the multinomial model's warm-started path takes every step of REGS
SIDE_BY_SIDE_REGS = REGS[::2]
CASES = {  # kind -> (estimator with the Params, does elasticNetParam apply)
    "binomial": (lambda **kw: LogisticRegression(**kw), True),
    "multinomial": (lambda **kw: LogisticRegression(labelCol="label3", **kw), True),
    "svc": (lambda **kw: LinearSVC(**kw), False),
    "linreg": (lambda **kw: LinearRegression(labelCol="y", solver="l-bfgs", **kw), True),
}


def grid(estimator, elastic_net, regs=REGS):
    builder = ParamGridBuilder().addGrid(estimator.regParam, regs)
    if elastic_net:
        builder = builder.addGrid(estimator.elasticNetParam, [0.0, 0.5])
    return builder.build()


def cold_fits(estimator, df, maps):
    return [estimator.copy(m).fit(df) for m in maps]


# LinearSVC: MLlib's OWL-QN on the hinge (not smooth) stalls within about 1e-5 (relative) of the optimum, at a
# point that depends on where it started, whatever tol: its cold fits at tol 1e-10 and 1e-6 differ by that much
SVC_OBJECTIVE_RTOL = 5e-5


@pytest.mark.parametrize(
    "kind, strategies",
    [
        ("binomial", ("allreduce", "sync")),
        ("multinomial", ("allreduce",)),
        ("svc", ("allreduce",)),
        ("linreg", ("allreduce",)),
    ],
)
def test_each_path_model_is_its_cold_fit(frame, conversions, stages, kind, strategies):
    """At tol 1e-10 every map's path model has a cold fit's objective to 1e-9 (relative; LinearSVC at its
    default tol to ``SVC_OBJECTIVE_RTOL``); each keeps its own Params, uid and summary, whose history starts
    at the objective of the start the path gave it."""
    df, columns = frame
    make, elastic_net = CASES[kind]
    rtol = SVC_OBJECTIVE_RTOL if kind == "svc" else 1e-9
    tight = make(strategy="allreduce") if kind == "svc" else make(tol=1e-10, maxIter=400, strategy="allreduce")
    maps = grid(tight, elastic_net, REGS if kind == "multinomial" else SIDE_BY_SIDE_REGS)
    cold = cold_fits(tight, df, maps)
    objective = [mllib_objective(model, columns, kind) for model in cold]
    for strategy in strategies:
        estimator = tight.copy({tight.strategy: strategy})
        conversions.clear()
        stages.clear()
        path = dict(estimator.fitMultiple(df, maps))
        assert len(conversions) == 1
        assert len(stages) == (1 if strategy == "allreduce" else 0)  # the whole grid in one barrier stage
        for index, m in enumerate(maps):
            model = path[index]
            assert model.uid == estimator.uid
            for param, value in m.items():
                assert model.getOrDefault(param.name) == value
            value = mllib_objective(model, columns, kind)
            assert abs(value - objective[index]) <= rtol * abs(objective[index]), (strategy, m, value, objective[index])
            if kind != "svc":
                np.testing.assert_allclose(
                    coefficient_vector(model), coefficient_vector(cold[index]), rtol=1e-4, atol=1e-5, err_msg=str(m)
                )
        if kind != "multinomial":  # one output: the maps run side by side, each its cold fit's run exactly
            for index, m in enumerate(maps):
                history, cold_history = path[index].summary.objectiveHistory, cold[index].summary.objectiveHistory
                np.testing.assert_allclose(history, cold_history, rtol=1e-9, err_msg=str(m))
                np.testing.assert_allclose(
                    coefficient_vector(path[index]), coefficient_vector(cold[index]), rtol=1e-8, atol=1e-10
                )
            continue
        # each history starts where its solve started: fit's start, or the solution it follows on the path
        order = path_steps([estimator.copy(m) for m in maps])
        for step, ((index,), starts) in enumerate(order):
            history = path[index].summary.objectiveHistory
            assert path[index].summary.totalIterations == len(history) - 1
            at_start = {None: cold[index].summary.objectiveHistory[0]}
            for s in starts:
                if s is not None:
                    previous = path[order[s][0][0]].copy(maps[index])  # the earlier solution, this map's penalty
                    at_start[s] = mllib_objective(previous, columns, kind)
            assert history[0] == pytest.approx(min(at_start[s] for s in starts), rel=1e-9), (step, starts, at_start)
            if starts != (None,) and min(at_start.values()) < at_start[None]:
                assert history[0] < cold[index].summary.objectiveHistory[0]


@pytest.mark.parametrize(
    "kind, strategy", [("binomial", "allreduce"), ("multinomial", "allreduce"), ("linreg", "allreduce")]
)
def test_at_default_tol_a_path_model_is_no_worse_than_a_cold_fit(frame, kind, strategy):
    """Breeze's stopping rule from a warm start (at least one step, ``optim.minimize.run_optimizer``): no
    worse than the cold fit, to 1e-9 (LinearSVC, at its default tol in the test above, stalls on the hinge's
    kinks wherever it starts)."""
    df, columns = frame
    make, elastic_net = CASES[kind]
    estimator = make(strategy=strategy)
    maps = grid(estimator, elastic_net, REGS if kind == "multinomial" else SIDE_BY_SIDE_REGS)
    path = dict(estimator.fitMultiple(df, maps))
    cold = cold_fits(estimator.copy({estimator.strategy: "allreduce"}), df, maps)
    for index, m in enumerate(maps):
        ours, theirs = mllib_objective(path[index], columns, kind), mllib_objective(cold[index], columns, kind)
        assert ours <= theirs * (1 + 1e-9), (m, ours, theirs)


@pytest.mark.parametrize("strategy", ["allreduce", "sync"])
@pytest.mark.parametrize("gram_max", [None, 0], ids=["gram-in-conversion", "gram-pass"])
def test_the_normal_equations_solve_the_grid_from_one_gram(frame, conversions, stages, monkeypatch, strategy, gram_max):
    """The grid's normal equations share one Gram: the conversion's (4 features), or one pass where the
    conversion does not compute it (more features than ``GRAM_MAX_FEATURES``, here set to 0)."""
    df, _ = frame
    if gram_max is not None:
        monkeypatch.setattr(conversion_plan, "GRAM_MAX_FEATURES", gram_max)
    passes = []
    original = ComposedStrategy.loss_gradient_hessian

    def gram_pass(self, coef):
        passes.append(1)
        return original(self, coef)

    monkeypatch.setattr(ComposedStrategy, "loss_gradient_hessian", gram_pass)
    lr = LinearRegression(labelCol="y", strategy=strategy)  # solver auto: 4 features, the normal equations
    maps = grid(lr, True, SIDE_BY_SIDE_REGS)
    path = dict(lr.fitMultiple(df, maps))
    per_fit = 0 if gram_max is None else 1
    assert len(passes) == per_fit and len(conversions) == 1 and not stages
    for index, (m, cold) in enumerate(zip(maps, cold_fits(lr, df, maps))):
        assert path[index].getRegParam() == m[lr.regParam]
        np.testing.assert_array_equal(coefficient_vector(path[index]), coefficient_vector(cold))
        assert path[index].summary.totalIterations == cold.summary.totalIterations
    assert len(passes) == per_fit * (1 + len(maps))


def test_groups_one_path_per_setting_and_label_the_iterations(frame, conversions, stages):
    """fitIntercept separates paths (two barrier stages), the data's conversion is still shared (one), and the
    iterations of each map are reported under its own name."""
    df, _ = frame
    events = []
    lr = LogisticRegression(strategy="allreduce").addIterationCallback(events.append)
    maps = (
        ParamGridBuilder()
        .addGrid(lr.regParam, [0.1, 0.01])
        .addGrid(lr.fitIntercept, [True, False])
        .addGrid(lr.threshold, [0.4, 0.6])  # the decision threshold changes no fit: same path
        .build()
    )
    models = dict(lr.fitMultiple(df, maps))
    assert len(conversions) == 1 and len(stages) == 2
    names = {e.name for e in events}
    assert names == {f"LogisticRegression [regParam={r:g}, elasticNetParam=0]" for r in (0.1, 0.01)}
    for index, m in enumerate(maps):
        assert models[index].getThreshold() == m[lr.threshold]
        assert models[index].getFitIntercept() == m[lr.fitIntercept]
        twin = next(
            j
            for j, o in enumerate(maps)
            if o[lr.regParam] == m[lr.regParam] and o[lr.fitIntercept] == m[lr.fitIntercept] and j != index
        )
        np.testing.assert_array_equal(coefficient_vector(models[index]), coefficient_vector(models[twin]))


def test_cross_validator_picks_the_map_fitting_each_map_alone_picks(frame, monkeypatch):
    """pyspark's CrossValidator over the path (two threads pulling its maps) against the same search with
    every map fitted alone (pyspark's ``Estimator.fitMultiple``, one thread: two barrier stages at once would
    want four task slots): the same metrics and the same best map."""
    from pyspark.ml import Estimator

    df, _ = frame
    lr = LogisticRegression(strategy="allreduce", tol=1e-9)
    maps = grid(lr, True, SIDE_BY_SIDE_REGS)

    def search(parallelism):
        cv = CrossValidator(
            estimator=lr,
            estimatorParamMaps=maps,
            evaluator=BinaryClassificationEvaluator(),
            numFolds=2,
            seed=3,
            parallelism=parallelism,
        )
        return cv.fit(df)

    path = search(2)
    monkeypatch.setattr(LogisticRegression, "fitMultiple", Estimator.fitMultiple)
    alone = search(1)
    np.testing.assert_allclose(path.avgMetrics, alone.avgMetrics, rtol=1e-7)
    assert len(set(np.round(alone.avgMetrics, 6))) > 1  # the grid's maps score differently
    best = int(np.argmax(alone.avgMetrics))
    assert path.bestModel.getRegParam() == maps[best][lr.regParam]
    assert path.bestModel.getElasticNetParam() == maps[best][lr.elasticNetParam]


def test_a_warm_start_that_already_meets_the_stopping_rule_takes_one_step():
    """Breeze's gradient rule ||g|| <= tol |f| holds at the warm start: without ``min_iter`` the run would end
    there, at iteration 0; with it, one step lowers the objective."""
    h = np.diag([1.0, 10.0, 100.0])

    def fun_grad(x):
        return 0.5 * x @ h @ x + 1.0, h @ x

    x0 = np.array([1e-7, 1e-8, 1e-9])
    f0, g0 = fun_grad(x0)
    assert np.linalg.norm(g0) <= 1e-6 * f0  # the rule holds at x0 (tol 1e-6)
    cold = minimize_lbfgs(fun_grad, x0, tol=1e-6)
    assert cold.n_iter == 0
    warm = minimize_lbfgs(fun_grad, x0, tol=1e-6, min_iter=1)
    assert warm.n_iter >= 1 and warm.fun < f0
    at_floor = minimize_lbfgs(fun_grad, np.zeros(3), tol=1e-6, min_iter=1)  # a zero gradient: nothing to take
    assert at_floor.n_iter == 0


def test_a_grid_too_wide_to_run_side_by_side_walks_the_path(frame, monkeypatch):
    """Side by side, every map keeps its own L-BFGS memory: past ``_SIDE_BY_SIDE_COEFFICIENTS`` (maps x
    coefficients) the maps walk the warm-started path instead, one map's memory at a time."""
    import sparkml.linear.estimator as linear_estimator

    df, columns = frame
    together = []
    original = ComposedStrategy.minimize_path

    def spy(self, steps, theta0, **kw):
        together.append(kw.get("together"))
        return original(self, steps, theta0, **kw)

    monkeypatch.setattr(ComposedStrategy, "minimize_path", spy)
    estimator = LogisticRegression(strategy="allreduce")
    maps = grid(estimator, True)  # 6 maps of 5 coefficients
    side_by_side = dict(estimator.fitMultiple(df, maps))
    monkeypatch.setattr(linear_estimator, "_SIDE_BY_SIDE_COEFFICIENTS", 6 * 5 - 1)
    walked = dict(estimator.fitMultiple(df, maps))
    assert [None if t is None else len(t) for t in together] == [6, None]
    for index, m in enumerate(maps):
        ours, theirs = (mllib_objective(p[index], columns, "binomial") for p in (walked, side_by_side))
        assert ours <= theirs * (1 + 1e-9), (m, ours, theirs)
