"""Checkpoint and resume (``checkpointDir``, ``checkpointInterval``; ``sparkml/optim/checkpoint.py``).

1. The optimizer alone (numpy objectives, no Spark): a run stopped after a checkpoint and resumed from it
   takes the very steps of an uninterrupted run (L-BFGS, OWL-QN on MLlib's LinearSVC path); a write killed
   half-way leaves the previous checkpoint.
2. A checkpoint of another fit (other Params, other data) is refused with a ValueError naming it and what
   differs; fits that cannot checkpoint (L-BFGS-B, the normal solver, a CrossValidator grid) refuse
   ``checkpointDir``.
3. In Spark: a fit resumed from the checkpoint an uninterrupted fit wrote mid-way ends at that fit's model
   (LogisticRegression multinomial with OWL-QN and LinearRegression with sync, LinearSVC with allreduce, the
   rounds of both averaging strategies); and the real one: a driver process (``tests/support/checkpoint_fit.py``,
   started at collection time by ``background_runs`` so the JVM start overlaps the suite) is SIGKILLed with
   its JVM after a checkpoint, and this process resumes its fit, for ``sync`` and ``allreduce``. The killed
   fit is slowed by a test-only Progress callback that ``tests/support/checkpoint_fit.py`` adds when
   SPARKML_TEST_ITERATION_SLEEP is set (off by default).

The resumed fits are compared with uninterrupted ones at 1e-9 (coefficients) and 1e-12 relative
(objectiveHistory): two plain fits of the same data in one process already differ in the last bit at times
(the first fit of a session computes some partition sums in another order), and a resumed fit continues in
another process.
"""

import functools
import glob
import json
import logging
import os
import sys

import numpy as np
import pytest
from support import background, checkpoint_fit
from support.helpers import coefficient_vector

from sparkml.optim import minimize_lbfgs
from sparkml.optim.checkpoint import Checkpoint, differences
from sparkml.optim.minimize import run_optimizer

KILL_AT = 6  # the killed fit dies once the checkpoint of this iteration (or a later one) exists
_SCRATCH = {}


def _scratch():
    if "dir" not in _SCRATCH:
        _SCRATCH["dir"] = background.scratch_dir("checkpoint-kill-")
    return _SCRATCH["dir"]


def _kill_dir(strategy):
    return os.path.join(_scratch(), strategy, "checkpoints")


def background_runs():
    """One killed fit per strategy (each its own driver and JVM), started at collection time."""
    runs = {}
    for strategy in ("sync", "allreduce"):
        os.makedirs(os.path.dirname(_kill_dir(strategy)), exist_ok=True)
        argv = [sys.executable, checkpoint_fit.__file__, "kill", strategy, _kill_dir(strategy), str(KILL_AT)]
        env = dict(background.python_env(sys.executable), SPARKML_TEST_ITERATION_SLEEP="0.5")
        runs[f"checkpoint-kill-{strategy}"] = background.Run(argv, env=env, timeout=400)
    return runs


# ---- 1. the optimizer alone ------------------------------------------------------------------------------


def _logistic(seed=0, n=300, d=25):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, d)) * np.linspace(0.5, 3.0, d)
    y = (a @ rng.normal(size=d) + rng.logistic(size=n) > 0).astype(float)

    def fun_grad(x):
        m = a @ x
        f = float(np.mean(np.logaddexp(0, m) - y * m) + 5e-4 * x @ x)
        return f, a.T @ (1 / (1 + np.exp(-m)) - y) / n + 1e-3 * x

    return fun_grad, d


class _Stop(Exception):
    pass


def _stop_at(iteration):
    def callback(it, *_):
        if it == iteration:
            raise _Stop

    return callback


