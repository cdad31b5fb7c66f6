"""Fits every estimator in a Spark Connect session and prints the results as JSON (one line).

Run by tests/test_connect.py in a subprocess: a local Spark Connect server
(``SparkSession.builder.remote("local[2]")``) needs its own JVM, apart from the classic session
the rest of the tests share. Also importable for ``FITS``, ``estimator`` and ``coefficients`` (the
same estimators, fitted classically by the test for comparison, on the same
``data_helpers.connect_frame``). Run as a script, it puts tests/ first on sys.path (for ``support``).
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/, for `support`

from support.data_helpers import connect_frame
from support.helpers import coefficient_vector, training_summary, use_this_checkout
from support.scoring_reference import largest_differences, runs_python

use_this_checkout()

FITS = [  # (name, estimator, params)
    ("logistic-sync", "LogisticRegression", {"regParam": 0.01}),
    ("logistic-allreduce", "LogisticRegression", {"regParam": 0.01, "strategy": "allreduce"}),
    (
        "logistic-averaging",
        "LogisticRegression",
        {"regParam": 0.01, "strategy": "averaging", "maxIter": 5, "localIter": 5, "tol": 0.0},
    ),
    (
        "logistic-allreduce-averaging",
        "LogisticRegression",
        {"regParam": 0.01, "strategy": "allreduce-averaging", "maxIter": 5, "localIter": 5, "tol": 0.0},
    ),
    ("logistic-gossip", "LogisticRegression", {"regParam": 0.01, "strategy": "gossip", "maxIter": 5000, "tol": 1e-12}),
    ("logistic-ssp", "LogisticRegression", {"regParam": 0.01, "strategy": "ssp", "maxIter": 5000, "tol": 1e-12}),
    ("multinomial-allreduce", "LogisticRegression", {"labelCol": "label3", "regParam": 0.02, "strategy": "allreduce"}),
    ("svc-allreduce", "LinearSVC", {"regParam": 0.01, "maxIter": 30, "strategy": "allreduce"}),
    ("linreg-normal", "LinearRegression", {"labelCol": "y", "regParam": 0.1, "elasticNetParam": 0.5}),
    (
        "linreg-lbfgs-averaging",
        "LinearRegression",
        {
            "labelCol": "y",
            "regParam": 0.1,
            "solver": "l-bfgs",
            "strategy": "averaging",
            "maxIter": 5,
            "localIter": 5,
            "tol": 0.0,
        },
    ),
    ("kernel-svc-sync", "KernelSVC", {"numLandmarks": 80, "gamma": 0.5}),
    (
        "kernel-svc-allreduce-3-classes",
        "KernelSVC",
        {"labelCol": "label3", "numLandmarks": 80, "probability": True, "strategy": "allreduce"},
    ),
]


TIGHT = {"tol": 1e-12, "maxIter": 1000}
SUMMARY_CASES = [  # (name, estimator, params, training summary class, evaluation summary class): test_summary.py's
    (
        "lr_binary",
        "LogisticRegression",
        {"regParam": 0.01, **TIGHT},
        "classification.BinaryLogisticRegressionTrainingSummary",
        "classification.BinaryLogisticRegressionSummary",
    ),
    (
        "lr_multinomial",
        "LogisticRegression",
        {"regParam": 0.01, "labelCol": "label3", **TIGHT},
        "classification.LogisticRegressionTrainingSummary",
        "classification.LogisticRegressionSummary",
    ),
    (
        "svc",
        "LinearSVC",
        {"regParam": 0.5, "maxIter": 25},
        "classification.LinearSVCTrainingSummary",
        "classification.LinearSVCSummary",
    ),
    (
        "linreg_normal",
        "LinearRegression",
        {"regParam": 0.01, "labelCol": "y", "solver": "normal"},
        "regression.LinearRegressionTrainingSummary",
        "regression.LinearRegressionSummary",
    ),
    (
        "linreg_lbfgs",
        "LinearRegression",
        {"regParam": 0.01, "labelCol": "y", "solver": "l-bfgs", **TIGHT},
        "regression.LinearRegressionTrainingSummary",
        "regression.LinearRegressionSummary",
    ),
    (
        "glr_poisson",
        "GeneralizedLinearRegression",
        {"family": "poisson", "link": "log", "tol": 1e-10},
        "regression.GeneralizedLinearRegressionTrainingSummary",
        "regression.GeneralizedLinearRegressionSummary",
    ),
]
REGRESSORS = ("LinearRegression", "GeneralizedLinearRegression")


def summary_walks(df):
    """{case: {...}}: our summaries against those of pyspark.ml's fit, both in this session
    (``summary_walk.summary_differences``)."""
    import importlib

    from support.summary_walk import summary_differences

    train, test = df.where("id % 4 != 0"), df.where("id % 4 = 0")
    out = {}
    for name, est_name, params, training_cls, evaluation_cls in SUMMARY_CASES:
        ours = estimator(est_name, {**params, "dtype": "float64"}).fit(train)
        stock_module = importlib.import_module(
            f"pyspark.ml.{'regression' if est_name in REGRESSORS else 'classification'}"
        )
        theirs = getattr(stock_module, est_name)(**params).fit(train)
        case = {}
        for label, cls_name, pair in (
            ("training", training_cls, (training_summary(ours), training_summary(theirs))),
            ("evaluate", evaluation_cls, (ours.evaluate(test), theirs.evaluate(test))),
        ):
            module, cls_attr = cls_name.split(".")
            cls = getattr(importlib.import_module(f"pyspark.ml.{module}"), cls_attr)
            diffs, compared = summary_differences(*pair, cls)
            case[label] = {"instances": [isinstance(s, cls) for s in pair], "diffs": diffs, "compared": compared}
        if est_name != "GeneralizedLinearRegression":  # IRLS's record is numIterations, walked above
            case["objectiveHistory"] = [
                training_summary(ours).objectiveHistory,
                training_summary(theirs).objectiveHistory,
            ]
        out[name] = case
    return out


def estimator(name, params):
    import sparkml.classification
    import sparkml.regression

    module = sparkml.regression if name in REGRESSORS else sparkml.classification
    return getattr(module, name)(**params)


def coefficients(model):
    """The model's numbers as a JSON-ready list."""
    return coefficient_vector(model).tolist()


