"""Binary LogisticRegression or LinearSVC: pyspark.ml (MLlib) vs sparkml's strategies, same data, one session.

What it measures, on a synthetic dense problem (rows x features, `--partitions` partitions):

* generation: the data is made on the executors (spark.range + mapInArrow seeded by row id, then
  array_to_vector), cached as a `VectorUDT` column and counted. Timed apart; in neither fit.
* MLlib: wall seconds of `fit()`, iterations, final objective (summary.objectiveHistory[-1]); from
  Spark's REST API (job times): setup s = fit start -> first loss-evaluation job, iter s = first ->
  last loss job's end / iterations.
* sparkml, each `--configs` entry (strategy:dtype): the same, plus, from the model summary's
  `iterationSeconds` (optimizer start -> end of each iteration):
    - setup s: fit time before the optimizer's first iteration ended, minus that iteration
      (conversion + statistics pass; for allreduce also the barrier stage's launch and rendezvous);
    - iter s: mean seconds per iteration;
    - time to MLlib's objective: fit time minus the optimizer time after the first iteration whose
      objective is <= MLlib's final objective * (1 + 1e-9); the whole fit, flagged "*", when never
      reached. Everything after the optimizer (model, block release) is counted in, so it is an
      upper bound.
  ratio = that time / MLlib's fit time; |coef diff| = ||(coef, b) - MLlib's|| / ||MLlib's||.
* memory, from one more fit of each config after the timed ones (``memory.py``, sampled every 0.5 s):
  peak PSS of the JVM (driver and executors in local mode, the cached input included) and of all
  its Python workers together, and the peak bytes of sparkml's training blocks on disk (the one
  training copy, in the page cache). The timed fits run without the sampler: one sample reads the
  JVM's /proc/<pid>/smaps_rollup (57 ms for a 5 GB JVM here), and sampling made a 1.6 s
  allreduce fit about 0.4 s slower.

Prints a table and writes a JSON with every number and the environment. `--repeats N` runs the
fits N times in rotation and tabulates the median-time run of each. Usage:

    .venv/bin/python benchmarks/bench_linear.py --quick                  # 100k rows, smoke run
    .venv/bin/python benchmarks/bench_linear.py                          # LogisticRegression 1M x 100
    .venv/bin/python benchmarks/bench_linear.py --model svc              # LinearSVC at MLlib's defaults
"""

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report
from memory import PeakMemory

REL_TOL = 1e-9
DEFAULT_CONFIGS = "sync:float64,allreduce:float64,allreduce:float32,sync:float32"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--features", type=int, default=100)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--model", default="logistic", choices=["logistic", "svc"])
    p.add_argument(
        "--reg-param", type=float, default=None, help="default 0.01 for logistic, MLlib's default 0.0 for svc"
    )
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="8g")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--configs", default=DEFAULT_CONFIGS, help="sparkml runs, strategy:dtype,...")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", default=None, help="default benchmarks/results/<model>.json")
    p.add_argument("--quick", action="store_true", help="100k rows: a smoke run")
    args = p.parse_args(argv)
    if args.quick:
        args.rows = 100_000
    if args.reg_param is None:
        args.reg_param = 0.01 if args.model == "logistic" else 0.0
    args.out = args.out or f"benchmarks/results/{args.model}.json"
    args.configs = [tuple(c.split(":")) for c in args.configs.split(",")]
    return args


