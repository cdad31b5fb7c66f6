"""Binary LogisticRegression: pyspark.ml (MLlib) vs sparkml (PyTorch on the executors), same data, same session.

What it measures, on a synthetic dense problem (rows x features, `--partitions` partitions):

* generation: the data is made on the executors (spark.range + mapInArrow seeded by row id, then
  array_to_vector), cached as a `VectorUDT` column and counted. Timed apart; in neither fit.
* MLlib: wall seconds of `fit()`, iterations, seconds per iteration (fit / iterations, fixed costs
  included), final objective (summary.objectiveHistory[-1]); from Spark's REST API (job times):
  setup s = fit start -> first loss-evaluation job (summarizer pass, blocks), iter s = first ->
  last loss job's end / iterations.
* sparkml (`strategy="sync"`, float64 and float32): the same, plus, from its per-iteration INFO log
  lines on logger "sparkml" (timestamped relative to the start of `fit()`):
    - setup s: fit start -> first iteration line, minus the optimizer time that line reports
      (the one-off JVM -> Python conversion and statistics pass);
    - iter s: mean seconds per iteration after the first (first -> last iteration line);
    - time to MLlib's objective: first iteration line whose objective (summary.objectiveHistory[k])
      is <= MLlib's final objective * (1 + 1e-9); the whole fit, flagged "*", when never reached.
  ratio = that time / MLlib's fit time; |coef diff| = ||(coef, b) - MLlib's|| / ||MLlib's||.

Prints a table and writes a JSON with every number and the environment. `--repeats N` runs the
three fits N times in rotation and tabulates the median-time run of each. Usage:

    .venv/bin/python benchmarks/bench_logistic.py --quick           # 100k rows, smoke run
    .venv/bin/python benchmarks/bench_logistic.py                   # 1M x 100, local[2]
"""
import argparse
import json
import logging
import os
import platform
import sys
import time

import numpy as np

REL_TOL = 1e-9
LOG_LINE = "LogisticRegression iteration"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--features", type=int, default=100)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--reg-param", type=float, default=0.01)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="8g")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--dtype", default="float64", choices=["float64", "float32"],
                   help="dtype of sparkml's first row; a float32 row is always added")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", default="benchmarks/results/logistic.json")
    p.add_argument("--quick", action="store_true", help="100k rows: a smoke run")
    args = p.parse_args(argv)
    if args.quick:
        args.rows = 100_000
    return args


def make_session(args):
    os.environ["PYSPARK_PYTHON"] = sys.executable  # Spark's Python workers must use this venv
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(args.master).appName("bench_logistic")
             .config("spark.driver.memory", args.driver_memory)
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(args.partitions))
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    return spark


def generate(spark, rows, d, partitions, seed):
    """A cached (label, features: VectorUDT) DataFrame made on the executors, and its true model.

    x_j = mu_j + sigma_j * N(0, 1) (features of different scales, so standardization matters);
    y ~ Bernoulli(sigmoid(x . beta + b)). Rows depend only on (seed, row id of the Arrow batch).
    """
    import pyarrow as pa
    from pyspark.ml.functions import array_to_vector
    from pyspark.sql import functions as F

    truth = np.random.default_rng(seed)
    mu, sigma = truth.normal(0, 1, d), truth.uniform(0.2, 3.0, d)
    beta = truth.normal(0, 1, d) / (sigma * np.sqrt(d))
    b = 0.3 - float(mu @ beta)

    def make(batches):
        for batch in batches:
            ids = batch.column("id").to_numpy()
            if len(ids) == 0:
                continue
            rng = np.random.default_rng([seed, int(ids[0])])
            x = mu + sigma * rng.standard_normal((len(ids), d))
            y = (rng.random(len(ids)) < 1 / (1 + np.exp(-(x @ beta + b)))).astype(np.float64)
            offsets = pa.array(np.arange(0, len(ids) * d + 1, d, dtype=np.int32))
            yield pa.RecordBatch.from_arrays([pa.array(y), pa.ListArray.from_arrays(offsets, pa.array(x.ravel()))],
                                             names=["label", "features"])

    df = (spark.range(0, rows, numPartitions=partitions)
          .mapInArrow(make, "label double, features array<double>")
          .select("label", array_to_vector(F.col("features")).alias("features"))
          .cache())
    n = df.count()
    assert n == rows, (n, rows)
    return df, beta, b