def interrupted_fit(spark, df, out_dir):
    """An ``allreduce`` fit interrupted (``spark.interruptAll()``, Connect's Cancel) at its third iteration: the
    error it ends with and the seconds from the interrupt to it."""
    import threading
    import time

    marker, outcome = os.path.join(out_dir, "third-iteration"), {}

    def announce(event):  # in rank 0's barrier task, on the server's executor
        if event.iteration >= 3 and not os.path.exists(marker):
            open(marker, "w").close()

    est = estimator("LogisticRegression", {"maxIter": 5000, "tol": 0.0, "strategy": "allreduce"})
    est._add_iteration_callback(announce)

    def fit():
        try:
            est.fit(df)
        except Exception as e:
            outcome["error"] = f"{type(e).__name__}: {str(e)[:500]}"
        outcome["at"] = time.time()

    thread = threading.Thread(target=fit, daemon=True)
    thread.start()
    deadline = time.time() + 120
    while not os.path.exists(marker) and time.time() < deadline:
        time.sleep(0.02)
    interrupted_at = time.time()
    spark.interruptAll()
    thread.join(120)
    return {"error": outcome.get("error"), "seconds": outcome.get("at", float("inf")) - interrupted_at}


def main(out_dir):
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote("local[2]").getOrCreate()
    df = connect_frame(spark)
    results = {}
    for name, est_name, params in FITS:
        model = estimator(est_name, params).fit(df)
        pred_col = "prediction"
        rows = model.transform(df).orderBy("id").select(pred_col).limit(20).collect()
        results[name] = {
            "coef": coefficients(model),
            "predictions": [r[0] for r in rows],
            "iterations": training_summary(model).totalIterations,
        }
        if est_name != "KernelSVC":  # the linear models score in the JVM, with MLlib's formulas
            out = model.transform(df)
            results[name]["scoring"] = {"runs_python": runs_python(out), "differences": largest_differences(model, out)}
    path = os.path.join(out_dir, "connect_model")
    model = estimator("LogisticRegression", {"regParam": 0.01}).fit(df)
    model.write().overwrite().save(path)
    from sparkml.classification import LogisticRegressionModel

    results["saved_and_loaded"] = coefficients(LogisticRegressionModel.load(path))
    plain = os.path.join(out_dir, "connect_model_plain")
    model.save(plain)  # no overwrite: a second save must refuse, as in a classic session
    try:
        model.save(plain)
        results["second_save"] = "overwrote"
    except Exception as e:
        results["second_save"] = type(e).__name__
    est = estimator("LogisticRegression", {"regParam": 0.05, "strategy": "allreduce"})
    results["model_uid_is_estimator_uid"] = est.fit(df).uid == est.uid
    est.write().overwrite().save(os.path.join(out_dir, "connect_estimator"))
    est.write().overwrite().save(os.path.join(out_dir, "connect_estimator"))  # overwriting works without a JVM
    loaded = type(est).load(os.path.join(out_dir, "connect_estimator"))
    results["estimator_loaded"] = [loaded.uid == est.uid, loaded.getRegParam(), loaded.getStrategy()]
    results["summaries"] = summary_walks(df)
    results["interrupted"] = interrupted_fit(spark, df, out_dir)
    shared = os.path.join(out_dir, "shared-temp")  # a directory the server can read: the stock model goes there
    os.makedirs(shared)
    os.environ["SPARKML_TEMP_DFS_PATH"] = shared
    stock = model.toSpark()
    results["shared_temp"] = {
        "class": type(stock).__name__,
        "coef": coefficient_vector(stock).tolist(),
        "left": os.listdir(shared),
    }
    del os.environ["SPARKML_TEMP_DFS_PATH"]
    print("RESULTS " + json.dumps(results))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
