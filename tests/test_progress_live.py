"""Live progress: iteration callbacks on the driver as iterations end, for every strategy (``sparkml.progress``)."""

import time

import numpy as np
import pytest
from support.data_helpers import linear_frame

from sparkml import progress
from sparkml.classification import KernelSVC, LogisticRegression


@pytest.fixture(scope="module")
def df(spark):
    return linear_frame(spark, n=2000, partitions=2)


def _watch(spark, events):
    """A callback recording each event with whether a Spark job was running when it arrived."""

    def callback(event):
        events.append((event, bool(spark.sparkContext.statusTracker().getActiveJobsIds()), time.perf_counter()))

    return callback


def test_an_allreduce_fit_reports_every_iteration_on_the_driver_while_its_stage_runs(spark, df):
    events = []
    est = LogisticRegression(regParam=0.01, strategy="allreduce", tol=1e-10, maxIter=8)
    # slow each iteration in the optimizer's loop (on the executor), so that a relayed event cannot be mistaken
    # for one read after the stage returned
    est._add_iteration_callback(lambda _: time.sleep(0.3))
    model = est.addIterationCallback(_watch(spark, events)).fit(df)
    returned = time.perf_counter()
    n = model.summary.totalIterations
    assert n >= 5 and [e.iteration for e, _, _ in events] == list(range(1, n + 1))
    assert all(live for _, live, _ in events), "an iteration reached the driver only after the stage returned"
    assert returned - events[0][2] > 0.3 * (n - 1)  # the first arrived long before the fit returned
    history = model.summary.objectiveHistory
    np.testing.assert_allclose([e.objective for e, _, _ in events], history[1:], rtol=1e-12)
    assert all(e.gradient_norm is not None and e.gradient_norm >= 0 for e, _, _ in events)
    assert events[-1][0].x is not None and events[-1][0].x.shape == (df.first().features.size + 1,)


def test_sync_and_kernel_svc_fits_report_to_the_same_callbacks(spark, df):
    events = []
    model = LogisticRegression(regParam=0.01, strategy="sync").addIterationCallback(events.append).fit(df)
    assert [e.iteration for e in events] == list(range(1, model.summary.totalIterations + 1))
    kernel = []
    est = KernelSVC(numLandmarks=50, labelCol="label3", strategy="allreduce").addIterationCallback(kernel.append)
    est.fit(df)
    assert {e.name for e in kernel} == {f"KernelSVC classes {a} vs {b}" for a, b in ((0, 1), (0, 2), (1, 2))}
    assert all(e.kind == "Newton round" for e in kernel)
    assert est.clearIterationCallbacks()._progress().listeners == []


def test_a_failing_callback_is_logged_and_the_fit_goes_on(spark, df, caplog):
    def broken(event):
        raise RuntimeError("the user's callback broke")

    est = LogisticRegression(regParam=0.01, strategy="allreduce", maxIter=5).addIterationCallback(broken)
    with caplog.at_level("ERROR", logger="sparkml"):
        model = est.fit(df)
    assert model.summary.totalIterations == 5
    assert "an iteration callback failed on LogisticRegression iteration 1" in caplog.text


def test_the_progress_bar_shows_when_asked_and_not_in_scripts(spark, df, capsys):
    assert not progress.progress_shown()  # pytest is no interactive session
    progress.show_progress(True)
    try:
        LogisticRegression(regParam=0.01, maxIter=7, strategy="allreduce").fit(df)
    finally:
        progress.show_progress(None)
    bar = capsys.readouterr().err
    assert "LogisticRegression" in bar and "7/7" in bar and "objective=" in bar


def test_every_writes_one_line_per_n_iterations():
    lines = []
    write = progress.every(5, lines.append)
    for k in range(1, 13):
        write(progress.Iteration("LogisticRegression", "iteration", k, 1.0 / k, None, 0.1, "gradient norm 1.000e-03"))
    assert [line.split(":")[0] for line in lines] == [
        "LogisticRegression iteration 1",
        "LogisticRegression iteration 5",
        "LogisticRegression iteration 10",
    ]
    assert lines[0].endswith("gradient norm 1.000e-03")
