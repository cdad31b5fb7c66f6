"""Sparse, high-dimensional LogisticRegression: pyspark.ml (MLlib) vs sparkml at default settings, same data.

The workload of click-through-rate and text models: hashed one-hot features read from a LIBSVM file.

* data: ``--rows`` rows of ``--fields`` categorical fields, each hashed to one of ``--features`` columns
  (value 1), plus 4 numeric columns (standard normal) in every row: about ``fields + 4`` nonzeros a row.
  Labels ~ Bernoulli(sigmoid(x . beta + b)) with beta_j ~ N(0, 0.3^2). Written as LIBSVM text files
  (one per ``--partitions``), read with ``spark.read.format("libsvm")``, cached and counted before
  any fit. Generation, writing and caching are in no fit.
* fits: ``LogisticRegression(regParam=...)`` of pyspark.ml and of sparkml, each at its defaults (MLlib's
  maxIter 100, tol 1e-6, standardization on; sparkml's strategy and dtype defaults), in rotation,
  ``--repeats`` times; the median-time fit of each is tabulated.
* columns as in ``bench_linear.py``: fit seconds, iterations, seconds per iteration, setup (sparkml:
  conversion and statistics; MLlib: up to its first loss evaluation), time for sparkml to reach MLlib's
  final objective (relative 1e-9) and its ratio to MLlib's fit time, and the relative difference of
  the coefficients.

Prints a table and writes JSON (``benchmarks/results/sparse.json``). Usage:

    .venv/bin/python benchmarks/bench_sparse.py                      # 500k x 2^20, ~34 nonzeros a row
    .venv/bin/python benchmarks/bench_sparse.py --rows 50000 --repeats 1   # a smoke run
"""

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report
from bench_linear import REL_TOL, environment, fit_mllib, fit_ours, make_session, median_run, table

NUMERIC = 4


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=500_000)
    p.add_argument("--features", type=int, default=1 << 20, help="columns the fields are hashed into")
    p.add_argument("--fields", type=int, default=30, help="categorical fields: one-hot nonzeros a row")
    p.add_argument("--partitions", type=int, default=2, help="LIBSVM files written, one partition each")
    p.add_argument("--reg-param", type=float, default=1e-4)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="8g")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "sparse.json"))
    return p.parse_args(argv)


def hashed_rows(rows, features, fields, rng):
    """(columns (rows, NUMERIC + fields) strictly increasing in each row, values): 4 numeric columns
    first, then each field's hashed column, redrawn where two fields of a row collide."""
    cols = rng.integers(NUMERIC, features, size=(rows, fields))
    while True:
        cols.sort(axis=1)
        clash = np.zeros_like(cols, dtype=bool)
        clash[:, 1:] = cols[:, 1:] == cols[:, :-1]
        if not clash.any():
            break
        cols[clash] = rng.integers(NUMERIC, features, size=int(clash.sum()))
    cols = np.hstack([np.broadcast_to(np.arange(NUMERIC), (rows, NUMERIC)), cols])
    values = np.ones(cols.shape)
    values[:, :NUMERIC] = rng.standard_normal((rows, NUMERIC))
    return cols, values


def write_libsvm(directory, args):
    """Write the data as ``--partitions`` LIBSVM files under ``directory``; (rows written, nonzeros)."""
    truth = np.random.default_rng(args.seed)
    beta = truth.normal(0, 0.3, args.features)
    b = -0.5
    per_file = -(-args.rows // args.partitions)
    nnz = 0
    for part in range(args.partitions):
        n = min(per_file, args.rows - part * per_file)
        rng = np.random.default_rng([args.seed, part])
        cols, values = hashed_rows(n, args.features, args.fields, rng)
        margin = (values * beta[cols]).sum(1) + b
        y = (rng.random(n) < 1 / (1 + np.exp(-margin))).astype(int)
        nnz += cols.size
        pairs = np.char.add(np.char.add((cols + 1).astype(str), ":"), np.char.mod("%.6g", values))
        lines = [f"{label} " + " ".join(row) for label, row in zip(y, pairs)]
        with open(os.path.join(directory, f"part-{part:05d}.libsvm"), "w") as f:
            f.write("\n".join(lines) + "\n")
    return args.rows, nnz


def main(argv=None):
    args = parse_args(argv)
    spark = make_session(args)
    args.configs = [("auto", "float32")]  # the defaults: environment() records them
    env = environment(spark, args)
    env["fields"] = args.fields
    with tempfile.TemporaryDirectory(prefix="bench-sparse-") as directory:
        t0 = time.perf_counter()
        rows, nnz = write_libsvm(directory, args)
        write_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        df = spark.read.format("libsvm").option("numFeatures", args.features).load(directory).cache()
        assert df.count() == rows
        env.update(write_s=write_s, read_and_cache_s=time.perf_counter() - t0, nnz=nnz)
        env["input_partitions"] = df.rdd.getNumPartitions()
        print(
            f"{rows:,} x {args.features:,}, {nnz / rows:.1f} nonzeros a row, {env['input_partitions']} partitions: "
            f"written in {write_s:.1f} s, read and cached in {env['read_and_cache_s']:.1f} s",
            flush=True,
        )
        runs = {"mllib": [], "sparkml": []}
        for rep in range(args.repeats):
            r, mllib_coef = fit_mllib(spark, df, "logistic", args.reg_param)
            target = r["final_objective"] * (1 + REL_TOL)
            runs["mllib"].append(r)
            ours, coef = fit_ours(spark, df, "logistic", args.reg_param, "auto", "float32", target)
            ours["coef_rel_diff"] = float(np.linalg.norm(coef - mllib_coef) / np.linalg.norm(mllib_coef))
            runs["sparkml"].append(ours)
            print(
                f"  repeat {rep}: MLlib {r['fit_s']:.2f} s ({r['iterations']} iterations), sparkml "
                f"{ours['fit_s']:.2f} s ({ours['iterations']} iterations)",
                flush=True,
            )
        df.unpersist()
    rows_out = [median_run(runs["mllib"]), median_run(runs["sparkml"])]
    rows_out[0]["time_to_mllib_objective_s"] = rows_out[0]["fit_s"]
    for r in rows_out:
        r["ratio_vs_mllib"] = r["time_to_mllib_objective_s"] / rows_out[0]["fit_s"]
    title = (
        f"LogisticRegression(regParam={args.reg_param:g}) at defaults on sparse rows: {args.rows:,} x "
        f"{args.features:,}, {nnz / args.rows:.0f} nonzeros a row (LIBSVM), {env['input_partitions']} partitions, "
        f"{args.master}: pyspark.ml against sparkml, median of {args.repeats}"
    )
    notes = (
        "ratio: time for sparkml to reach MLlib's final objective (relative 1e-9) over MLlib's fit time; "
        "* never reached (whole fit). Writing, reading and caching the LIBSVM files are in no fit."
    )
    strip = ("objective_history", "iteration_ends_s", "jobs")
    payload = {
        "environment": env,
        "summary": [{k: v for k, v in r.items() if k not in strip} for r in rows_out],
        "runs": runs,
    }
    report.write(args.out, title, table(rows_out, rows_out[0]["fit_s"]), payload, notes)
    spark.stop()


if __name__ == "__main__":
    main()
