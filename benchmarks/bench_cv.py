"""Model selection: a CrossValidator over a param grid, pyspark.ml against sparkml, in one session on the same data.

Three ways to run the same search (same folds: ``seed``, same grid, same evaluator):

* ``pyspark.ml``: pyspark's ``CrossValidator`` with pyspark.ml's estimator (the reference, ratio 1);
* ``sparkml``: ``sparkml.tuning.CrossValidator`` with sparkml's estimator: each fold converted once, the grid
  solved in one run per fold (the maps side by side), every model scored on the validation fold in one pass;
* ``stock CV + sparkml``: pyspark's ``CrossValidator`` with sparkml's estimator (only the estimator's import
  swapped): the same solve in ``fitMultiple``, but one scoring job per model.

``--pipeline`` puts the estimator in a ``Pipeline`` after a ``VectorAssembler`` over ``--features`` raw double
columns, as most users' searches are written.

    .venv/bin/python benchmarks/bench_cv.py --quick       # 100k x 100 smoke run
    .venv/bin/python benchmarks/bench_cv.py               # LogisticRegression, 1M x 100, 3 folds x 12 maps
    .venv/bin/python benchmarks/bench_cv.py --model svc   # LinearSVC: 12 regParams (it has no elasticNetParam)
    .venv/bin/python benchmarks/bench_cv.py --pipeline    # Pipeline(VectorAssembler, LogisticRegression)

Prints a table and writes JSON (default ``benchmarks/results/cv_<model>[_pipeline].json``), with, per
implementation, the Spark jobs it ran grouped by what they did (``--profile``, on by default: where the time
goes). The data is ``bench_linear``'s (generated on the executors, cached).
"""

import argparse
import os
import sys
import time
from collections import defaultdict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_linear
import report

IMPLS = ("pyspark.ml", "sparkml", "stock CV + sparkml")
GRIDS = {  # regParam values and elasticNetParam values (None: the estimator has no elasticNetParam)
    "logistic": ("0.0001,0.001,0.01,0.1", "0.0,0.5,1.0"),
    "svc": ("0.0001,0.0002,0.0005,0.001,0.002,0.005,0.01,0.02,0.05,0.1,0.2,0.5", None),
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--features", type=int, default=100)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--model", default="logistic", choices=sorted(GRIDS))
    p.add_argument("--pipeline", action="store_true", help="Pipeline(VectorAssembler over raw columns, estimator)")
    p.add_argument("--grid", default=None, help="regParam values (default: the model's, module docstring)")
    p.add_argument("--elastic-net", default=None, help="elasticNetParam values (logistic; default 0,0.5,1)")
    p.add_argument("--folds", type=int, default=3)
    p.add_argument(
        "--num-bins",
        type=int,
        default=1000,
        help="BinaryClassificationEvaluator's numBins (default 1000, its default; 0: the exact curve, deterministic)",
    )
    p.add_argument(
        "--spread-runs",
        type=int,
        default=5,
        help="runs of the stock evaluator on one model's predictions, to measure its own spread (0: skip)",
    )
    p.add_argument("--parallelism", type=int, default=1, help="the CrossValidators' parallelism")
    p.add_argument("--strategy", default="auto", help="sparkml's strategy (default: its default)")
    p.add_argument("--impls", default=",".join(IMPLS), help=f"which of {IMPLS} to run")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="8g")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", default=None)
    p.add_argument("--quick", action="store_true", help="100k rows: a smoke run")
    args = p.parse_args(argv)
    if args.quick:
        args.rows = 100_000
    grid, elastic = GRIDS[args.model]
    args.grid = [float(v) for v in (args.grid or grid).split(",")]
    elastic = args.elastic_net or elastic
    args.elastic_net = [float(v) for v in elastic.split(",")] if elastic else []
    args.impls = [i for i in args.impls.split(",") if i]
    unknown = set(args.impls) - set(IMPLS)
    if unknown:
        p.error(f"unknown --impls {sorted(unknown)}: choose from {IMPLS}")
    name = f"cv_{args.model}" + ("_pipeline" if args.pipeline else "") + ("_exact_curve" if args.num_bins == 0 else "")
    args.out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", f"{name}.json")
    return args


