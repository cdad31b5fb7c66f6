"""`jobs.report`: ROC/AUC and confusion matrix against scikit-learn, `scores` on Spark predictions
against pyspark's evaluators, the PNG figures per task and report.md's content."""

import math

import numpy as np
import pytest

from sparkml.jobs import report, report_figures

sk_metrics = pytest.importorskip("sklearn.metrics")

PNG = b"\x89PNG\r\n\x1a\n"


def png_size(data):
    """(width, height) from a PNG's IHDR chunk."""
    assert data[:8] == PNG and data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


# ---- roc_curve / confusion_matrix against sklearn -------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_roc_matches_sklearn_with_ties_and_weights(seed):
    rng = np.random.default_rng(seed)
    n = 400
    label = (rng.random(n) < 0.4).astype(float)
    score = np.round(rng.normal(size=n) + label, 1)  # one decimal: many ties, some across classes
    weight = rng.uniform(0.1, 3.0, n)
    weight[::17] = 0.0  # zero weights are dropped, as sklearn does
    for w in (None, weight):
        fpr, tpr, auc = report.roc_curve(label, score, w)
        sk_fpr, sk_tpr, _ = sk_metrics.roc_curve(label, score, sample_weight=w)
        np.testing.assert_allclose(fpr, sk_fpr, rtol=0, atol=1e-12)
        np.testing.assert_allclose(tpr, sk_tpr, rtol=0, atol=1e-12)
        assert auc == pytest.approx(sk_metrics.roc_auc_score(label, score, sample_weight=w), abs=1e-12)
        assert 0.6 < auc < 0.9  # informative but not perfect: the ties matter


def test_roc_auc_is_the_pairwise_probability():
    # positives 0.9, 0.5; negatives 0.5, 0.1 (weight 3): P(pos > neg) + P(pos == neg) / 2, weighted
    label, score, weight = [1, 1, 0, 0], [0.9, 0.5, 0.5, 0.1], [1.0, 1.0, 1.0, 3.0]
    pairs = [(1 * 1, 1.0), (1 * 3, 1.0), (1 * 1, 0.5), (1 * 3, 1.0)]  # (pair weight, win)
    expected = sum(w * v for w, v in pairs) / sum(w for w, _ in pairs)
    fpr, tpr, auc = report.roc_curve(label, score, weight)
    assert auc == pytest.approx(expected) and expected == pytest.approx(7.5 / 8)
    assert (fpr[0], tpr[0], fpr[-1], tpr[-1]) == (0.0, 0.0, 1.0, 1.0)
    # a monotone map of the scores leaves the curve alone
    assert report.roc_curve(label, np.log(score), weight)[2] == pytest.approx(auc)


def test_roc_undefined_without_both_classes():
    fpr, tpr, auc = report.roc_curve([1, 1, 1], [0.2, 0.5, 0.9])
    assert math.isnan(auc) and np.isnan(fpr).all() and np.isnan(tpr).all()
    with pytest.raises(ValueError, match="3 rows, score 2"):
        report.roc_curve([0, 1, 1], [0.1, 0.2])


def test_confusion_matrix_matches_sklearn():
    rng = np.random.default_rng(5)
    label = rng.integers(0, 4, 300).astype(float)
    prediction = np.where(rng.random(300) < 0.6, label, rng.integers(0, 4, 300)).astype(float)
    weight = rng.uniform(0.5, 2.0, 300)
    for w in (None, weight):
        cm = report.confusion_matrix(label, prediction, 5, w)  # class 4 never occurs: a zero row and column
        expected = sk_metrics.confusion_matrix(label, prediction, labels=range(5), sample_weight=w)
        np.testing.assert_allclose(cm, expected, rtol=1e-12)
        assert cm.shape == (5, 5) and cm[4].sum() == 0 and cm[:, 4].sum() == 0
    assert report.confusion_matrix(label, prediction, 4).sum() == 300
    with pytest.raises(ValueError, match=r"integers in \[0, 3\)"):
        report.confusion_matrix([0, 1, 3], [0, 1, 2], 3)
    np.testing.assert_array_equal(report.residuals([1.0, 2.0], [1.5, 1.0]), [0.5, -1.0])