def _resumed(tmp_path, fun_grad, x0, stop, interval=3, **options):
    """Run until iteration ``stop`` raises (checkpoints every ``interval``), then a second run from the
    checkpoint: (its result, the iteration it resumed at)."""
    first = Checkpoint(str(tmp_path), interval, {"fit": {"id": 1}}, "test")
    with pytest.raises(_Stop):
        minimize_lbfgs(fun_grad, x0, callback=_stop_at(stop), snapshot=first.snapshot, **options)
    second = Checkpoint(str(tmp_path), interval, {"fit": {"id": 1}}, "test")
    state = second.load()
    return minimize_lbfgs(fun_grad, x0, resume=state, snapshot=second.snapshot, **options), state["iteration"]


def _assert_same_run(a, b):
    np.testing.assert_array_equal(a.x, b.x)
    assert (a.n_iter, a.objective_history, a.message, a.n_evals, a.converged) == (
        b.n_iter,
        b.objective_history,
        b.message,
        b.n_evals,
        b.converged,
    )


@pytest.mark.parametrize("l1", [None, 0.02], ids=["lbfgs", "owlqn"])
@pytest.mark.parametrize("stop", [4, 11])
def test_resumed_run_takes_the_uninterrupted_steps(tmp_path, l1, stop):
    fun_grad, d = _logistic()
    options = dict(max_iter=100, tol=1e-12, l1=None if l1 is None else np.full(d, l1))
    full = minimize_lbfgs(fun_grad, np.zeros(d), **options)
    resumed, at = _resumed(tmp_path, fun_grad, np.zeros(d), stop, **options)
    assert at == stop - stop % 3 and 0 < at < full.n_iter
    _assert_same_run(full, resumed)
    files = {os.path.basename(f) for f in glob.glob(str(tmp_path / "*" / "*"))}
    assert files == {"state.json", "x.npy", "g.npy", "pg.npy", "s.npy", "y.npy"}  # JSON and .npy only


def test_resumed_owlqn_follows_mllibs_linear_svc_path(tmp_path):
    """MLlib's LinearSVC path (OWL-QN without L1, steps that raise the objective, 100 iterations) is
    resumed after 47 iterations to the same end."""
    from test_optim_svc_path import _svc_objective

    objective = _svc_objective(True, 0.0, False)
    options = dict(max_iter=100, tol=1e-6, l1=objective.l1_weights(), method="owlqn")
    x0 = np.zeros(objective.size)
    full = minimize_lbfgs(objective.fun_grad, x0, **options)
    resumed, at = _resumed(tmp_path, objective.fun_grad, x0, 47, interval=5, **options)
    assert at == 45 and full.n_iter == 100
    _assert_same_run(full, resumed)


class _Objective:
    def __init__(self, fun_grad):
        self.fun_grad = fun_grad

    def l1_weights(self):
        return None


def test_run_optimizer_reports_the_resume(tmp_path):
    fun_grad, d = _logistic(seed=1)
    full_x, full = run_optimizer(_Objective(fun_grad), np.zeros(d), max_iter=100, tol=1e-12, name="t")
    checkpoint = Checkpoint(str(tmp_path), 4, {}, "t")
    from sparkml.optim.iterations import Progress

    def stop(event):
        if event.iteration == 6:
            raise _Stop

    with pytest.raises(_Stop):
        run_optimizer(
            _Objective(fun_grad),
            np.zeros(d),
            max_iter=100,
            tol=1e-12,
            name="t",
            progress=Progress([stop]),
            checkpoint=checkpoint,
        )
    checkpoint = Checkpoint(str(tmp_path), 4, {}, "t")
    checkpoint.load()
    x, summary = run_optimizer(
        _Objective(fun_grad), np.zeros(d), max_iter=100, tol=1e-12, name="t", checkpoint=checkpoint
    )
    np.testing.assert_array_equal(x, full_x)
    assert summary.objectiveHistory == full.objectiveHistory and summary.totalIterations == full.totalIterations
    assert summary.message == full.message + " (resumed from the checkpoint of iteration 4)"
    times = summary.iterationSeconds  # the first 4 from the first run, the clock going on from there
    assert len(times) == summary.totalIterations and times == sorted(times)