def raw_columns(df, d):
    """The (label, x0 .. x{d-1}) frame a VectorAssembler starts from, cached."""
    from pyspark.ml.functions import vector_to_array
    from pyspark.sql import functions as F

    values = vector_to_array(F.col("features"))
    raw = df.select("label", *[values[j].alias(f"x{j}") for j in range(d)]).cache()
    raw.count()
    return raw


def search(args, impl):
    """(CrossValidator, its estimator) of ``impl`` over the benchmark's grid."""
    from pyspark.ml import Pipeline
    from pyspark.ml.evaluation import BinaryClassificationEvaluator
    from pyspark.ml.feature import VectorAssembler
    from pyspark.ml.tuning import CrossValidator as StockCrossValidator
    from pyspark.ml.tuning import ParamGridBuilder

    if impl == "pyspark.ml":
        estimator = bench_linear.estimator_class("pyspark.ml", args.model)()
    else:
        estimator = bench_linear.estimator_class("sparkml", args.model)(strategy=args.strategy)
    builder = ParamGridBuilder().addGrid(estimator.regParam, args.grid)
    if args.elastic_net:
        builder = builder.addGrid(estimator.elasticNetParam, args.elastic_net)
    stage = estimator
    if args.pipeline:
        assembler = VectorAssembler(inputCols=[f"x{j}" for j in range(args.features)], outputCol="features")
        stage = Pipeline(stages=[assembler, estimator])
    if impl == "sparkml":
        from sparkml.tuning import CrossValidator
    else:
        CrossValidator = StockCrossValidator
    cv = CrossValidator(
        estimator=stage,
        estimatorParamMaps=builder.build(),
        evaluator=BinaryClassificationEvaluator(numBins=args.num_bins),
        numFolds=args.folds,
        parallelism=args.parallelism,
        seed=args.seed,
    )
    return cv, estimator


def best_map(model, estimator):
    """The best map's (regParam, elasticNetParam) read from the best model (a PipelineModel's last stage)."""
    best = model.bestModel
    best = best.stages[-1] if hasattr(best, "stages") else best
    return [best.getRegParam(), best.getElasticNetParam() if estimator.hasParam("elasticNetParam") else None]


def _map_values(param_map, estimator):
    """A grid map as [regParam, elasticNetParam or None], like ``best_map``."""
    values = {p.name: v for p, v in param_map.items()}
    return [values["regParam"], values.get("elasticNetParam") if estimator.hasParam("elasticNetParam") else None]


def profile(jobs):
    """{what: [jobs, seconds]}: the Spark jobs of one run grouped by the first words of their names."""
    groups = defaultdict(lambda: [0, 0.0])
    for job in jobs:
        words = job["name"].split(" at ")[0].split()
        key = " ".join(words[:3]) if words else "?"
        groups[key][0] += 1
        groups[key][1] += job["seconds"]
    return dict(sorted(groups.items(), key=lambda kv: -kv[1][1]))


def cross_validate(spark, df, args, impl):
    """The numbers of one CrossValidator fit of ``impl``."""
    cv, estimator = search(args, impl)
    epoch0 = time.time()
    t0 = time.perf_counter()
    model = cv.fit(df)
    seconds = time.perf_counter() - t0
    jobs = bench_linear.spark_jobs(spark, epoch0)
    return {
        "impl": impl,
        "seconds": seconds,
        "avg_metrics": list(model.avgMetrics),
        "best_map": best_map(model, estimator),
        "maps": [_map_values(m, estimator) for m in cv.getEstimatorParamMaps()],
        "spark_jobs": len(jobs),
        "profile": profile(jobs),
    }