# ---- scores on Spark ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def binary_predictions(spark):
    """A fitted sparkml LogisticRegression's predictions on its 500 noisy training rows (weights 0.5..2)."""
    from pyspark.ml.linalg import Vectors

    from sparkml.classification import LogisticRegression

    rng = np.random.default_rng(11)
    n = 500
    x = rng.normal(size=(n, 3))
    label = (rng.random(n) < 1 / (1 + np.exp(-(x @ [1.0, -0.7, 0.3])))).astype(float)
    w = rng.uniform(0.5, 2.0, n)
    df = spark.createDataFrame(
        [(Vectors.dense(x[i]), float(label[i]), float(w[i])) for i in range(n)], ["features", "label", "w"]
    ).coalesce(1)  # one Python worker: quicker here
    model = LogisticRegression(regParam=0.01, maxIter=20, weightCol="w").fit(df)
    pred = model.transform(df).cache()
    yield model, pred
    pred.unpersist()


def test_scores_binary_auc_matches_spark_evaluator(binary_predictions):
    from pyspark.ml.evaluation import BinaryClassificationEvaluator

    model, pred = binary_predictions
    for weight_col in (None, "w"):
        s = report.scores(pred, "binary", "label", weight_col=weight_col)
        assert set(s) == {"label", "prediction", "weight", "score"} and len(s["label"]) == 500
        assert ((0 <= s["score"]) & (s["score"] <= 1)).all()  # P(label=1) from the probability column
        extra = {"weightCol": weight_col} if weight_col else {}
        spark_auc = BinaryClassificationEvaluator(labelCol="label", **extra).evaluate(pred)
        auc = report.roc_curve(s["label"], s["score"], s["weight"])[2]
        assert 0.65 < auc < 0.95 and auc == pytest.approx(spark_auc, abs=1e-9)
    np.testing.assert_array_equal(s["weight"], pred.select("w").toPandas()["w"].to_numpy())
    # without a probability column the raw prediction ranks the rows the same way
    raw = report.scores(pred.drop("probability"), "binary", "label")
    assert report.roc_curve(raw["label"], raw["score"])[2] == pytest.approx(
        report.roc_curve(s["label"], s["score"])[2], abs=1e-12
    )
    assert np.ptp(raw["score"]) > 1  # margins, not probabilities


def test_scores_sample_is_bounded_and_repeatable(binary_predictions):
    _, pred = binary_predictions
    a = report.scores(pred, "binary", "label", max_rows=100, seed=3)
    b = report.scores(pred, "binary", "label", max_rows=100, seed=3)
    assert len(a["label"]) == 100 and np.ones_like(a["weight"]).tolist() == a["weight"].tolist()
    np.testing.assert_array_equal(a["score"], b["score"])
    with pytest.raises(ValueError, match="task must be one of"):
        report.scores(pred, "ranking", "label")


def test_scores_multiclass_and_regression(spark):
    from pyspark.ml.linalg import Vectors

    rows = [
        (0.0, 0.0, Vectors.dense([0.7, 0.2, 0.1, 0.0]), 2.0),
        (1.0, 2.0, Vectors.dense([0.1, 0.3, 0.6, 0.0]), 1.0),
        (2.0, 2.0, Vectors.dense([0.1, 0.1, 0.8, 0.0]), 1.0),
    ]
    df = spark.createDataFrame(rows, ["y", "prediction", "probability", "w"])
    s = report.scores(df, "multiclass", "y", weight_col="w")
    assert s["num_classes"] == 4  # the probability vector's length, beyond the classes seen
    np.testing.assert_array_equal(
        report.confusion_matrix(s["label"], s["prediction"], s["num_classes"], s["weight"]),
        [[2, 0, 0, 0], [0, 0, 1, 0], [0, 0, 1, 0], [0, 0, 0, 0]],
    )
    assert report.scores(df.drop("probability"), "multiclass", "y")["num_classes"] == 3

    reg = spark.createDataFrame([(1, 1.5), (2, 1.0), (3, 3.25)], ["label", "prediction"])  # long labels
    r = report.scores(reg, "regression", "label")
    assert set(r) == {"label", "prediction", "weight"}
    np.testing.assert_allclose(report.residuals(r["label"], r["prediction"]), [0.5, -1.0, 0.25])


# ---- figures --------------------------------------------------------------------------------------------------