class IterationLog(logging.Handler):
    """Records (seconds since `start`, iteration, reported seconds) of each sparkml iteration line."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.start, self.lines = time.perf_counter(), []

    def reset(self):
        self.start, self.lines = time.perf_counter(), []

    def emit(self, record):
        msg = record.getMessage()
        if msg.startswith(LOG_LINE):  # "... iteration k: objective F, gradient norm G, S s"
            k = int(msg[len(LOG_LINE):].split(":")[0])
            seconds = float(msg.rsplit(",", 1)[1].split()[0])
            self.lines.append((time.perf_counter() - self.start, k, seconds))


def coef_vector(model):
    return np.append(model.coefficients.toArray(), model.intercept)


def spark_jobs(spark, epoch0):
    """[{name, start_s, seconds}] of the Spark jobs submitted since ``epoch0`` (Spark's REST API)."""
    import urllib.request
    from datetime import datetime

    def epoch(stamp):  # "2026-11-21T10:56:09.706GMT"
        return datetime.strptime(stamp.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()

    sc = spark.sparkContext
    try:
        with urllib.request.urlopen(f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/jobs", timeout=10) as f:
            jobs = [(j["name"], epoch(j["submissionTime"]), epoch(j["completionTime"])) for j in json.load(f)
                    if "completionTime" in j]
    except (OSError, ValueError, KeyError) as exc:  # UI disabled or unreachable: no job split
        print(f"  (no Spark job timings: {exc})", flush=True)
        return []
    return [{"name": n, "start_s": a - epoch0, "seconds": b - a} for n, a, b in sorted(jobs, key=lambda j: j[1])
            if a >= epoch0 - 0.01]


def fit(spark, df, estimator, impl, dtype):
    """Fit once; the common record (wall time, iterations, objective, Spark jobs) and (coef, b)."""
    t0, epoch0 = time.perf_counter(), time.time()
    model = estimator.fit(df)
    fit_s = time.perf_counter() - t0
    it, hist = model.summary.totalIterations, list(model.summary.objectiveHistory)
    return {"impl": impl, "strategy": "sync" if impl == "sparkml" else "-", "dtype": dtype, "fit_s": fit_s,
            "iterations": it, "s_per_iter": fit_s / max(it, 1), "final_objective": hist[-1],
            "objective_history": hist, "jobs": spark_jobs(spark, epoch0)}, coef_vector(model)


def fit_mllib(spark, df, reg):
    from pyspark.ml.classification import LogisticRegression

    r, coef = fit(spark, df, LogisticRegression(regParam=reg), "pyspark.ml", "float64")
    loss = [j for j in r["jobs"] if "RDDLossFunction" in j["name"]]  # one job per L-BFGS evaluation
    if loss:
        r["setup_s"] = loss[0]["start_s"]  # summarizer pass + standardized, cached blocks
        r["evaluations"] = len(loss)
        r["iteration_s"] = (loss[-1]["start_s"] + loss[-1]["seconds"] - loss[0]["start_s"] - loss[0]["seconds"]) \
            / max(r["iterations"], 1)
    return r, coef


def fit_ours(spark, df, reg, dtype, log, target):
    from sparkml.classification import LogisticRegression

    log.reset()
    r, coef = fit(spark, df, LogisticRegression(regParam=reg, strategy="sync", dtype=dtype), "sparkml", dtype)
    hist, lines = r["objective_history"], list(log.lines)
    r["log_lines"] = [{"t": t, "iteration": k, "seconds": s} for t, k, s in lines]
    if lines:
        t1, _, s1 = lines[0]
        r["first_iteration_line_s"] = t1
        r["setup_s"] = t1 - s1  # before the optimizer's first evaluation: conversion + statistics
        r["iteration_s"] = (lines[-1][0] - t1) / (len(lines) - 1) if len(lines) > 1 else s1
        r["after_optimizer_s"] = r["fit_s"] - lines[-1][0]  # last line -> fit returns: model, block release
    reached = [t for t, k, _ in lines if k < len(hist) and hist[k] <= target]
    r["reached_mllib_objective"] = bool(reached)
    r["time_to_mllib_objective_s"] = reached[0] if reached else r["fit_s"]
    return r, coef


def median_run(runs):
    return sorted(runs, key=lambda r: r["fit_s"])[(len(runs) - 1) // 2]


def table(rows, mllib_fit):
    head = ["impl", "strategy", "dtype", "iters", "fit s", "s/iter", "setup s", "iter s", "t->MLlib obj s",
            "ratio", "final objective", "|coef diff| rel"]

    def fmt(r):
        t = r.get("time_to_mllib_objective_s")
        flag = "" if r.get("reached_mllib_objective", True) else "*"
        return [r["impl"], r["strategy"], r["dtype"], str(r["iterations"]), f"{r['fit_s']:.2f}",
                f"{r['s_per_iter']:.3f}", f"{r['setup_s']:.2f}" if "setup_s" in r else "-",
                f"{r['iteration_s']:.3f}" if "iteration_s" in r else "-",
                f"{t:.2f}{flag}" if t is not None else "-",
                f"{t / mllib_fit:.2f}{flag}" if t is not None else "-",
                f"{r['final_objective']:.12f}", f"{r['coef_rel_diff']:.2e}" if "coef_rel_diff" in r else "-"]

    cells = [head] + [fmt(r) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def environment(spark, args):
    import pyspark
    import torch

    return {"python": platform.python_version(), "platform": platform.platform(), "cores": os.cpu_count(),
            "load_avg_at_start": os.getloadavg(), "spark": pyspark.__version__, "torch": torch.__version__,
            "numpy": np.__version__, "master": args.master, "default_parallelism": spark.sparkContext.defaultParallelism,
            "driver_memory": args.driver_memory, "rows": args.rows, "features": args.features,
            "partitions": args.partitions, "reg_param": args.reg_param, "repeats": args.repeats, "seed": args.seed}


def main(argv=None):
    args = parse_args(argv)
    spark = make_session(args)
    env = environment(spark, args)
    print(f"{args.rows} x {args.features}, {args.partitions} partitions, {args.master}, regParam={args.reg_param}, "
          f"load {env['load_avg_at_start'][0]:.2f}", flush=True)
    t0 = time.perf_counter()
    df, true_beta, true_b = generate(spark, args.rows, args.features, args.partitions, args.seed)
    gen_s = time.perf_counter() - t0
    print(f"generated and cached in {gen_s:.2f} s", flush=True)

    log = IterationLog()
    sparkml_logger = logging.getLogger("sparkml")
    sparkml_logger.setLevel(logging.INFO)
    sparkml_logger.addHandler(log)
    configs = [("mllib", None), ("sparkml", args.dtype), ("sparkml", "float32" if args.dtype == "float64" else "float64")]
    runs = {c: [] for c in configs}
    mllib_coef = None
    try:
        for rep in range(args.repeats):
            for impl, dtype in configs:
                if impl == "mllib":
                    r, coef = fit_mllib(spark, df, args.reg_param)
                    mllib_coef, target = coef, r["final_objective"] * (1 + REL_TOL)
                else:
                    r, coef = fit_ours(spark, df, args.reg_param, dtype, log, target)
                r["coef_rel_diff"] = float(np.linalg.norm(coef - mllib_coef) / np.linalg.norm(mllib_coef))
                r["coef"] = coef.tolist()
                r["repeat"] = rep
                runs[(impl, dtype)].append(r)
                print(f"  repeat {rep}: {r['impl']} {r['dtype']}: fit {r['fit_s']:.2f} s, "
                      f"{r['iterations']} iterations", flush=True)
    finally:
        sparkml_logger.removeHandler(log)

    mllib = median_run(runs[configs[0]])
    rows = [median_run(runs[c]) for c in configs]
    mllib["time_to_mllib_objective_s"] = mllib["fit_s"]
    print(f"\ngeneration (not in any fit): {gen_s:.2f} s; MLlib target objective "
          f"{mllib['final_objective']:.12f} * (1 + {REL_TOL:g}); * = never reached (whole fit)\n")
    print(table(rows, mllib["fit_s"]))
    env["load_avg_at_end"] = os.getloadavg()
    result = {"environment": env, "generation_s": gen_s, "rel_tol": REL_TOL,
              "true_coef": true_beta.tolist(), "true_intercept": true_b,
              "summary": [{k: v for k, v in r.items() if k not in ("coef", "objective_history", "log_lines", "jobs")}
                          for r in rows],
              "runs": {f"{i}/{d or 'float64'}": rs for (i, d), rs in runs.items()}}
    for r in result["summary"]:
        r["ratio_vs_mllib"] = r["time_to_mllib_objective_s"] / mllib["fit_s"]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"\nwrote {args.out}")
    df.unpersist()
    spark.stop()


if __name__ == "__main__":
    main()