def main(argv=None):
    args = parse_args(argv)
    spark = bench_linear.make_session(args)
    env = bench_linear.environment(spark, argparse.Namespace(**{**vars(args), "reg_param": args.grid}))
    env.update(folds=args.folds, grid=args.grid, elastic_net=args.elastic_net, model=args.model, pipeline=args.pipeline)
    n_maps = len(args.grid) * max(1, len(args.elastic_net))
    what = f"{'Pipeline(VectorAssembler, ' + args.model + ')' if args.pipeline else args.model}"
    print(
        f"CrossValidator, {what}: {args.rows} x {args.features}, {args.partitions} partitions, {args.master}, "
        f"{args.folds} folds x {n_maps} maps, load {env['load_avg_at_start'][0]:.2f}",
        flush=True,
    )
    df, _, _ = bench_linear.generate(spark, args.rows, args.features, args.partitions, args.seed)
    if args.pipeline:
        vectors, df = df, raw_columns(df, args.features)
        vectors.unpersist()
    runs = {impl: [] for impl in args.impls}
    for rep in range(args.repeats):
        for impl in args.impls:
            r = cross_validate(spark, df, args, impl)
            r["repeat"] = rep
            runs[impl].append(r)
            print(f"  repeat {rep}: {impl}: {r['seconds']:.2f} s, {r['spark_jobs']} Spark jobs", flush=True)
    rows = [sorted(runs[impl], key=lambda r: r["seconds"])[(len(runs[impl]) - 1) // 2] for impl in args.impls]
    reference = rows[0]
    for r in rows:
        r["ratio"] = r["seconds"] / reference["seconds"]
        diff = np.abs(np.subtract(r["avg_metrics"], reference["avg_metrics"]))
        r["max_metric_rel_diff"] = float(np.max(diff / np.maximum(np.abs(reference["avg_metrics"]), 1e-300)))
        r["same_best_map"] = r["best_map"] == reference["best_map"]
        r["best_map_regret"] = regret(r, reference)
    _evaluation_check(rows)
    if args.spread_runs > 0 and args.num_bins > 0:
        env["stock_evaluator_spread"] = evaluator_spread(df, args, rows[-1]["best_map"])
    env["load_avg_at_end"] = os.getloadavg()
    title = (
        f"CrossValidator, {what}, {args.rows:,} x {args.features}: {args.folds} folds x {n_maps} maps "
        f"(regParam {args.grid}" + (f" x elasticNetParam {args.elastic_net}" if args.elastic_net else "") + ")"
    )
    notes = (
        f"Ratio: seconds over {reference['impl']}'s in the same run (median of {args.repeats}). Metric: "
        f"BinaryClassificationEvaluator's areaUnderROC (numBins {args.num_bins}); the largest relative "
        "difference of avgMetrics from the first row's, whether the best map is the same, and its regret (how "
        "much worse the chosen map scores than the first row's best, by the first row's own avgMetrics); for "
        "sparkml, the same against pyspark's CrossValidator scoring sparkml's models (the stock CV + sparkml "
        "row: the same models for a bare estimator, whose fitMultiple solves the grid the same way; cold fits "
        "of each map for a Pipeline, which pyspark fits map by map)."
    )
    if "stock_evaluator_spread" in env:
        notes += (
            f" The stock evaluator run {args.spread_runs} times on one model's same predictions spreads by "
            f"{env['stock_evaluator_spread']['relative_spread']:.1e} relative (numBins {args.num_bins} down-samples "
            "its curve per partition of a randomly range-partitioned sort): differences below it are the "
            "evaluator's, not the models'."
        )
    report.write(args.out, title, table(rows), {"environment": env, "summary": rows, "runs": runs}, notes)
    df.unpersist()
    spark.stop()


def regret(row, reference):
    """How much worse, by the reference's own avgMetrics, the map ``row`` chose is than the reference's best:
    (best - metric of row's best map) / best, 0 when both chose the same map. Below the evaluator's own spread
    (``evaluator_spread``) the two choices cannot be told apart by the metric."""
    maps = reference["maps"]
    best = max(reference["avg_metrics"])
    return float((best - reference["avg_metrics"][maps.index(row["best_map"])]) / abs(best))


def evaluator_spread(df, args, best):
    """The stock evaluator against itself: the relative spread (max - min) / mean of ``--spread-runs`` runs of
    ``BinaryClassificationEvaluator`` on the very same predictions (one model of map ``best`` fitted on the first
    fold's training share, scored on its validation share). With numBins > 0 Spark down-samples the curve per
    partition of a sort whose range boundaries come from a sample seeded by the RDD's id, so its result moves
    from run to run; differences of avgMetrics below this spread are the evaluator's, not the models'."""
    from pyspark.ml.evaluation import BinaryClassificationEvaluator
    from pyspark.sql import functions as F

    cv, estimator = search(args, "sparkml")
    chosen = {estimator.regParam: best[0], **({estimator.elasticNetParam: best[1]} if best[1] is not None else {})}
    frame = df.withColumn("_fold", F.rand(args.seed))
    train, validation = frame.filter(F.col("_fold") >= 1 / args.folds), frame.filter(F.col("_fold") < 1 / args.folds)
    scored = cv.getEstimator().fit(train, chosen).transform(validation).select("label", "rawPrediction").cache()
    scored.count()
    evaluator = BinaryClassificationEvaluator(numBins=args.num_bins)
    values = np.array([evaluator.evaluate(scored) for _ in range(args.spread_runs)])
    scored.unpersist()
    spread = float((values.max() - values.min()) / values.mean())
    print(f"  the stock evaluator on the same predictions, {args.spread_runs} runs: relative spread {spread:.1e}")
    return {"runs": values.tolist(), "relative_spread": spread, "map": best}


def _evaluation_check(rows):
    """sparkml's avgMetrics against pyspark's CrossValidator scoring sparkml's models (``stock CV + sparkml``):
    the largest relative difference and whether the best map is the same. For a bare estimator those are the
    same models (its ``fitMultiple`` solves the grid the same way on the same rows); pyspark fits a ``Pipeline``
    map by map, from cold starts. Against pyspark.ml's own models the metrics also differ by what two solvers'
    tolerances leave, which on a flat grid can reorder the maps."""
    by_impl = {r["impl"]: r for r in rows}
    ours, stock = by_impl.get("sparkml"), by_impl.get("stock CV + sparkml")
    if ours is None or stock is None:
        return
    diff = np.abs(np.subtract(ours["avg_metrics"], stock["avg_metrics"]))
    ours["stock_evaluation_rel_diff"] = float(np.max(diff / np.maximum(np.abs(stock["avg_metrics"]), 1e-300)))
    ours["stock_evaluation_same_best"] = ours["best_map"] == stock["best_map"]


def table(rows):
    head = ["impl", "CV s", "ratio", "Spark jobs", "best map", "same best", "regret", "max avgMetrics rel diff"]
    head.append("vs stock CV + sparkml")
    body = [
        [
            r["impl"],
            f"{r['seconds']:.2f}",
            f"{r['ratio']:.3f}",
            str(r["spark_jobs"]),
            ", ".join("-" if v is None else f"{v:g}" for v in r["best_map"]),
            "yes" if r["same_best_map"] else "no",
            f"{r['best_map_regret']:.1e}",
            f"{r['max_metric_rel_diff']:.1e}",
            _evaluation_cell(r),
        ]
        for r in rows
    ]
    return report.markdown_table(head, body)


def _evaluation_cell(r):
    if "stock_evaluation_rel_diff" not in r:
        return "-"
    same = "same best" if r["stock_evaluation_same_best"] else "another best"
    return f"{r['stock_evaluation_rel_diff']:.1e}, {same}"


if __name__ == "__main__":
    main()
