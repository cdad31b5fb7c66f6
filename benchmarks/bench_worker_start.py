"""What a fit pays for its Python workers' start: pyspark's worker daemon against ``sparkml.worker_daemon``.

Spark's Python workers fork from a daemon; a new worker imports torch for its first task of this library. That
happens at an application's first fit and again after the workers sat idle for about a minute (Spark stops idle
workers). For each daemon, in a session of its own (``spark.python.daemon.module`` unset, then set to
``sparkml.worker_daemon``), on the same cached rows (``--rows`` x ``--features``, ``--partitions``):

* ``first fit``: the application's first fit (its workers start);
* ``warm fit``: the median of ``--repeats`` fits right after (workers running);
* ``after idle``: a fit after ``--idle`` seconds without a task (its workers stopped and started again);
* ``pyspark.ml warm``: pyspark.ml's own estimator, median of ``--repeats`` fits in the same session, for scale.

    .venv/bin/python benchmarks/bench_worker_start.py                      # LogisticRegression, then KernelSVC
    .venv/bin/python benchmarks/bench_worker_start.py --models logistic --idle 70

Writes benchmarks/results/worker_start.json (or ``--out``).
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report

DAEMONS = {"pyspark.daemon (Spark's default)": None, "sparkml.worker_daemon": "sparkml.worker_daemon"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="logistic,kernel_svc", help="comma-separated, of logistic, kernel_svc")
    p.add_argument("--rows", type=int, default=20000)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--idle", type=float, default=75.0, help="seconds without a task before the last fit")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--out", default="benchmarks/results/worker_start.json")
    args = p.parse_args(argv)
    args.models = args.models.split(",")
    return args


def session(args, daemon):
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(args.master)
        .appName("bench_worker_start")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sparkml.conversionCache.enabled", "false")  # every fit converts, as a first fit does
    )
    if daemon:
        builder = builder.config("spark.python.daemon.module", daemon)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def frame(spark, args):
    from pyspark.ml.linalg import Vectors

    rng = np.random.default_rng(3)
    x = rng.normal(size=(args.rows, args.features))
    y = (x @ rng.normal(size=args.features) + rng.normal(size=args.rows) > 0).astype(float)
    rows = [(Vectors.dense(x[i]), float(y[i])) for i in range(args.rows)]
    df = spark.createDataFrame(rows, ["features", "label"]).repartition(args.partitions).cache()
    df.count()  # a JVM-only job: no Python worker starts
    return df


def estimators(model):
    from pyspark.ml.classification import LinearSVC
    from pyspark.ml.classification import LogisticRegression as StockLR

    from sparkml.classification import KernelSVC, LogisticRegression

    if model == "logistic":
        return LogisticRegression, StockLR
    return KernelSVC, LinearSVC  # MLlib has no kernel SVM: its LinearSVC for scale


def timed(est, df):
    began = time.perf_counter()
    est.fit(df)
    return time.perf_counter() - began


def measure(args, daemon, model):
    spark = session(args, daemon)
    try:
        df = frame(spark, args)
        ours, stock = estimators(model)
        first = timed(ours(), df)
        warm = statistics.median(timed(ours(), df) for _ in range(args.repeats))
        stock_warm = statistics.median(timed(stock(), df) for _ in range(args.repeats + 1))  # first: JVM warm-up
        time.sleep(args.idle)
        after_idle = timed(ours(), df)
    finally:
        spark.stop()
    return {"first": first, "warm": warm, "after_idle": after_idle, "pyspark_ml_warm": stock_warm}


def main(argv=None):
    args = parse_args(argv)
    results, rows = [], []
    for model in args.models:
        for name, daemon in DAEMONS.items():
            got = measure(args, daemon, model)
            results.append({"model": model, "daemon": name, **got})
            rows.append(
                [
                    "LogisticRegression" if model == "logistic" else "KernelSVC",
                    name,
                    f"{got['first']:.2f}",
                    f"{got['warm']:.2f}",
                    f"{got['after_idle']:.2f}",
                    f"**{got['after_idle'] - got['warm']:+.2f}**",
                    f"{got['pyspark_ml_warm']:.2f}",
                ]
            )
            print(" | ".join(rows[-1]), flush=True)
    head = ["model", "worker daemon", "first fit s", "warm fit s", "after idle s", "idle cost s", "pyspark.ml warm s"]
    report.write(
        args.out,
        f"Python workers' start: {args.rows:,} rows x {args.features}, {args.partitions} partitions, {args.master}",
        report.markdown_table(head, rows),
        {"args": vars(args), "results": results},
        notes=(
            "Seconds of a whole `fit` (every fit converts its cached DataFrame). after idle: a fit after "
            f"{args.idle:g} s without a task, when Spark has stopped the workers; idle cost: after idle minus warm. "
            "pyspark.ml warm: its LogisticRegression (its LinearSVC beside KernelSVC) in the same session, for scale."
        ),
    )


if __name__ == "__main__":
    main()