def test_a_write_killed_half_way_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    checkpoint = Checkpoint(str(tmp_path), 1, {"fit": {"id": 1}}, "test")
    checkpoint.save(2, {"iteration": 2, "x": np.arange(3.0)})
    calls = []

    def dying_save(f, array, allow_pickle):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt  # the process dies in the middle of writing the new checkpoint
        np.lib.format.write_array(f, array, allow_pickle=False)

    monkeypatch.setattr(np, "save", dying_save)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save(4, {"iteration": 4, "x": np.arange(3.0) + 4, "g": np.zeros(3)})
    monkeypatch.undo()
    assert any(n.startswith(".tmp-") for n in os.listdir(tmp_path))  # the unfinished one, under its temporary name
    state = Checkpoint(str(tmp_path), 1, {"fit": {"id": 1}}, "test").load()
    assert state["iteration"] == 2 and state["x"].tolist() == [0.0, 1.0, 2.0]
    checkpoint.save(6, {"iteration": 6, "x": np.zeros(3)})
    assert os.listdir(tmp_path) == ["iteration-000006"]  # older and unfinished ones deleted
    checkpoint.remove()
    assert not os.path.exists(tmp_path)


def test_a_checkpoint_of_another_fit_is_refused(tmp_path):
    saved = {"params": {"regParam": 0.1, "maxIter": 100}, "data": {"rows": 600, "label sum": 301.0}}
    Checkpoint(str(tmp_path), 1, saved, "LogisticRegression").save(3, {"iteration": 3, "x": np.zeros(2)})
    same = {"params": {"regParam": 0.1, "maxIter": 100}, "data": {"rows": 600, "label sum": 301.0 * (1 + 1e-12)}}
    assert not differences(saved, same)  # the same sums added in another order
    other = {"params": {"regParam": 0.2, "maxIter": 100}, "data": {"rows": 599, "label sum": 301.0}}
    with pytest.raises(ValueError) as refused:
        Checkpoint(str(tmp_path), 1, other, "LogisticRegression").load()
    message = str(refused.value)
    assert os.path.join(str(tmp_path), "iteration-000003") in message
    assert "params regParam: checkpoint 0.1, this fit 0.2" in message
    assert "data rows: checkpoint 600, this fit 599" in message
    assert "label sum" not in message and "maxIter" not in message


# ---- 2. and 3. in Spark ----------------------------------------------------------------------------------


def _fail_at(estimator, iteration):
    def callback(event):
        if event.iteration == iteration:
            raise _Stop(f"failed at iteration {iteration}")

    return estimator._add_iteration_callback(callback)


def _assert_same_fit(resumed, reference):
    np.testing.assert_allclose(coefficient_vector(resumed), coefficient_vector(reference), rtol=0, atol=1e-9)
    assert resumed.summary.totalIterations == reference.summary.totalIterations
    np.testing.assert_allclose(resumed.summary.objectiveHistory, reference.summary.objectiveHistory, rtol=1e-12)


def _estimators():
    from sparkml.classification import LinearSVC, LogisticRegression
    from sparkml.regression import LinearRegression

    return {
        "lr_multinomial_owlqn": lambda **k: LogisticRegression(
            labelCol="label3", regParam=0.01, elasticNetParam=0.5, maxIter=6, **k
        ),
        "svc": lambda **k: LinearSVC(regParam=0.01, maxIter=6, **k),
        "linreg_lbfgs": lambda **k: LinearRegression(
            labelCol="y", solver="l-bfgs", regParam=0.01, elasticNetParam=0.2, tol=1e-12, maxIter=6, **k
        ),
        "lr_rounds": lambda **k: LogisticRegression(regParam=0.01, maxIter=6, localIter=3, tol=0.0, **k),
    }


