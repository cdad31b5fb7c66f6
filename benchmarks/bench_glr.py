"""GeneralizedLinearRegression: pyspark.ml's against sparkml's, in one session on the same rows.

Two problems at the estimators' defaults (maxIter 25, tol 1e-6), each with an exposure offset o = log(exposure),
exposure ~ U(0.5, 1.5), and features x_j = mu_j + sigma_j N(0, 1) of different scales:

* ``poisson``: y ~ Poisson(exp(x . beta + b + o)), family poisson, link log;
* ``tweedie``: y ~ Tweedie(mu = exp(x . beta + b + o), variance power 1.5, dispersion 1), the compound
  Poisson-gamma law of insurance pure premiums (N ~ Poisson(2 sqrt(mu)) claims of Gamma(1, sqrt(mu) / 2)
  each), family tweedie with variancePower 1.5 and linkPower 0 (log).

    .venv/bin/python benchmarks/bench_glr.py --quick   # 100k x 100 smoke run
    .venv/bin/python benchmarks/bench_glr.py           # 1M x 100, both problems

Prints a table (fit seconds, the ratio to pyspark.ml's, IRLS iterations, the largest relative difference of
the coefficients and intercept from pyspark.ml's) and writes JSON (default ``benchmarks/results/glr.json``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_linear
import report

PROBLEMS = {  # name: the estimators' Params
    "poisson": dict(family="poisson", link="log", offsetCol="offset"),
    "tweedie": dict(family="tweedie", variancePower=1.5, linkPower=0.0, offsetCol="offset"),
}
IMPLS = ("pyspark.ml", "sparkml")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bench_linear.add_data_args(p, "glr", repeats=2)
    p.add_argument("--problems", default=",".join(PROBLEMS), help=f"which of {tuple(PROBLEMS)}")
    p.add_argument("--quick", action="store_true", help="100k rows: a smoke run")
    args = p.parse_args(argv)
    if args.quick:
        args.rows = 100_000
    args.problems = [s for s in args.problems.split(",") if s]
    args.reg_param = 0.0
    args.out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "glr.json")
    return args


def generate(spark, rows, d, partitions, seed, problem):
    """A cached (label, offset, features) DataFrame made on the executors (module docstring)."""
    import pyarrow as pa
    from pyspark.ml.functions import array_to_vector
    from pyspark.sql import functions as F

    truth = np.random.default_rng(seed)
    mu, sigma = truth.normal(0, 1, d), truth.uniform(0.2, 3.0, d)
    beta = 0.5 * truth.normal(0, 1, d) / (sigma * np.sqrt(d))
    b = -0.5 - float(mu @ beta)

    def make(batches):
        for batch in batches:
            ids = batch.column("id").to_numpy()
            if len(ids) == 0:
                continue
            rng = np.random.default_rng([seed, int(ids[0])])
            x = mu + sigma * rng.standard_normal((len(ids), d))
            offset = np.log(rng.uniform(0.5, 1.5, len(ids)))
            mean = np.exp(x @ beta + b + offset)
            if problem == "poisson":
                y = rng.poisson(mean).astype(np.float64)
            else:  # compound Poisson-gamma, p = 1.5, phi = 1: N ~ Poisson(2 sqrt(mu)), claims ~ Gamma(1, sqrt(mu)/2)
                claims = rng.poisson(2.0 * np.sqrt(mean))
                y = np.where(claims > 0, rng.gamma(np.maximum(claims, 1), 0.5 * np.sqrt(mean)), 0.0)
            offsets = pa.array(np.arange(0, len(ids) * d + 1, d, dtype=np.int32))
            yield pa.RecordBatch.from_arrays(
                [pa.array(y), pa.array(offset), pa.ListArray.from_arrays(offsets, pa.array(x.ravel()))],
                names=["label", "offset", "features"],
            )

    df = (
        spark.range(0, rows, numPartitions=partitions)
        .mapInArrow(make, "label double, offset double, features array<double>")
        .select("label", "offset", array_to_vector(F.col("features")).alias("features"))
        .cache()
    )
    assert df.count() == rows
    return df


def fit(df, impl, params):
    if impl == "pyspark.ml":
        from pyspark.ml.regression import GeneralizedLinearRegression
    else:
        from sparkml.regression import GeneralizedLinearRegression
    t0 = time.perf_counter()
    model = GeneralizedLinearRegression(**params).fit(df)
    seconds = time.perf_counter() - t0
    return {
        "impl": impl,
        "seconds": seconds,
        "iterations": model.summary.numIterations,
        "estimates": np.append(model.coefficients.toArray(), model.intercept).tolist(),
    }


def table(rows):
    head = ["problem", "impl", "fit s", "ratio", "IRLS iterations", "max coef rel diff"]
    body = [
        [
            r["problem"],
            r["impl"],
            f"{r['seconds']:.2f}",
            f"{r['ratio']:.3f}",
            str(r["iterations"]),
            f"{r['max_rel_diff']:.1e}",
        ]
        for r in rows
    ]
    return report.markdown_table(head, body)


def main(argv=None):
    args = parse_args(argv)
    spark = bench_linear.make_session(args)
    env = bench_linear.environment(spark, args)
    env["problems"] = args.problems
    print(f"GeneralizedLinearRegression: {args.rows} x {args.features}, {args.partitions} partitions", flush=True)
    rows, runs = [], {}
    for problem in args.problems:
        df = generate(spark, args.rows, args.features, args.partitions, args.seed, problem)
        runs[problem] = {impl: [] for impl in IMPLS}
        for rep in range(args.repeats):
            for impl in IMPLS:
                r = fit(df, impl, PROBLEMS[problem])
                runs[problem][impl].append(r)
                seconds, iterations = r["seconds"], r["iterations"]
                print(f"  {problem} repeat {rep}: {impl}: {seconds:.2f} s, {iterations} iterations", flush=True)
        best = {impl: min(runs[problem][impl], key=lambda r: r["seconds"]) for impl in IMPLS}
        reference = np.array(best["pyspark.ml"]["estimates"])
        for impl in IMPLS:
            r = dict(best[impl], problem=problem)
            r["ratio"] = r["seconds"] / best["pyspark.ml"]["seconds"]
            diff = np.abs(np.array(r["estimates"]) - reference) / np.maximum(np.abs(reference), 1e-12)
            r["max_rel_diff"] = float(diff.max())
            rows.append(r)
        df.unpersist()
    env["load_avg_at_end"] = os.getloadavg()
    title = f"GeneralizedLinearRegression, {args.rows:,} x {args.features} with an exposure offset, at defaults"
    notes = (
        f"Ratio: fit seconds over pyspark.ml's in the same run (the fastest of {args.repeats}); the coefficients' "
        "and intercept's largest relative difference from pyspark.ml's."
    )
    report.write(args.out, title, table(rows), {"environment": env, "summary": rows, "runs": runs}, notes)
    spark.stop()


if __name__ == "__main__":
    main()
