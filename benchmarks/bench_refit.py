"""Refits of one cached DataFrame at default settings: pyspark.ml (MLlib) vs sparkml, same data, one session.

What a notebook or a retraining job does: fit LogisticRegression on a cached DataFrame, then again with
other regParam values. Each round fits the ``--reg-params`` in order, once per library:

* ``MLlib``: ``pyspark.ml.classification.LogisticRegression(regParam=r)``;
* ``sparkml``: ``sparkml.classification.LogisticRegression(regParam=r)``, every other Param at its default
  (``strategy="auto"``, float32 blocks; the conversion kept for the cached DataFrame and reused by the
  later fits of the round);
* ``sparkml, no reuse``: the same with ``spark.sparkml.conversionCache.enabled=false`` (every fit converts).

Before each round the kept conversions are released (``sparkml.release_conversions``), so every round's first
fit converts. The first round warms the JVM and the Python workers and is not counted. The table gives, per
position in the round (first fit, second, third, ...), the median seconds over ``--repeats`` rounds and the
ratio to MLlib's fit at the same position, and the largest relative coefficient difference from MLlib's.

    .venv/bin/python benchmarks/bench_refit.py                                # 1M x 100
    .venv/bin/python benchmarks/bench_refit.py --rows 16000 --features 20     # notebook scale

Writes benchmarks/results/refit.json (or ``--out``).
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report
from bench_linear import add_data_args, start

REUSE_KEY = "spark.sparkml.conversionCache.enabled"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_data_args(p, "refit", repeats=3)
    p.add_argument("--reg-params", default="0.01,0.03,0.1", help="comma-separated, fitted in this order")
    args = p.parse_args(argv)
    args.reg_params = [float(v) for v in args.reg_params.split(",")]
    args.reg_param = args.reg_params
    return args


def coefficients(model):
    return np.append(model.coefficients.toArray(), model.intercept)


def one_round(spark, df, reg_params):
    """{library: [(seconds, coefficients) per regParam]}."""
    from pyspark.ml.classification import LogisticRegression as MLlibLR

    import sparkml
    from sparkml.classification import LogisticRegression

    out = {}
    for name in ("MLlib", "sparkml", "sparkml, no reuse"):
        sparkml.release_conversions(spark)
        spark.conf.set(REUSE_KEY, "false" if name.endswith("no reuse") else "true")
        runs = []
        for r in reg_params:
            est = MLlibLR(regParam=r) if name == "MLlib" else LogisticRegression(regParam=r)
            t = time.perf_counter()
            model = est.fit(df)
            runs.append((time.perf_counter() - t, coefficients(model)))
        out[name] = runs
    spark.conf.unset(REUSE_KEY)
    sparkml.release_conversions(spark)
    return out


def main(argv=None):
    args = parse_args(argv)
    spark, env, df, gen_s = start(args)
    one_round(spark, df, args.reg_params)  # warm-up
    rounds = [one_round(spark, df, args.reg_params) for _ in range(args.repeats)]
    spark.stop()
    rows = []
    for i, r in enumerate(args.reg_params):
        mllib = float(np.median([rd["MLlib"][i][0] for rd in rounds]))
        ref = rounds[0]["MLlib"][i][1]
        for name in rounds[0]:
            seconds = [rd[name][i][0] for rd in rounds]
            diff = float(np.linalg.norm(rounds[0][name][i][1] - ref) / np.linalg.norm(ref))
            rows.append(
                {
                    "fit": i + 1,
                    "regParam": r,
                    "library": name,
                    "median_s": float(np.median(seconds)),
                    "runs_s": seconds,
                    "ratio": float(np.median(seconds)) / mllib,
                    "coef_rel_diff": diff,
                }
            )
    title = (
        f"LogisticRegression refits of one cached {args.rows:,} x {args.features} DataFrame, defaults, "
        f"median of {args.repeats} rounds"
    )
    table = (
        "| fit | regParam | library | seconds | / MLlib | coef rel. diff |\n|---|---|---|---|---|---|\n"
        + "\n".join(
            f"| {row['fit']} | {row['regParam']} | {row['library']} | {row['median_s']:.2f} | {row['ratio']:.2f} | "
            f"{row['coef_rel_diff']:.1e} |"
            for row in rows
        )
    )
    out = args.out or os.path.join(report.RESULTS, "refit.json")
    report.write(
        out,
        title,
        table,
        {"environment": env, "generation_s": gen_s, "rows": rows},
        'sparkml: the default estimator; "no reuse" converts the DataFrame again on every fit.',
    )


if __name__ == "__main__":
    main()