def _keep_checkpoint(estimator, iteration, directory, copy):
    """At the end of ``iteration`` (before its own checkpoint) copy ``directory`` to ``copy``: what a fit that
    died in that iteration leaves behind. The fit goes on to the end: the uninterrupted fit."""
    import shutil

    def callback(event):
        if event.iteration == iteration:
            shutil.copytree(directory, copy)

    return estimator._add_iteration_callback(callback)


@pytest.mark.parametrize(
    "kind, strategy",
    [
        ("lr_multinomial_owlqn", "sync"),
        ("svc", "allreduce"),
        ("linreg_lbfgs", "sync"),
        ("lr_rounds", "averaging"),
        ("lr_rounds", "allreduce-averaging"),
    ],
)
def test_a_fit_resumed_from_a_checkpoint_ends_at_the_uninterrupted_model(data, tmp_path, caplog, kind, strategy):
    """With allreduce (LinearSVC: OWL-QN) and allreduce-averaging rank 0 writes the checkpoints, the driver
    reads them. The averaging strategies checkpoint their rounds."""
    make = functools.partial(_estimators()[kind], strategy=strategy)
    directory, copy = str(tmp_path / "checkpoints"), str(tmp_path / "copy")
    reference = _keep_checkpoint(make(checkpointDir=directory, checkpointInterval=2), 5, directory, copy).fit(data)
    assert not os.path.exists(directory)  # removed once the fit succeeded
    assert os.listdir(copy) == ["iteration-000004"] and reference.summary.totalIterations > 5
    os.rename(copy, directory)  # the checkpoint a fit killed in its iteration 5 leaves
    with caplog.at_level(logging.INFO, logger="sparkml"):
        resumed = make(checkpointDir=directory, checkpointInterval=2).fit(data)
    assert any("resuming from the checkpoint" in r.getMessage() and directory in r.getMessage() for r in caplog.records)
    unit = "round" if strategy.endswith("averaging") else "iteration"
    assert resumed.summary.message.endswith(f"(resumed from the checkpoint of {unit} 4)")
    _assert_same_fit(resumed, reference)
    assert not os.path.exists(directory)
    if kind == "linreg_lbfgs":  # the checkpoint Params stay out of MLlib's metadata: stock pyspark loads the model
        from pyspark.ml.regression import LinearRegressionModel

        path = str(tmp_path / "model")
        resumed.save(path)
        with open(glob.glob(os.path.join(path, "metadata", "part-*"))[0]) as f:
            metadata = json.loads(f.readline())
        mllib_params = set(metadata["paramMap"]) | set(metadata["defaultParamMap"])
        assert not {"checkpointDir", "checkpointInterval"} & mllib_params
        assert metadata["sparkml"]["paramMap"]["checkpointDir"] == directory
        np.testing.assert_array_equal(LinearRegressionModel.load(path).coefficients, resumed.coefficients)


def test_another_fits_checkpoint_is_refused_in_a_fit(data, tmp_path):
    from sparkml.classification import LogisticRegression

    directory = str(tmp_path / "checkpoints")
    with pytest.raises(_Stop):
        _fail_at(LogisticRegression(regParam=0.01, checkpointDir=directory, checkpointInterval=2), 3).fit(data)
    checkpoint = os.path.join(directory, "iteration-000002")
    with pytest.raises(ValueError, match="params regParam: checkpoint 0.01, this fit 0.02") as refused:
        LogisticRegression(regParam=0.02, checkpointDir=directory).fit(data)
    assert checkpoint in str(refused.value)
    with pytest.raises(ValueError, match="data rows: checkpoint 600, this fit 300") as refused:
        LogisticRegression(regParam=0.01, checkpointDir=directory, checkpointInterval=2).fit(data.limit(300))
    assert checkpoint in str(refused.value)
    assert os.listdir(directory) == ["iteration-000002"]  # refused, never used nor deleted


