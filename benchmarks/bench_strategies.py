"""Every strategy on one problem: wall time to reach a relative objective gap, with and without a straggler.

LogisticRegression (regParam 0.01, float32 blocks) on ``bench_linear``'s synthetic data (1M x 100 by default),
for ``--workers`` task slots each (a ``local[W]`` session per scenario; W above the machine's cores shares
them), with and without one rank slowed ``--slow`` times (the test-only hook
``SPARKML_TEST_STRAGGLER=0:<factor>`` in the executors' environment: every pass over partition 0's blocks
sleeps (factor - 1) times its own duration; with ``sync`` and ``averaging`` that partition's task, with the
barrier strategies rank 0's share).

F* is the objective of an ``allreduce`` fit to tol 1e-14 in the first scenario (the data are the same in all).
For each strategy the fit runs to its own convergence or ``maxIter``, and the time to a gap g is the fit's
wall time less the optimizer's seconds after the first iteration whose objective is <= F* (1 + g): conversion,
statistics, stage launch and step-size setup are in, and so are the model's making and the blocks' release
(an upper bound, as ``bench_linear``'s time to MLlib's objective). ``ssp``'s
objective history is the mean of the workers' latest local objectives, each at the model it pulled, so near
the end it lags the server's model; ``gossip``'s is the mean over the ranks at their own iterates, known D
iterations later (the graph's diameter), which the times include. "-" = not reached.

    .venv/bin/python benchmarks/bench_strategies.py                       # 1M x 100, 2 and 4 workers
    .venv/bin/python benchmarks/bench_strategies.py --rows 100000 --workers 2 --strategies gossip,allreduce

Prints a table and writes benchmarks/results/strategies.json (or ``--out``).
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report
from bench_linear import environment, generate

GAPS = (1e-4, 1e-6)
STRATEGIES = {  # name: Params
    "sync": {"strategy": "sync", "maxIter": 200, "tol": 1e-12},
    "allreduce": {"strategy": "allreduce", "maxIter": 200, "tol": 1e-12},
    "averaging": {"strategy": "averaging", "maxIter": 30, "localIter": 10, "tol": 1e-12},
    "allreduce-averaging": {"strategy": "allreduce-averaging", "maxIter": 30, "localIter": 10, "tol": 1e-12},
    "ssp s=0": {"strategy": "ssp", "staleness": 0, "maxIter": 1500, "tol": 1e-10},
    "ssp s=3": {"strategy": "ssp", "staleness": 3, "maxIter": 1500, "tol": 1e-10},
    "gossip": {"strategy": "gossip", "maxIter": 1500, "tol": 1e-10},
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--features", type=int, default=100)
    p.add_argument("--workers", default="2,4", help="comma-separated task slots, one local[W] session each")
    p.add_argument("--slow", type=float, default=3.0, help="the straggler's factor (1: no straggler scenario only)")
    p.add_argument("--strategies", default=",".join(STRATEGIES), help="comma-separated, of: " + ", ".join(STRATEGIES))
    p.add_argument("--reg-param", type=float, default=0.01)
    p.add_argument("--driver-memory", default="8g")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out", default="benchmarks/results/strategies.json")
    args = p.parse_args(argv)
    args.workers = [int(w) for w in args.workers.split(",")]
    args.strategies = args.strategies.split(",")
    args.partitions, args.repeats = max(args.workers), 1
    args.master = ", ".join(f"local[{w}]" for w in args.workers)
    return args


def session(workers, slow, args):
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(f"local[{workers}]")
        .appName("bench_strategies")
        .config("spark.driver.memory", args.driver_memory)
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sparkml.conversionCache.enabled", "false")
    )
    if slow > 1:
        builder = builder.config("spark.executorEnv.SPARKML_TEST_STRAGGLER", f"0:{slow:g}")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def time_to_gaps(summary, wall, optimum):
    """{gap: seconds or None} (module docstring)."""
    history, ends = summary.objectiveHistory, list(summary.iterationSeconds)
    out = {}
    for gap in GAPS:
        hit = next((i for i in range(1, len(history)) if history[i] <= optimum * (1 + gap) and i - 1 < len(ends)), None)
        out[gap] = None if hit is None else wall - (ends[-1] - ends[hit - 1])
    return out


def run_scenario(workers, slow, args, optimum):
    from sparkml.classification import LogisticRegression

    spark = session(workers, slow, args)
    df, _, _ = generate(spark, args.rows, args.features, workers, args.seed)
    if optimum is None:
        optimum = (
            LogisticRegression(regParam=args.reg_param, strategy="allreduce", maxIter=500, tol=1e-14)
            .fit(df)
            .summary.objectiveHistory[-1]
        )
    LogisticRegression(regParam=args.reg_param, strategy="allreduce", maxIter=3).fit(df)  # warm the workers
    rows = []
    for name in args.strategies:
        t0 = time.perf_counter()
        model = LogisticRegression(regParam=args.reg_param, **STRATEGIES[name]).fit(df)
        wall = time.perf_counter() - t0
        s = model.summary
        gaps = time_to_gaps(s, wall, optimum)
        final_gap = (s.objectiveHistory[-1] - optimum) / abs(optimum)
        rows.append(
            {
                "workers": workers,
                "slow": slow,
                "strategy": name,
                "wall_s": wall,
                "iterations": s.totalIterations,
                "seconds_per_iteration": s.seconds / max(s.totalIterations, 1),
                "final_gap": final_gap,
                "time_to_gap": {f"{g:g}": t for g, t in gaps.items()},
            }
        )
        print(
            f"  {workers} workers, slow {slow:g}: {name}: {wall:.1f} s, {s.totalIterations} it, final gap "
            f"{final_gap:.1e}, to 1e-4 {gaps[1e-4]}, to 1e-6 {gaps[1e-6]}",
            flush=True,
        )
    df.unpersist()
    spark.stop()
    return rows, optimum


def straggler(slow):
    return f"rank 0 x{slow:g}" if slow > 1 else "none"


def table(rows):
    cell = lambda t: "-" if t is None else f"{t:.1f}"  # noqa: E731
    lines = [
        "| workers | straggler | strategy | to gap 1e-4 (s) | to gap 1e-6 (s) | iterations | s / iteration | fit (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['workers']} | {straggler(r['slow'])} | {r['strategy']} | "
            f"{cell(r['time_to_gap']['0.0001'])} | {cell(r['time_to_gap']['1e-06'])} | {r['iterations']} | "
            f"{r['seconds_per_iteration']:.3f} | {r['wall_s']:.1f} |"
        )
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    rows, optimum, env = [], None, None
    for workers in args.workers:
        for slow in [1.0, args.slow] if args.slow > 1 else [1.0]:
            scenario, optimum = run_scenario(workers, slow, args, optimum)
            rows += scenario
    from pyspark.sql import SparkSession

    env = environment(SparkSession.builder.master("local[1]").getOrCreate(), args)
    title = f"Every strategy, LogisticRegression {args.rows:,} x {args.features}, regParam {args.reg_param}"
    report.write(
        args.out,
        title,
        table(rows),
        {"environment": env, "optimum": optimum, "rows": rows},
        f"Wall seconds until the objective is within a relative gap of F* = {optimum:.12f}; - never.",
    )


if __name__ == "__main__":
    main()