def make_session(args):
    os.environ["PYSPARK_PYTHON"] = sys.executable  # Spark's Python workers must use this venv
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(args.master)
        .appName("bench_linear")
        .config("spark.driver.memory", args.driver_memory)
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(args.partitions))
        # every fit converts, as a first fit does (bench_refit.py measures refits, which reuse it)
        .config("spark.sparkml.conversionCache.enabled", "false")
        .getOrCreate()
    )
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
            yield pa.RecordBatch.from_arrays(
                [pa.array(y), pa.ListArray.from_arrays(offsets, pa.array(x.ravel()))], names=["label", "features"]
            )

    df = (
        spark.range(0, rows, numPartitions=partitions)
        .mapInArrow(make, "label double, features array<double>")
        .select("label", array_to_vector(F.col("features")).alias("features"))
        .cache()
    )
    n = df.count()
    assert n == rows, (n, rows)
    return df, beta, b


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
            jobs = [
                (j["name"], epoch(j["submissionTime"]), epoch(j["completionTime"]))
                for j in json.load(f)
                if "completionTime" in j
            ]
    except (OSError, ValueError, KeyError) as exc:  # UI disabled or unreachable: no job split
        print(f"  (no Spark job timings: {exc})", flush=True)
        return []
    return [
        {"name": n, "start_s": a - epoch0, "seconds": b - a}
        for n, a, b in sorted(jobs, key=lambda j: j[1])
        if a >= epoch0 - 0.01
    ]


def summary_of(model):
    return model.summary() if callable(model.summary) else model.summary  # LinearSVC's is a method


def fit(spark, df, estimator, impl, strategy, dtype):
    """Fit once; the common record (wall time, iterations, objective, Spark jobs), (coef, b), summary."""
    t0, epoch0 = time.perf_counter(), time.time()
    model = estimator.fit(df)
    fit_s = time.perf_counter() - t0
    summary = summary_of(model)
    it, hist = summary.totalIterations, list(summary.objectiveHistory)
    return (
        {
            "impl": impl,
            "strategy": strategy,
            "dtype": dtype,
            "fit_s": fit_s,
            "iterations": it,
            "s_per_iter": fit_s / max(it, 1),
            "final_objective": hist[-1],
            "objective_history": hist,
            "jobs": spark_jobs(spark, epoch0),
        },
        coef_vector(model),
        summary,
    )


def peak_memory(df, estimator):
    """Peak memory of one more fit (not a timed one: sampling slows the fit)."""
    with PeakMemory() as peak:
        estimator.fit(df)
    return peak.result()


def estimator_class(package, model):
    import importlib

    module = importlib.import_module(f"{package}.classification")
    return getattr(module, "LogisticRegression" if model == "logistic" else "LinearSVC")


def make_estimator(model, reg, strategy, dtype):
    if strategy == "-":
        return estimator_class("pyspark.ml", model)(regParam=reg)
    return estimator_class("sparkml", model)(regParam=reg, strategy=strategy, dtype=dtype)


def fit_mllib(spark, df, model, reg):
    r, coef, _ = fit(spark, df, make_estimator(model, reg, "-", "float64"), "pyspark.ml", "-", "float64")
    loss = [j for j in r["jobs"] if "RDDLossFunction" in j["name"]]  # one job per L-BFGS evaluation
    if loss:
        r["setup_s"] = loss[0]["start_s"]  # summarizer pass + standardized, cached blocks
        r["evaluations"] = len(loss)
        r["iteration_s"] = (loss[-1]["start_s"] + loss[-1]["seconds"] - loss[0]["start_s"] - loss[0]["seconds"]) / max(
            r["iterations"], 1
        )
    return r, coef


def fit_ours(spark, df, model, reg, strategy, dtype, target):
    r, coef, summary = fit(spark, df, make_estimator(model, reg, strategy, dtype), "sparkml", strategy, dtype)
    hist, ends = r["objective_history"], list(summary.iterationSeconds)  # ends[k-1]: end of iteration k
    r["iteration_ends_s"] = ends
    if ends:
        first = ends[1] - ends[0] if len(ends) > 1 else ends[0]
        r["setup_s"] = r["fit_s"] - ends[-1] - first  # everything but the iterations (upper bound)
        r["iteration_s"] = ends[-1] / len(ends)
    reached = [k for k in range(1, len(hist)) if hist[k] <= target and k <= len(ends)]
    r["reached_mllib_objective"] = bool(reached)
    r["time_to_mllib_objective_s"] = r["fit_s"] - (ends[-1] - ends[reached[0] - 1]) if reached else r["fit_s"]
    return r, coef


