"""Fits every estimator in a Spark Connect session and prints the results as JSON (one line).

Run by tests/test_connect.py in a subprocess: a local Spark Connect server
(``SparkSession.builder.remote("local[2]")``) needs its own JVM, apart from the classic session
the rest of the tests share. Also importable for ``FITS``, ``estimator`` and ``coefficients`` (the
same estimators, fitted classically by the test for comparison, on the same
``data_helpers.connect_frame``). Run as a script, its own folder (tests/) is first on sys.path.
"""
import json
import os
import sys

from data_helpers import connect_frame
from helpers import coefficient_vector, training_summary, use_this_checkout

use_this_checkout()

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


def estimator(name, params):
    import sparkml.classification
    import sparkml.regression

    module = sparkml.regression if name == "LinearRegression" else sparkml.classification
    return getattr(module, name)(**params)


def coefficients(model):
    """The model's numbers as a JSON-ready list."""
    return coefficient_vector(model).tolist()


def main(out_dir):
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote("local[2]").getOrCreate()
    df = connect_frame(spark)
    results = {}
    for name, est_name, params in FITS:
        model = estimator(est_name, params).fit(df)
        pred_col = "prediction"
        rows = model.transform(df).orderBy("id").select(pred_col).limit(20).collect()
        results[name] = {"coef": coefficients(model), "predictions": [r[0] for r in rows],
                         "iterations": training_summary(model).totalIterations}
    path = os.path.join(out_dir, "connect_model")
    model = estimator("LogisticRegression", {"regParam": 0.01}).fit(df)
    model.write().overwrite().save(path)
    from sparkml.classification import LogisticRegressionModel

    results["saved_and_loaded"] = coefficients(LogisticRegressionModel.load(path))
    est = estimator("LogisticRegression", {"regParam": 0.05, "strategy": "allreduce"})
    results["model_uid_is_estimator_uid"] = est.fit(df).uid == est.uid
    est.write().overwrite().save(os.path.join(out_dir, "connect_estimator"))
    est.write().overwrite().save(os.path.join(out_dir, "connect_estimator"))  # overwriting works without a JVM
    loaded = type(est).load(os.path.join(out_dir, "connect_estimator"))
    results["estimator_loaded"] = [loaded.uid == est.uid, loaded.getRegParam(), loaded.getStrategy()]
    try:
        model.evaluate(df)
        results["evaluate"] = "ran"
    except NotImplementedError as e:  # it needs MLlib's model in the JVM
        results["evaluate"] = str(e)
    print("RESULTS " + json.dumps(results))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