def fake_scores(task, n, seed, shift=0.0):
    rng = np.random.default_rng(seed)
    if task == "binary":
        label = (rng.random(n) < 0.5).astype(float)
        score = 1 / (1 + np.exp(-(2 * label - 1 + rng.normal(size=n) + shift)))
        return {"label": label, "prediction": (score > 0.5).astype(float), "weight": np.ones(n), "score": score}
    if task == "multiclass":
        label = rng.integers(0, 3, n).astype(float)
        prediction = np.where(rng.random(n) < 0.7, label, rng.integers(0, 3, n)).astype(float)
        return {"label": label, "prediction": prediction, "weight": np.ones(n), "num_classes": 3}
    label = rng.normal(size=n) * 3
    return {"label": label, "prediction": label + rng.normal(size=n) + shift, "weight": np.ones(n)}


@pytest.mark.parametrize(
    "task,name", [("binary", "roc.png"), ("multiclass", "confusion.png"), ("regression", "residuals.png")]
)
def test_figures_per_task_with_and_without_champion(task, name):
    history = [0.69 * 0.5**i + 0.3 for i in range(12)]
    both = {"candidate": fake_scores(task, 600, 1), "champion": fake_scores(task, 600, 2, shift=0.3)}
    out = report.figures(task, both, objective_history=history)
    assert list(out) == ["objective.png", name]
    for data in out.values():
        width, height = png_size(data)
        assert 300 <= width <= 1200 and 250 <= height <= 800 and len(data) > 5000
    alone = report.figures(task, {"candidate": both["candidate"], "champion": None})
    assert list(alone) == [name] and png_size(alone[name])[1] > 250  # no history: no objective.png
    assert report.figures(task, {"candidate": None, "champion": None}, objective_history=[1.0]) == {}


def test_figures_side_by_side_confusion_is_wider():
    cand = fake_scores("multiclass", 300, 3)
    two = report.figures("multiclass", {"candidate": cand, "champion": fake_scores("multiclass", 300, 4)})
    one = report.figures("multiclass", {"candidate": cand})
    assert png_size(two["confusion.png"])[0] > 1.5 * png_size(one["confusion.png"])[0]


def test_objective_figure_handles_flat_and_bad_histories():
    flat = report.figures("regression", {}, objective_history=[2.0, 2.0, 2.0])
    assert list(flat) == ["objective.png"] and png_size(flat["objective.png"])[0] == 500  # one panel
    curved = report.figures("regression", {}, objective_history=np.array([3.0, 2.0, 1.5, float("nan"), 1.25]))
    assert png_size(curved["objective.png"])[0] == 900  # the log panel beside it
    assert report.figures("regression", {}, objective_history=[]) == {}


def test_figures_without_matplotlib(monkeypatch):
    monkeypatch.setattr(report_figures, "_matplotlib_figure", lambda: None)
    assert report.figures("binary", {"candidate": fake_scores("binary", 50, 0)}, [1.0, 0.5]) == {}


# ---- markdown / write -----------------------------------------------------------------------------------------


def full_report():
    return {
        "title": "Retraining demo, window 2026-11-03",
        "model_name": "demo",
        "window": "2026-11-03",
        "decision": {"outcome": "rejected", "reason": "the candidate failed the gate on areaUnderROC."},
        "versions": {"candidate": "2", "champion": "1"},
        "gate": [
            {
                "metric": "areaUnderROC",
                "greater_is_better": True,
                "candidate": 0.70123,
                "champion": 0.88,
                "threshold": 0.85,
                "min_absolute_change": 0.0,
                "min_relative_change": None,
                "passed": False,
                "failures": ["areaUnderROC 0.7012 is below the threshold 0.8500"],
            },
            {
                "metric": "logLoss",
                "greater_is_better": False,
                "candidate": 0.41,
                "champion": 0.4,
                "threshold": 0.5,
                "min_absolute_change": None,
                "min_relative_change": 0.01,
                "passed": True,
                "failures": [],
            },
        ],
        "metrics": {
            "candidate": {"areaUnderROC": 0.70123, "accuracy": 0.86, "logLoss": 0.41},
            "champion": {"areaUnderROC": 0.88, "accuracy": 0.9, "f1": 0.875},
        },
        "warm_start": {"used": True, "from_version": "1", "reason": "same features"},
        "training": {
            "estimator": "LogisticRegression",
            "iterations": 12,
            "seconds": 3.24,
            "rows": {"train": 8000, "test": 2000},
        },
        "data": {"fingerprint": "ab12cd", "source": "data/windows/window=2026-11-03"},
        "run": {"run_id": "r123", "tracking_uri": "file:///tmp/mlruns", "experiment": "retrain-demo"},
        "figures": ["objective.png", "roc.png"],
    }