def median_run(runs):
    return sorted(runs, key=lambda r: r["fit_s"])[(len(runs) - 1) // 2]


def table(rows, mllib_fit):
    head = [
        "impl",
        "strategy",
        "dtype",
        "iters",
        "fit s",
        "s/iter",
        "setup s",
        "iter s",
        "t->MLlib obj s",
        "ratio",
        "final objective",
        "coef rel. diff",
        "JVM GB",
        "workers GB",
        "blocks GB",
    ]

    def fmt(r):
        t = r.get("time_to_mllib_objective_s")
        flag = "" if r.get("reached_mllib_objective", True) else "*"
        return [
            r["impl"],
            r["strategy"],
            r["dtype"],
            str(r["iterations"]),
            f"{r['fit_s']:.2f}",
            f"{r['s_per_iter']:.3f}",
            f"{r['setup_s']:.2f}" if "setup_s" in r else "-",
            f"{r['iteration_s']:.3f}" if "iteration_s" in r else "-",
            f"{t:.2f}{flag}" if t is not None else "-",
            f"{t / mllib_fit:.2f}{flag}" if t is not None else "-",
            f"{r['final_objective']:.12f}",
            f"{r['coef_rel_diff']:.2e}" if "coef_rel_diff" in r else "-",
            *(
                f"{r['peak_memory'][k]:.2f}" if "peak_memory" in r else "-"
                for k in ("jvm_gb", "python_workers_gb", "blocks_gb")
            ),
        ]

    cells = [head] + [fmt(r) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def add_data_args(p, name, repeats):
    """The session and data arguments every script built on ``start`` takes; ``name``: its results file."""
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--features", type=int, default=100)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="8g")
    p.add_argument("--repeats", type=int, default=repeats)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", default=None, help=f"default benchmarks/results/{name}.json")


def start(args):
    """(spark, environment, the generated cached DataFrame, its generation seconds): what every script
    built on this one's data starts with."""
    spark = make_session(args)
    env = environment(spark, args)
    t0 = time.perf_counter()
    df, _, _ = generate(spark, args.rows, args.features, args.partitions, args.seed)
    return spark, env, df, time.perf_counter() - t0


def environment(spark, args):
    import pyspark
    import torch

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cores": os.cpu_count(),
        "load_avg_at_start": os.getloadavg(),
        "spark": pyspark.__version__,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "master": args.master,
        "default_parallelism": spark.sparkContext.defaultParallelism,
        "driver_memory": args.driver_memory,
        "rows": args.rows,
        "features": args.features,
        "partitions": args.partitions,
        "reg_param": args.reg_param,
        "repeats": args.repeats,
        "seed": args.seed,
    }


def time_conversion(df, rows, features):
    """Seconds and MB/s (float64 feature bytes) of the one-off conversion, per block dtype. The first
    call (a fresh JVM's first vector_to_array -> Arrow pass, Python workers importing torch) is
    reported apart from the warm ones that follow."""
    from sparkml.data.training_data import TrainingData

    out = {}
    for name, dtype in (("first call, float64", "float64"), ("float64", "float64"), ("float32", "float32")):
        t0 = time.perf_counter()
        data = TrainingData.prepare(df, "features", "label", None, dtype)
        seconds = time.perf_counter() - t0
        data.release()
        out[name] = {"seconds": seconds, "mb_per_s": rows * features * 8 / 1e6 / seconds}
    return out


def main(argv=None):
    args = parse_args(argv)
    spark = make_session(args)
    env = environment(spark, args)
    print(
        f"{args.model}: {args.rows} x {args.features}, {args.partitions} partitions, {args.master}, "
        f"regParam={args.reg_param}, "
        f"load {env['load_avg_at_start'][0]:.2f}",
        flush=True,
    )
    t0 = time.perf_counter()
    df, true_beta, true_b = generate(spark, args.rows, args.features, args.partitions, args.seed)
    gen_s = time.perf_counter() - t0
    print(f"generated and cached in {gen_s:.2f} s", flush=True)
    env["conversion"] = conversion = time_conversion(df, args.rows, args.features)
    print(
        "one-off DataFrame -> executor blocks (TrainingData.prepare, then release): "
        + ", ".join(f"{k} {v['seconds']:.2f} s = {v['mb_per_s']:.0f} MB/s" for k, v in conversion.items()),
        flush=True,
    )

    configs = [("mllib", "-", "float64")] + [("sparkml", st, dt) for st, dt in args.configs]
    runs, memory = {c: [] for c in configs}, {}
    for rep in range(args.repeats):
        for impl, strategy, dtype in configs:
            if impl == "mllib":
                r, coef = fit_mllib(spark, df, args.model, args.reg_param)
                mllib_coef, target = coef, r["final_objective"] * (1 + REL_TOL)
            else:
                r, coef = fit_ours(spark, df, args.model, args.reg_param, strategy, dtype, target)
            r["coef_rel_diff"] = float(np.linalg.norm(coef - mllib_coef) / np.linalg.norm(mllib_coef))
            r.update(coef=coef.tolist(), repeat=rep)
            runs[(impl, strategy, dtype)].append(r)
            print(
                f"  repeat {rep}: {impl} {strategy} {dtype}: fit {r['fit_s']:.2f} s, {r['iterations']} iterations",
                flush=True,
            )
            save(args.out, env, gen_s, true_beta, true_b, configs, runs, memory, args, echo=False)  # after every fit
    for impl, strategy, dtype in configs:
        memory[(impl, strategy, dtype)] = peak_memory(df, make_estimator(args.model, args.reg_param, strategy, dtype))
        print(f"  memory: {impl} {strategy} {dtype}: {memory[(impl, strategy, dtype)]}", flush=True)
    save(args.out, env, gen_s, true_beta, true_b, configs, runs, memory, args)
    df.unpersist()
    spark.stop()


def save(path, env, gen_s, true_beta, true_b, configs, runs, memory, args, echo=True):
    """Write the results file (every run so far, and a summary of each config's median run, with the config's
    peak memory once measured); the table printed when ``echo``. ``runs``, ``memory``: by config."""
    rows = [
        dict(median_run(runs[c]), **({"peak_memory": memory[c]} if c in memory else {})) for c in configs if runs[c]
    ]
    rows[0]["time_to_mllib_objective_s"] = rows[0]["fit_s"]
    for r in rows:
        r["ratio_vs_mllib"] = r["time_to_mllib_objective_s"] / rows[0]["fit_s"]
    env["load_avg_at_end"] = os.getloadavg()
    result = {
        "environment": env,
        "generation_s": gen_s,
        "rel_tol": REL_TOL,
        "true_coef": true_beta.tolist(),
        "true_intercept": true_b,
        "summary": [
            {k: v for k, v in r.items() if k not in ("coef", "objective_history", "iteration_ends_s", "jobs")}
            for r in rows
        ],
        "runs": {
            f"{rs[0]['impl']}/{rs[0]['strategy']}/{rs[0]['dtype']}": rs for rs in (runs[c] for c in configs) if rs
        },
    }
    name = "LogisticRegression" if args.model == "logistic" else "LinearSVC"
    title = (
        f"{name}(regParam={args.reg_param:g}), {args.rows:,} x {args.features} dense, {args.partitions} "
        f"partitions, {args.master}: pyspark.ml against sparkml, median of {args.repeats}"
    )
    notes = (
        "ratio: time for sparkml to reach MLlib's final objective (relative 1e-9) over MLlib's fit time; "
        "* never reached (whole fit). Setup: conversion and statistics (allreduce: also the barrier stage's "
        "start). Data generation and caching are in no fit."
    )
    report.write(path, title, table(rows, rows[0]["fit_s"]), result, notes, echo=echo)


if __name__ == "__main__":
    main()