def _refusing():
    from pyspark.ml.linalg import Matrices

    from sparkml.classification import LinearSVC, LogisticRegression
    from sparkml.regression import LinearRegression

    return {
        "bounds": (
            lambda d: LogisticRegression(lowerBoundsOnCoefficients=Matrices.dense(1, 4, [0.0] * 4), checkpointDir=d),
            r"bound-constrained fits \(L-BFGS-B\)",
        ),
        "normal": (
            lambda d: LinearRegression(labelCol="y", solver="normal", checkpointDir=d),
            "solver='normal' runs no iterations",
        ),
        "auto_normal": (
            lambda d: LinearRegression(labelCol="y", checkpointDir=d),
            "solver='auto' chose the normal equations",
        ),
        "huber": (lambda d: LinearRegression(labelCol="y", loss="huber", checkpointDir=d), "loss='huber'"),
        "interval": (lambda d: LinearSVC(checkpointDir=d, checkpointInterval=0), "checkpointInterval must be >= 1"),
        "remote": (lambda d: LinearSVC(checkpointDir="hdfs:///tmp/x"), "local or mounted path"),
    }


@pytest.mark.parametrize("kind", sorted(_refusing()))
def test_fits_that_cannot_checkpoint_refuse_checkpoint_dir(data, tmp_path, kind):
    make, message = _refusing()[kind]
    with pytest.raises(ValueError, match=message):
        make(str(tmp_path / "checkpoints")).fit(data)
    assert not os.path.exists(tmp_path / "checkpoints")


def test_cross_validator_refuses_checkpoint_dir(data, tmp_path):
    from pyspark.ml.evaluation import BinaryClassificationEvaluator
    from pyspark.ml.tuning import CrossValidator, ParamGridBuilder

    from sparkml.classification import LogisticRegression

    lr = LogisticRegression(checkpointDir=str(tmp_path))
    grid = ParamGridBuilder().addGrid(lr.regParam, [0.01, 0.1]).build()
    cv = CrossValidator(estimator=lr, estimatorParamMaps=grid, evaluator=BinaryClassificationEvaluator(), numFolds=2)
    with pytest.raises(ValueError, match="checkpointDir is set but fitMultiple fits 2 param maps"):
        cv.fit(data)


@pytest.mark.system
@pytest.mark.parametrize("strategy", ["sync", "allreduce"])
def test_a_killed_driver_resumes_in_another(spark, caplog, strategy):
    """The fit of ``tests/support/checkpoint_fit.py`` is SIGKILLed (driver, JVM and Python workers) once its checkpoint
    of iteration KILL_AT exists; this process fits again and ends at the uninterrupted fit's model."""
    done = background.result(f"checkpoint-kill-{strategy}", background_runs())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    killed = json.loads(done.stdout.strip().splitlines()[-1])
    assert killed["killed_at_checkpoint"] is not None, killed["log_tail"]
    at = killed["killed_at_checkpoint"]
    # the newest is the one seen; the one before it is still there when the kill fell between the new one's
    # rename and the old one's deletion
    assert killed["returncode"] == -9 and killed["checkpoints_left"][-1] == at
    assert killed["checkpoints_left"] in ([at], [at - 2, at])
    df = checkpoint_fit.frame(spark)
    reference = checkpoint_fit.estimator(strategy).fit(df)
    with caplog.at_level(logging.INFO, logger="sparkml"):
        resumed = checkpoint_fit.estimator(strategy, _kill_dir(strategy)).fit(df)
    assert any(f"resuming from the checkpoint {_kill_dir(strategy)}" in r.getMessage() for r in caplog.records)
    assert resumed.summary.message.endswith(f"(resumed from the checkpoint of iteration {at})")
    _assert_same_fit(resumed, reference)
    assert not os.path.exists(_kill_dir(strategy))
    total = reference.summary.totalIterations
    print(
        f"\n{strategy}: killed after iteration {killed['reached']} (checkpoint {at}); resumed for "
        f"{total - at} iterations; {total} in all"
    )
    assert killed["reached"] >= at and at < total
