"""CrossValidator over a regParam grid: pyspark.ml against sparkml, whose ``fitMultiple`` converts
each training fold once for the whole grid, and against sparkml fitting the grid one map at a time
(pyspark's own ``Estimator.fitMultiple``: one conversion per fold and map). Same data, one session.

    .venv/bin/python benchmarks/bench_cv.py --quick     # 100k x 100 smoke run
    .venv/bin/python benchmarks/bench_cv.py             # 1M x 100, 4 partitions, 3 folds x 3 regParams

Prints a table and writes JSON (default ``benchmarks/results/cv_<model>.json``). The data is
``bench_linear``'s (generated on the executors, cached ``VectorUDT`` column).
"""

import argparse
import os
import sys
import time
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_linear
import report


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--features", type=int, default=100)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--model", default="logistic", choices=["logistic", "svc"])
    p.add_argument("--grid", default="0.001,0.01,0.1", help="regParam values")
    p.add_argument("--folds", type=int, default=3)
    p.add_argument("--strategy", default="allreduce")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="8g")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", default=None)
    p.add_argument("--quick", action="store_true", help="100k rows: a smoke run")
    args = p.parse_args(argv)
    if args.quick:
        args.rows = 100_000
    args.grid = [float(v) for v in args.grid.split(",")]
    args.out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", f"cv_{args.model}.json")
    return args


class ConversionCounter:
    """Counts ``TrainingData.prepare`` calls (each one conversion job) made on the driver."""

    def __init__(self):
        from sparkml.data.training_data import TrainingData

        self.count, original = 0, TrainingData.prepare.__func__

        def prepare(cls, *a, **kw):
            self.count += 1
            return original(cls, *a, **kw)

        TrainingData.prepare = classmethod(prepare)


def cross_validate(df, args, impl, counter):
    """(seconds, conversions, avgMetrics, best regParam) of one CrossValidator fit."""
    from pyspark.ml import Estimator
    from pyspark.ml.evaluation import BinaryClassificationEvaluator
    from pyspark.ml.tuning import CrossValidator, ParamGridBuilder

    strategy = "-" if impl == "pyspark.ml" else args.strategy
    estimator = bench_linear.make_estimator(args.model, args.grid[0], strategy, args.dtype)
    if impl == "sparkml, one map at a time":
        estimator.fitMultiple = types.MethodType(Estimator.fitMultiple, estimator)
    grid = ParamGridBuilder().addGrid(estimator.regParam, args.grid).build()
    cv = CrossValidator(
        estimator=estimator,
        estimatorParamMaps=grid,
        evaluator=BinaryClassificationEvaluator(),
        numFolds=args.folds,
        seed=args.seed,
    )
    before = counter.count
    t0 = time.perf_counter()
    model = cv.fit(df)
    seconds = time.perf_counter() - t0
    return {
        "impl": impl,
        "strategy": strategy,
        "seconds": seconds,
        "conversions": counter.count - before,
        "avg_metrics": list(model.avgMetrics),
        "best_reg_param": model.bestModel.getRegParam(),
    }


def main(argv=None):
    args = parse_args(argv)
    spark = bench_linear.make_session(args)
    env = bench_linear.environment(spark, argparse.Namespace(**{**vars(args), "reg_param": args.grid}))
    env.update(folds=args.folds, grid=args.grid, model=args.model)
    print(
        f"CrossValidator, {args.model}: {args.rows} x {args.features}, {args.partitions} partitions, "
        f"{args.master}, {args.folds} folds x regParam {args.grid}, load {env['load_avg_at_start'][0]:.2f}",
        flush=True,
    )
    df, _, _ = bench_linear.generate(spark, args.rows, args.features, args.partitions, args.seed)
    counter = ConversionCounter()
    impls = ["pyspark.ml", "sparkml", "sparkml, one map at a time"]
    runs = {impl: [] for impl in impls}
    for rep in range(args.repeats):
        for impl in impls:
            r = cross_validate(df, args, impl, counter)
            r["repeat"] = rep
            runs[impl].append(r)
            print(f"  repeat {rep}: {impl}: {r['seconds']:.2f} s, {r['conversions']} conversions", flush=True)
    rows = [sorted(runs[impl], key=lambda r: r["seconds"])[(len(runs[impl]) - 1) // 2] for impl in impls]
    for r in rows:
        r["ratio_vs_mllib"] = r["seconds"] / rows[0]["seconds"]
        r["max_metric_diff_vs_mllib"] = float(np.max(np.abs(np.subtract(r["avg_metrics"], rows[0]["avg_metrics"]))))
    env["load_avg_at_end"] = os.getloadavg()
    title = (
        f"CrossValidator, {args.model}, {args.rows:,} x {args.features}: {args.folds} folds x regParam "
        f"{args.grid}, median of {args.repeats}"
    )
    report.write(args.out, title, table(rows, args.repeats), {"environment": env, "summary": rows, "runs": runs})
    df.unpersist()
    spark.stop()


def table(rows, repeats):
    head = [
        "impl",
        "strategy",
        "conversions",
        "CV s" + (" (median)" if repeats > 1 else ""),
        "ratio",
        "best regParam",
        "max AUC difference from MLlib",
    ]
    body = [
        [
            r["impl"],
            r["strategy"],
            str(r["conversions"]) if r["impl"] != "pyspark.ml" else "-",
            f"{r['seconds']:.2f}",
            f"{r['ratio_vs_mllib']:.2f}",
            f"{r['best_reg_param']:g}",
            f"{r['max_metric_diff_vs_mllib']:.1e}",
        ]
        for r in rows
    ]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(b) for b in body])


if __name__ == "__main__":
    main()
