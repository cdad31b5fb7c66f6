"""KernelSVC against scikit-learn's SVC (same kernel, gamma and C) on the same train/test split."""
import numpy as np
import pytest
from pyspark.ml.linalg import Vectors, VectorUDT
from pyspark.sql.types import DoubleType, StructField, StructType
from sklearn import datasets
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from sparkml.classification import KernelSVC, KernelSVCModel

SCHEMA = StructType([StructField("label", DoubleType()), StructField("features", VectorUDT())])


def _frame(spark, x, y, partitions=4):
    rows = [(float(label), Vectors.dense(row)) for row, label in zip(x, y)]
    return spark.createDataFrame(rows, SCHEMA).repartition(partitions)


def _accuracy(model, frame, y):
    pred = np.array([r.prediction for r in model.transform(frame).select("prediction").collect()])
    return float(np.mean(pred == y))


def _split(x, y, seed=0):
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.3, random_state=seed, stratify=y)
    scaler = StandardScaler().fit(xtr)
    return scaler.transform(xtr), scaler.transform(xte), ytr, yte


def _compare(spark, xtr, xte, ytr, yte, c, **params):
    sk = SVC(C=c, **{k: v for k, v in params.items() if k in ("kernel", "gamma", "degree", "coef0")}).fit(xtr, ytr)
    sk_acc = float(np.mean(sk.predict(xte) == yte))
    train = _frame(spark, xtr, ytr)
    # one partition, the test frame keeps its row order: predictions are compared with yte row by row
    test = spark.createDataFrame([(float(label), Vectors.dense(row)) for row, label in zip(xte, yte)],
                                 SCHEMA)
    model = KernelSVC(regParam=1.0 / (len(ytr) * c), **params).fit(train)
    return model, _accuracy(model, test, yte), sk_acc


@pytest.mark.parametrize("name,loader,landmarks", [
    ("breast cancer", datasets.load_breast_cancer, 2000),  # 398 training rows: all are landmarks, the exact kernel
    ("digits, 10 classes", datasets.load_digits, 600),  # 600 of 1257 rows, stratified over the 10 classes
])
def test_rbf_accuracy_within_one_point_of_sklearn(spark, name, loader, landmarks):
    x, y = loader(return_X_y=True)
    xtr, xte, ytr, yte = _split(x, y.astype(float))
    model, acc, sk_acc = _compare(spark, xtr, xte, ytr, yte, c=1.0, kernel="rbf", gamma="scale",
                                  numLandmarks=landmarks)
    assert model.numClasses == len(np.unique(y))
    assert model.numLandmarksUsed == pytest.approx(min(landmarks, len(ytr)), abs=5)
    assert abs(acc - sk_acc) <= 0.01, (name, acc, sk_acc)


def test_synthetic_nonlinear_problem_with_sampled_landmarks(spark):
    """Two interleaved moons (no linear separator): 400 of 1400 training rows as landmarks."""
    x, y = datasets.make_moons(n_samples=2000, noise=0.25, random_state=1)
    xtr, xte, ytr, yte = _split(x, y.astype(float))
    model, acc, sk_acc = _compare(spark, xtr, xte, ytr, yte, c=10.0, kernel="rbf", gamma=1.0, numLandmarks=400)
    assert model.numLandmarksUsed == pytest.approx(400, abs=3)
    assert abs(acc - sk_acc) <= 0.01, (acc, sk_acc)
    assert acc > 0.9  # a linear model gets about 0.86 here


def test_gamma_scale_is_sklearns(spark):
    x, y = datasets.load_breast_cancer(return_X_y=True)
    model = KernelSVC(numLandmarks=50, maxIter=2).fit(_frame(spark, x, y.astype(float)))
    assert model.gammaValue == pytest.approx(1.0 / (x.shape[1] * x.var()), rel=1e-9)


def test_save_load_round_trip(spark, tmp_path):
    x, y = datasets.make_moons(n_samples=300, noise=0.2, random_state=2)
    frame = _frame(spark, x, y.astype(float))
    model = KernelSVC(kernel="polynomial", degree=2, gamma=0.5, coef0=1.0, numLandmarks=60, regParam=1e-3).fit(frame)
    model.save(str(tmp_path / "m"))
    loaded = KernelSVCModel.load(str(tmp_path / "m"))
    assert loaded.getKernel() == "polynomial" and loaded.getDegree() == 2 and loaded.gammaValue == 0.5
    a = model.transform(frame).select("rawPrediction", "prediction").collect()
    b = loaded.transform(frame).select("rawPrediction", "prediction").collect()
    np.testing.assert_allclose([r[0].toArray() for r in a], [r[0].toArray() for r in b], rtol=1e-12)
    assert [r[1] for r in a] == [r[1] for r in b]


def test_bad_params_are_named(spark):
    x, y = datasets.make_moons(n_samples=50, random_state=0)
    frame = _frame(spark, x, y.astype(float), 1)
    with pytest.raises(ValueError, match="regParam must be > 0"):
        KernelSVC(regParam=0.0).fit(frame)
    with pytest.raises(ValueError, match="kernel must be one of"):
        KernelSVC(kernel="cosine")
    with pytest.raises(ValueError, match="gamma must be 'scale', 'auto' or a number > 0"):
        KernelSVC(gamma=-1.0)
    with pytest.raises(ValueError, match="label column 'label' must hold class indices"):
        KernelSVC().fit(spark.createDataFrame([(0.5, Vectors.dense([1.0])), (1.0, Vectors.dense([2.0]))],
                                              SCHEMA))
