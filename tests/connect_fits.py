"""Fits every estimator in a Spark Connect session and prints the results as JSON (one line).

Run by tests/test_connect.py in a subprocess: a local Spark Connect server
(``SparkSession.builder.remote("local[2]")``) needs its own JVM, apart from the classic session
the rest of the tests share. Also importable for ``frame_rows`` and ``FITS`` (the same data and
estimators, fitted classically by the test for comparison).
"""
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

FITS = [  # (name, estimator, params)
    ("logistic-sync", "LogisticRegression", {"regParam": 0.01}),
    ("logistic-allreduce", "LogisticRegression", {"regParam": 0.01, "strategy": "allreduce"}),
    ("logistic-averaging", "LogisticRegression", {"regParam": 0.01, "strategy": "averaging", "maxIter": 5,
                                                  "localIter": 5, "tol": 0.0}),
    ("logistic-allreduce-averaging", "LogisticRegression", {"regParam": 0.01, "strategy": "allreduce-averaging",
                                                            "maxIter": 5, "localIter": 5, "tol": 0.0}),
    ("multinomial-allreduce", "LogisticRegression", {"labelCol": "label3", "regParam": 0.02, "strategy": "allreduce"}),
    ("svc-allreduce", "LinearSVC", {"regParam": 0.01, "maxIter": 30, "strategy": "allreduce"}),
    ("linreg-normal", "LinearRegression", {"labelCol": "y", "regParam": 0.1, "elasticNetParam": 0.5}),
    ("linreg-lbfgs-averaging", "LinearRegression", {"labelCol": "y", "regParam": 0.1, "solver": "l-bfgs",
                                                    "strategy": "averaging", "maxIter": 5, "localIter": 5,
                                                    "tol": 0.0}),
    ("kernel-svc-sync", "KernelSVC", {"numLandmarks": 80, "gamma": 0.5}),
    ("kernel-svc-allreduce-3-classes", "KernelSVC", {"labelCol": "label3", "numLandmarks": 80, "probability": True,
                                                     "strategy": "allreduce"}),
]


def frame_rows(n=800, d=4, seed=11):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * np.linspace(1.0, 2.0, d)
    w = np.linspace(1.0, -1.0, d)
    m = x @ w + 0.2
    label = (m + rng.logistic(size=n) > 0).astype(float)
    label3 = np.stack([m, -m, x[:, 0]], 1).__add__(rng.gumbel(size=(n, 3))).argmax(1).astype(float)
    y = x @ w + 0.5 + rng.normal(scale=0.3, size=n)
    return [(i, x[i].tolist(), float(label[i]), float(label3[i]), float(y[i])) for i in range(n)]


def make_frame(spark, partitions=3):
    from pyspark.ml.functions import array_to_vector
    from pyspark.sql import functions as F

    df = spark.createDataFrame(frame_rows(), "id long, x array<double>, label double, label3 double, y double")
    return df.select("id", array_to_vector(F.col("x")).alias("features"), "label", "label3", "y").repartition(
        partitions, "id")


def estimator(name, params):
    import sparkml.classification
    import sparkml.regression

    module = sparkml.regression if name == "LinearRegression" else sparkml.classification
    return getattr(module, name)(**params)


def coefficients(model):
    if getattr(model, "numClasses", 2) > 2 or not hasattr(model, "coefficients"):  # multinomial, KernelSVC
        platt = getattr(model, "plattCoefficients", None)
        return (model.coefficientMatrix.toArray().ravel().tolist() + model.interceptVector.toArray().tolist()
                + ([] if platt is None else platt.toArray().ravel().tolist()))
    return model.coefficients.toArray().tolist() + [model.intercept]


def main(out_dir):
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote("local[2]").getOrCreate()
    df = make_frame(spark)
    results = {}
    for name, est_name, params in FITS:
        model = estimator(est_name, params).fit(df)
        pred_col = "prediction"
        rows = model.transform(df).orderBy("id").select(pred_col).limit(20).collect()
        results[name] = {"coef": coefficients(model), "predictions": [r[0] for r in rows],
                         "iterations": (model.summary() if callable(model.summary) else model.summary).totalIterations}
    path = os.path.join(out_dir, "connect_model")
    model = estimator("LogisticRegression", {"regParam": 0.01}).fit(df)
    model.write().overwrite().save(path)
    from sparkml.classification import LogisticRegressionModel

    results["saved_and_loaded"] = coefficients(LogisticRegressionModel.load(path))
    print("RESULTS " + json.dumps(results))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
