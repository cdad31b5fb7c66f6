"""Scoring: `transform` of the linear models, sparkml vs pyspark.ml (MLlib) on the same coefficients.

A cached rows x features DataFrame (bench_linear's generator), one model per case with the same
coefficients in both libraries (ours built from them, MLlib's by ``toSpark()``), and every output column
computed: each run sums rawPrediction and probability (all their elements) and prediction over all rows
in one Spark job. Timed per library: ``default`` (sparkml's transform as a user gets it: the stock model's
own transform, in the JVM) and ``python workers`` (the Arrow + torch path sparkml uses where a Spark
Connect server cannot load the stock model, and for KernelSVC). The runs rotate; the table shows the
median of ``--repeats`` and the ratio to MLlib in the same run.

    .venv/bin/python benchmarks/bench_transform.py            # 1M x 100, binary and 3-class LogisticRegression
    .venv/bin/python benchmarks/bench_transform.py --quick    # 100k rows
    .venv/bin/python benchmarks/bench_transform.py --kernel-svc 1000 --features 20   # KernelSVC, 1000 landmarks

``--kernel-svc M``: instead, KernelSVC's transform (there is no MLlib counterpart): a model with M k-means
landmarks (rbf, gamma 'scale', ``probability=True``) fitted on the first 20,000 rows, then every output
column of all rows summed per run, as above; rows per second.

Writes benchmarks/results/transform.json (or ``--out``).
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report
from bench_linear import add_data_args, start


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_data_args(p, "transform", repeats=5)
    p.add_argument("--quick", action="store_true", help="100k rows, 3 repeats")
    p.add_argument(
        "--kernel-svc",
        type=int,
        default=0,
        metavar="M",
        help="time KernelSVC's transform with M landmarks instead (module docstring)",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.rows, args.repeats = 100_000, 3
    args.reg_param = None
    return args


def models(d, seed):
    """{case: our LogisticRegressionModel}, coefficients drawn at random."""
    from pyspark.ml.linalg import DenseMatrix, DenseVector

    from sparkml.classification import LogisticRegressionModel

    rng = np.random.default_rng(seed)
    out = {}
    for case, k in (("binary", 1), ("3 classes", 3)):
        coef = rng.normal(0, 1 / np.sqrt(d), (k, d))
        out[case] = LogisticRegressionModel(
            DenseMatrix(k, d, coef.ravel(), True),
            DenseVector(rng.normal(0, 0.5, k)),
            numClasses=max(2, k),
            isMultinomial=k > 1,
        )
    return out


def python_scoring(model):
    """A copy of ``model`` that scores in Python workers (what a Connect server that cannot load the stock
    model gets)."""
    copy = model.copy()
    copy._scoring = None  # copy() shares the original's cached stock model
    copy._stock_for = lambda spark: None
    return copy


def score_everything(transformed):
    """One job: the sum of every element of every output column."""
    from pyspark.ml.functions import vector_to_array
    from pyspark.sql import functions as F

    def total(c):
        return F.sum(F.aggregate(vector_to_array(F.col(c)), F.lit(0.0), lambda acc, v: acc + v))

    row = transformed.select(total("rawPrediction"), total("probability"), F.sum("prediction")).first()
    return [float(v) for v in row]


def kernel_svc(spark, df, args, env, gen_s):
    """KernelSVC's transform: seconds per run and rows per second (no MLlib counterpart)."""
    from sparkml.classification import KernelSVC

    t = time.perf_counter()
    model = KernelSVC(numLandmarks=args.kernel_svc, probability=True, maxIter=20).fit(df.limit(20_000).cache())
    fit_s = time.perf_counter() - t
    score_everything(model.transform(df))  # warm: workers, plans
    seconds = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        score_everything(model.transform(df))
        seconds.append(time.perf_counter() - t)
    spark.stop()
    med = float(np.median(seconds))
    row = {
        "case": f"KernelSVC, {model.numLandmarksUsed} landmarks",
        "scorer": "sparkml python workers",
        "median_s": med,
        "runs_s": seconds,
        "rows_per_s": args.rows / med,
        "fit_s_on_20k_rows": fit_s,
    }
    title = (
        f"KernelSVC transform of {args.rows:,} x {args.features} (every output column summed), median of {args.repeats}"
    )
    table = f"| case | seconds | rows/s |\n|---|---|---|\n| {row['case']} | {med:.2f} | {row['rows_per_s']:,.0f} |"
    out = args.out or os.path.join(report.RESULTS, "transform_kernel_svc.json")
    report.write(out, title, table, {"environment": env, "generation_s": gen_s, "rows": [row]})


def main(argv=None):
    args = parse_args(argv)
    spark, env, df, gen_s = start(args)
    if args.kernel_svc:
        return kernel_svc(spark, df, args, env, gen_s)
    runs = {}
    sums = {}
    for case, ours in models(args.features, args.seed).items():
        scorers = {"MLlib": ours.toSpark(), "sparkml default": ours, "sparkml python workers": python_scoring(ours)}
        for name, model in scorers.items():
            sums[case, name] = score_everything(model.transform(df))  # warm: workers, plans, the JIT
        for _ in range(args.repeats):
            for name, model in scorers.items():
                t = time.perf_counter()
                score_everything(model.transform(df))
                runs.setdefault(case, {}).setdefault(name, []).append(time.perf_counter() - t)
    spark.stop()
    rows = []
    for case, by_name in runs.items():
        mllib = float(np.median(by_name["MLlib"]))
        for name, seconds in by_name.items():
            med = float(np.median(seconds))
            agree = float(np.max(np.abs(np.array(sums[case, name]) - np.array(sums[case, "MLlib"]))))
            rows.append(
                {
                    "case": case,
                    "scorer": name,
                    "median_s": med,
                    "runs_s": seconds,
                    "ratio": med / mllib,
                    "rows_per_s": args.rows / med,
                    "sums_difference_from_mllib": agree,
                }
            )
    title = f"transform of {args.rows:,} x {args.features} (every output column summed), median of {args.repeats}"
    table = (
        "| case | scorer | seconds | ours / MLlib | rows/s | max diff of column sums |\n|---|---|---|---|---|---|\n"
        + "\n".join(
            f"| {r['case']} | {r['scorer']} | {r['median_s']:.2f} | {r['ratio']:.2f} | "
            f"{r['rows_per_s']:,.0f} | {r['sums_difference_from_mllib']:.1e} |"
            for r in rows
        )
    )
    out = args.out or os.path.join(report.RESULTS, "transform.json")
    report.write(
        out,
        title,
        table,
        {"environment": env, "generation_s": gen_s, "rows": rows},
        "sparkml default: what a user gets (the stock model's transform, in the JVM); python workers: the "
        "Python scoring path KernelSVC uses.",
    )


if __name__ == "__main__":
    main()
