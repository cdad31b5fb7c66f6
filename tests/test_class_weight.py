"""``classWeight`` on the classifiers: a fit with it is the fit whose weight column is weightCol times
the class's weight (scikit-learn's ``class_weight``, ``"balanced"`` by scikit-learn's own rule)."""

import numpy as np
import pytest
from sklearn.utils.class_weight import compute_class_weight
from support.data_helpers import _schema
from support.helpers import coefficient_vector

from sparkml.classification import KernelSVC, LinearSVC, LogisticRegression


def _frame(spark, classes, n=900, seed=3):
    """label (``classes`` classes, imbalanced), features, w (row weights), w_by_class (set per test)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 4))
    shares = np.arange(1, classes + 1, dtype=float)
    y = rng.choice(classes, size=n, p=shares / shares.sum()).astype(float)
    x[:, 0] += y  # signal
    w = rng.uniform(0.5, 2.0, n)
    return x, y, w


def _both_weights(spark, x, y, w, by_class):
    """label, features, w and wc = w times the class weight (numpy): one frame, so that both fits read the
    same partitions in the same order."""
    from pyspark.ml.linalg import Vectors

    wc = w * np.array([by_class.get(c, 1.0) for c in y])
    rows = [(float(c), Vectors.dense(row), float(a), float(b)) for row, c, a, b in zip(x, y, w, wc)]
    schema = _schema(("label", "double"), ("features", "vector"), ("w", "double"), ("wc", "double"))
    return spark.createDataFrame(rows, schema).repartition(3).cache()


def _same_fit(ours, equivalent, rtol=1e-9):
    a, b = coefficient_vector(ours), coefficient_vector(equivalent)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * np.abs(b).max())


def test_logistic_mapping_times_the_weight_column(spark):
    x, y, w = _frame(spark, 2)
    df = _both_weights(spark, x, y, w, {1.0: 3.0})  # class 0 left out: weight 1
    ours = LogisticRegression(regParam=0.01, weightCol="w", classWeight={1: 3}).fit(df)
    equivalent = LogisticRegression(regParam=0.01, weightCol="wc").fit(df)
    _same_fit(ours, equivalent)
    plain = LogisticRegression(regParam=0.01, weightCol="w").fit(df)
    assert abs(ours.intercept - plain.intercept) > 0.5  # the weights moved the model: the test can fail


def test_balanced_is_scikit_learns_rule_multinomial(spark):
    x, y, w = _frame(spark, 3)
    classes = np.unique(y)
    by_class = dict(zip(classes, compute_class_weight("balanced", classes=classes, y=y)))
    df = _both_weights(spark, x, y, np.ones_like(w), by_class)
    ours = LogisticRegression(regParam=0.01, classWeight="balanced").fit(df)
    equivalent = LogisticRegression(regParam=0.01, weightCol="wc").fit(df)
    np.testing.assert_allclose(ours.coefficientMatrix.toArray(), equivalent.coefficientMatrix.toArray(), atol=1e-8)
    np.testing.assert_allclose(ours.interceptVector.toArray(), equivalent.interceptVector.toArray(), atol=1e-8)


def test_linear_svc_and_kernel_svc(spark):
    x, y, w = _frame(spark, 2, n=500)
    by_class = {0.0: 0.5, 1.0: 2.0}
    df = _both_weights(spark, x, y, w, by_class)
    svc = LinearSVC(regParam=0.01, weightCol="w", classWeight=by_class).fit(df)
    _same_fit(svc, LinearSVC(regParam=0.01, weightCol="wc").fit(df))
    # KernelSVC: the landmarks too are drawn and k-means-weighted by the product
    kernel = dict(numLandmarks=60, maxIter=50)
    ours = KernelSVC(classWeight=by_class, weightCol="w", **kernel).fit(df)
    equivalent = KernelSVC(weightCol="wc", **kernel).fit(df)
    np.testing.assert_allclose(ours.landmarks.toArray(), equivalent.landmarks.toArray(), atol=1e-12)
    np.testing.assert_allclose(ours.coefficientMatrix.toArray(), equivalent.coefficientMatrix.toArray(), atol=1e-9)


def test_bad_class_weight_is_refused_before_training():
    for bad, message in [
        ("even", "'balanced' or a mapping"),
        ({}, "non-empty mapping"),
        ({1.5: 2.0}, "class indices"),
        ({-1: 2.0}, "class indices"),
        ({float("inf"): 2.0}, r"class indices \(0, 1, 2, \.\.\.\), finite; got inf"),  # not an OverflowError
        ({float("-inf"): 2.0}, "class indices"),
        ({float("nan"): 2.0}, "class indices"),
        ({"inf": 2.0}, "class indices"),  # a saved mapping's labels come back as strings
        ({1: -1.0}, "finite and non-negative"),
        ({1: float("inf")}, "finite and non-negative"),
        ({1: "heavy"}, "both numbers"),
    ]:
        with pytest.raises(ValueError, match="classWeight") as refused:
            LogisticRegression(classWeight=bad)
        assert refused.match(message)


def test_a_jobs_config_with_an_infinite_key_gets_the_same_error():
    import yaml

    from sparkml.jobs.config import ConfigError, validate_params

    params = yaml.safe_load("classWeight: {.inf: 2.0}")  # YAML's infinity, a float key
    with pytest.raises(ConfigError, match=r"model\.params\.classWeight: classWeight's labels are class indices"):
        validate_params("LogisticRegression", params)


def test_label_histograms_count_rows_beside_their_weights():
    import json

    import pyarrow as pa

    from sparkml.data.statistics import PartitionStats, label_histograms

    parts = []
    for y, w in (([0.0, 2.0, 2.0], [0.5, 0.0, 1.0]), ([2.0, 4.0], [1.0, 3.0])):  # label 3 absent, 4 in one part
        stats = PartitionStats()
        stats.labels(pa.array(y), pa.array(w))
        stats.features(np.ones((len(y), 2)), np.array(w), {2}, 0)
        info, moments = stats.info()
        parts.append(((0, len(y), json.dumps(info), moments), info))
    counts, weighted = label_histograms(*zip(*parts))
    np.testing.assert_array_equal(counts, [1, 0, 3, 0, 1])
    np.testing.assert_array_equal(weighted, [0.5, 0, 2.0, 0, 3.0])


def test_check_labels_names_the_key_as_scikit_learn_refuses_it():
    from sparkml.data.class_weight import check_labels

    labels = np.array([5.0, 0.0, 7.0]), np.array([5.0, 0.0, 7.0])  # rows of labels 0, 1, 2, their weights
    with pytest.raises(ValueError, match=r"^classWeight names label 7, which is not a label of the data \(labels of "):
        check_labels({7.0: 2.0}, labels, "label")
    with pytest.raises(ValueError, match=r"names labels 1, 7, which are not labels .*'label': 0, 2\)$"):
        check_labels({0.0: 1.0, 1.0: 2.0, 7.0: 2.0}, labels, "label")
    with pytest.raises(ValueError, match="not in class_weight"):  # scikit-learn's refusal of the same mapping
        compute_class_weight({7: 2.0}, classes=np.array([0, 2]), y=np.array([0, 2]))
    with pytest.raises(ValueError, match=r"weight 0 to labels 0, 2 of column 'label', which leaves no class"):
        check_labels({0.0: 0.0, 2.0: 0.0}, (labels[0], np.zeros(3)), "label")  # before "the sum of the weights is 0"
    check_labels({2.0: 0.0}, (np.ones(3), np.array([1.0, 1.0, 0.0])), "label")  # two classes left: fits
    check_labels({7.0: 2.0}, None, "label")  # labels not class indices: the estimators' checks refuse them


def test_refused_at_the_conversion_job_with_no_job_of_its_own(spark):
    """A key the data lacks and a weight of 0 that leaves one class: refused by the conversion job's own
    label counts, the fit running exactly the jobs of converting the data and deleting its blocks."""
    from sparkml.data.training_data import TrainingData

    x, y, w = _frame(spark, 2, n=200)
    df = _both_weights(spark, x, y, w, {})
    df.count()
    sc = spark.sparkContext
    tracker = sc.statusTracker()

    def jobs(group, run):
        sc.setJobGroup(group, group)
        try:
            run()
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
        return len(tracker.getJobIdsForGroup(group))

    conversion = LogisticRegression()._conversion(df)
    expected = jobs("converted", lambda: TrainingData.prepare(df, **conversion).release())
    assert expected >= 2  # at least the conversion and the deletion of its blocks
    for make, message in [
        (
            lambda: LogisticRegression(classWeight={1: 3.0, 7: 2.0}),
            r"^classWeight names label 7, which is not a label of the data \(labels of column 'label': 0, 1\)$",
        ),
        (
            lambda: LinearSVC(classWeight={0: 0.0}),
            r"^classWeight gives weight 0 to label 0 of column 'label', which leaves a single class \(1\) with",
        ),
    ]:

        def refused(make=make, message=message):
            with pytest.raises(ValueError, match=message):
                make().fit(df)

        assert jobs(f"refused {message[:20]}", refused) == expected
    df.unpersist()


def test_a_weight_of_zero_on_one_of_three_classes_fits(spark):
    x, y, w = _frame(spark, 3, n=200)
    df = _both_weights(spark, x, y, w, {})
    model = LogisticRegression(classWeight={2: 0.0}, maxIter=3).fit(df)
    assert model.numClasses == 3
    df.unpersist()


def test_class_weight_saves_and_loads_and_stays_out_of_mllibs_metadata(spark, tmp_path):
    import glob
    import json

    from pyspark.ml.classification import LogisticRegressionModel as StockModel

    est = LogisticRegression(classWeight={0: 1.0, 2: 4.0})
    est.save(str(tmp_path / "est"))
    assert LogisticRegression.load(str(tmp_path / "est")).getClassWeight() == {0.0: 1.0, 2.0: 4.0}
    x, y, w = _frame(spark, 2, n=200)
    model = LogisticRegression(classWeight="balanced", maxIter=5).fit(_both_weights(spark, x, y, w, {}))
    assert model.getClassWeight() == "balanced"
    model.save(str(tmp_path / "model"))
    (metadata,) = glob.glob(str(tmp_path / "model" / "metadata" / "part-*"))
    with open(metadata) as f:
        saved = json.load(f)
    assert "classWeight" not in saved["paramMap"] and saved["sparkml"]["paramMap"]["classWeight"] == "balanced"
    stock = StockModel.load(str(tmp_path / "model"))  # MLlib's reader knows no classWeight: it must not meet one
    np.testing.assert_allclose(stock.coefficients.toArray(), model.coefficients.toArray(), rtol=0, atol=0)
