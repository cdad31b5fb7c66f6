"""``classWeight`` on the classifiers: a fit with it is the fit whose weight column is weightCol times
the class's weight (scikit-learn's ``class_weight``, ``"balanced"`` by scikit-learn's own rule)."""

import numpy as np
import pytest
from data_helpers import _schema
from helpers import coefficient_vector
from sklearn.utils.class_weight import compute_class_weight

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
        ({1: -1.0}, "finite and non-negative"),
        ({1: "heavy"}, "both numbers"),
    ]:
        with pytest.raises(ValueError, match=message):
            LogisticRegression(classWeight=bad)


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
