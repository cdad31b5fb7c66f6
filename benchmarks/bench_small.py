"""Small fits: the fixed cost of a fit, pyspark.ml (MLlib) against sparkml, same data, one session.

Notebook tables, per-segment models, unit tests: many fits are of a few thousand rows, where a fit's time is
its fixed cost (Spark jobs, the conversion, a barrier stage's start) rather than arithmetic. For each model
and size (``--sizes`` rows x ``--features``, 4 partitions, cached and counted before any timing) the script
fits, in rotation, ``--repeats`` times:

* ``pyspark.ml``: the stock estimator at its defaults (GeneralizedLinearRegression: Poisson, log link);
* ``sparkml default``: this library's estimator at its defaults (``strategy="auto"``: one barrier stage);
* ``sparkml sync``: the same with ``strategy="sync"`` (a Spark job per pass; what ``auto`` runs where no
  barrier stage can).

Every fit converts its DataFrame, as a first fit does (``spark.sparkml.conversionCache.enabled=false``;
``bench_refit.py`` measures refits that reuse it). KernelSVC has no pyspark.ml counterpart: its row compares it
with pyspark.ml's ``LinearSVC`` on the same rows. One warm-up round is not counted. The table gives the median
seconds of each and the Spark jobs of that fit, and the ratio to pyspark.ml's median.

    .venv/bin/python benchmarks/bench_small.py                     # 500, 5,000 and 50,000 rows x 10
    .venv/bin/python benchmarks/bench_small.py --sizes 500 --models logistic --repeats 3

Writes benchmarks/results/small.json (or ``--out``).
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report

MODELS = ("logistic", "svc", "linear", "glr", "kernel_svc")
NAMES = {
    "logistic": "LogisticRegression",
    "svc": "LinearSVC",
    "linear": "LinearRegression",
    "glr": "GeneralizedLinearRegression",
    "kernel_svc": "KernelSVC",
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="500,5000,50000", help="rows, comma-separated")
    p.add_argument("--features", type=int, default=10)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeatable)")
    p.add_argument("--out", default="benchmarks/results/small.json")
    args = p.parse_args(argv)
    args.sizes = [int(v) for v in args.sizes.split(",")]
    args.models = args.models.split(",")
    unknown = sorted(set(args.models) - set(MODELS))
    if unknown:
        p.error(f"unknown models {unknown}; choose from {', '.join(MODELS)}")
    return args


def make_session(args):
    os.environ["PYSPARK_PYTHON"] = sys.executable  # Spark's Python workers must use this venv
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for setting in args.conf:
        key, _, value = setting.partition("=")
        builder = builder.config(key, value)
    spark = (
        builder.master(args.master)
        .appName("bench_small")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.retainedJobs", "1000000")  # the status store counts the jobs (JobCounter)
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(args.partitions))
        .config("spark.sparkml.conversionCache.enabled", "false")  # every fit converts, as a first fit does
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def frame(spark, rows, d, partitions, seed):
    """A cached DataFrame of ``features`` (dense vectors) and three labels: ``binary`` (logistic truth),
    ``value`` (linear truth plus noise) and ``count`` (Poisson with a log link)."""
    from pyspark.ml.linalg import Vectors

    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, d))
    beta = rng.normal(size=d) / np.sqrt(d)
    eta = x @ beta
    binary = (rng.random(rows) < 1 / (1 + np.exp(-eta))).astype(float)
    value = eta + 0.5 * rng.normal(size=rows)
    count = rng.poisson(np.exp(0.5 * eta)).astype(float)
    data = [(Vectors.dense(r), float(b), float(v), float(c)) for r, b, v, c in zip(x, binary, value, count)]
    df = spark.createDataFrame(data, ["features", "binary", "value", "count"]).repartition(partitions).cache()
    assert df.count() == rows
    return df


def estimators(model):
    """{impl: a fresh estimator} for ``model`` (module docstring)."""
    import pyspark.ml.classification as mc
    import pyspark.ml.regression as mr

    import sparkml.classification as sc
    import sparkml.regression as sr

    if model == "logistic":
        stock, ours, label = mc.LogisticRegression, sc.LogisticRegression, "binary"
    elif model == "svc":
        stock, ours, label = mc.LinearSVC, sc.LinearSVC, "binary"
    elif model == "linear":
        stock, ours, label = mr.LinearRegression, sr.LinearRegression, "value"
    elif model == "glr":
        poisson = {"family": "poisson", "link": "log", "labelCol": "count"}
        return {
            "pyspark.ml": lambda: mr.GeneralizedLinearRegression(**poisson),
            "sparkml default": lambda: sr.GeneralizedLinearRegression(**poisson),
            "sparkml sync": lambda: sr.GeneralizedLinearRegression(strategy="sync", **poisson),
        }
    else:  # KernelSVC: pyspark.ml has none; its LinearSVC is the stock fit of the same rows
        stock, ours, label = mc.LinearSVC, sc.KernelSVC, "binary"
    return {
        "pyspark.ml": lambda: stock(labelCol=label),
        "sparkml default": lambda: ours(labelCol=label),
        "sparkml sync": lambda: ours(labelCol=label, strategy="sync"),
    }


class JobCounter:
    """The Spark jobs an application ran, from its status store (works with the UI off; it keeps
    ``spark.ui.retainedJobs`` of them, set high by ``make_session``)."""

    def __init__(self, spark):
        self.store = spark.sparkContext._jsc.sc().statusStore()

    def count(self):
        return int(self.store.jobsList(None).size())


def timed_fit(make, df, jobs):
    before = jobs.count()
    t = time.perf_counter()
    make().fit(df)
    seconds = time.perf_counter() - t
    time.sleep(0.2)  # the status store records a job's end asynchronously
    return seconds, jobs.count() - before


def measure(spark, df, model, repeats):
    """{impl: [(seconds, jobs) per repeat]} after one uncounted round."""
    makes = estimators(model)
    jobs = JobCounter(spark)
    for make in makes.values():
        make().fit(df)
    runs = {impl: [] for impl in makes}
    for _ in range(repeats):
        for impl, make in makes.items():
            runs[impl].append(timed_fit(make, df, jobs))
    return runs


def median_of(runs):
    seconds = statistics.median(s for s, _ in runs)
    jobs = sorted(runs)[(len(runs) - 1) // 2][1]  # the median-time fit's jobs
    return seconds, jobs


def main(argv=None):
    args = parse_args(argv)
    spark = make_session(args)
    results, rows = [], []
    for size in args.sizes:
        df = frame(spark, size, args.features, args.partitions, args.seed)
        for model in args.models:
            runs = measure(spark, df, model, args.repeats)
            med = {impl: median_of(r) for impl, r in runs.items()}
            stock_s = med["pyspark.ml"][0]
            results.append({"model": NAMES[model], "rows": size, "runs": runs, "median": med})
            rows.append(
                [
                    NAMES[model] + (" (vs LinearSVC)" if model == "kernel_svc" else ""),
                    f"{size:,}",
                    f"{stock_s:.2f} ({med['pyspark.ml'][1]})",
                    f"{med['sparkml default'][0]:.2f} ({med['sparkml default'][1]})",
                    f"**{med['sparkml default'][0] / stock_s:.2f}x**",
                    f"{med['sparkml sync'][0]:.2f} ({med['sparkml sync'][1]})",
                    f"**{med['sparkml sync'][0] / stock_s:.2f}x**",
                ]
            )
            print(" | ".join(rows[-1]), flush=True)
        df.unpersist()
    spark.stop()
    head = ["model", "rows", "pyspark.ml s (jobs)", "default s (jobs)", "ratio", "sync s (jobs)", "sync ratio"]
    report.write(
        args.out,
        f"Small fits: {args.features} features, {args.partitions} partitions, median of {args.repeats}",
        report.markdown_table(head, rows),
        {"args": vars(args), "results": results},
        notes=(
            "Seconds of a whole `fit` of a cached DataFrame (every fit converts it), the Spark jobs of the median "
            "fit in brackets; ratio: over pyspark.ml's median in the same session. `default` is "
            '`strategy="auto"` (one barrier stage), `sync` a Spark job per pass. KernelSVC runs at its defaults '
            "and is compared with pyspark.ml's LinearSVC on the same rows (MLlib has no kernel SVM)."
        ),
    )


if __name__ == "__main__":
    main()