def table_row(md, first_cell):
    rows = [line for line in md.splitlines() if line.startswith(f"| {first_cell} |")]
    assert len(rows) == 1, (first_cell, md)
    return [c.strip() for c in rows[0].strip("|").split(" | ")]


def test_markdown_full_report():
    md = report.markdown(full_report())
    assert md.startswith("# Retraining demo, window 2026-11-03\n")
    assert "**Decision: rejected**: the candidate failed the gate on areaUnderROC." in md
    gate, metrics = md[: md.index("## Metrics")], md[md.index("## Metrics") :]
    auc = table_row(gate, "areaUnderROC")
    assert auc[:6] == ["areaUnderROC", "higher is better", "0.7012", "0.8800", "0.8500", "abs 0.0000"]
    assert auc[6] == "**FAIL**: areaUnderROC 0.7012 is below the threshold 0.8500"
    assert table_row(gate, "logLoss")[1:] == ["lower is better", "0.4100", "0.4000", "0.5000", "rel 0.0100", "pass"]
    assert table_row(metrics, "areaUnderROC") == ["areaUnderROC", "0.7012", "0.8800", "-0.1788"]
    assert table_row(metrics, "accuracy") == ["accuracy", "0.8600", "0.9000", "-0.0400"]
    assert table_row(metrics, "logLoss") == ["logLoss", "0.4100", "—", "—"]  # candidate-only metric
    assert table_row(metrics, "f1") == ["f1", "—", "0.8750", "—"]  # champion-only metric
    assert "**Warm start:** yes, from version 1 (same features)" in md
    assert "LogisticRegression, 12 iterations, 3.2 s; rows: train 8000, test 2000" in md
    assert "`data/windows/window=2026-11-03`, fingerprint `ab12cd`" in md
    assert "run `r123` in experiment `retrain-demo` at `file:///tmp/mlruns`" in md
    assert "![objective](objective.png)" in md and "![roc](roc.png)" in md
    assert "candidate version 2, champion version 1" in md


def test_markdown_without_champion_and_sparse():
    r = full_report()
    r["versions"]["champion"] = None
    r["metrics"]["champion"] = None
    r["gate"] = [
        {
            "metric": "areaUnderROC",
            "greater_is_better": True,
            "candidate": 0.80004,
            "champion": None,
            "threshold": 0.85,
            "passed": False,
        }
    ]  # no failure sentence: built from the numbers
    r["decision"] = {"outcome": "dry_run", "reason": "dry run: nothing registered"}
    del r["figures"], r["warm_start"]
    md = report.markdown(r)
    assert "**Decision: dry run**: dry run: nothing registered" in md
    gate, metrics = md[: md.index("## Metrics")], md[md.index("## Metrics") :]
    assert table_row(gate, "areaUnderROC")[2:] == [
        "0.8000",
        "—",
        "0.8500",
        "—",
        "**FAIL**: areaUnderROC 0.8000 is below the threshold 0.8500",
    ]
    assert table_row(metrics, "accuracy") == ["accuracy", "0.8600", "—", "—"]
    assert "champion version —" in md and "No champion to compare with." in md
    assert "**Warm start:** —" in md and "## Figures" not in md
    # anything may be missing: an empty dict or odd values still render
    empty = report.markdown({})
    assert "**Decision: —**" in empty and "**Training:** —, — iterations, — s" in empty
    odd = report.markdown(
        {"metrics": {"candidate": {"rmse": float("nan"), "r2": "inf", "n|x": np.int64(3), "mae": np.float32(0.25)}}}
    )
    assert "| rmse | nan | — | — |" in odd and "| n\\|x | 3 | — | — |" in odd and "| mae | 0.2500 | — | — |" in odd


def test_write(tmp_path):
    pngs = report.figures("binary", {"candidate": fake_scores("binary", 200, 0)}, [1.0, 0.6, 0.5])
    r = full_report()
    del r["figures"]  # the PNGs given are embedded
    names = report.write(str(tmp_path / "run"), r, pngs)
    assert names == ["report.md", "objective.png", "roc.png"]
    md = (tmp_path / "run" / "report.md").read_text(encoding="utf-8")
    assert "![roc](roc.png)" in md and "**Decision: rejected**" in md
    assert (tmp_path / "run" / "roc.png").read_bytes() == pngs["roc.png"]
    with pytest.raises(ValueError, match="plain file names"):
        report.write(str(tmp_path / "run"), r, {"../x.png": b""})
