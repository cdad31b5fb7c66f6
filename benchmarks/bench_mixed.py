"""GeneralizedLinearMixedModel against the fixed effect alone: what a per-entity model buys, and what it costs.

Generated data with a known truth (a click log): n rows, each of one of m users (Zipf-like: a few heavy users,
many with a handful of rows), x ~ N(0, 1)^d fixed features, z ~ N(0, 1)^p per-user features, and

    y ~ Bernoulli(sigmoid(b + x . beta + a_u + z . g_u)),   a_u ~ N(0, 0.8^2), g_u ~ N(0, 0.5^2 I)

Both models are fitted on 80% of the rows and scored on the other 20% (users seen in training, mostly): the
fixed effect alone (``GeneralizedLinearRegression``, binomial, regParam 1e-4) and the mixed
model at its defaults (``entityRegParams`` 1.0) with the same fixed-effect penalty.

    .venv/bin/python benchmarks/bench_mixed.py --quick    # 50k rows, 5k users
    .venv/bin/python benchmarks/bench_mixed.py            # 200k rows, 20k users
    .venv/bin/python benchmarks/bench_mixed.py --quick --joint --out benchmarks/results/mixed_joint.json

Prints a table (fit seconds, coordinate-descent passes, held-out log-loss and area under the ROC curve) and writes
JSON (default ``benchmarks/results/mixed.json``). ``--joint`` (small instances: the training rows are collected)
also minimizes the whole objective over every parameter at once (scipy's L-BFGS on the sparse design [1, x, one
block (1, z) per user]) and reports how far each mixed fit's final objective is from that minimum; it adds a fit
at a tight tolerance (tol 1e-10, maxIter 100) beside the defaults.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import report


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--users", type=int, default=20_000)
    p.add_argument("--features", type=int, default=20, help="fixed-effect features d")
    p.add_argument("--user-features", type=int, default=5, help="per-user features p")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="8g")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--quick", action="store_true", help="50k rows, 5k users: a smoke run")
    p.add_argument(
        "--spark-data",
        action="store_true",
        help="generate the rows in Spark instead of on the driver (the default above 2M rows): the same model, "
        "users drawn by the inverse of the same power law",
    )
    p.add_argument("--skip-fixed", action="store_true", help="fit the mixed model only")
    p.add_argument("--joint", action="store_true", help="compare with the joint L-BFGS minimum (small instances)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    if args.quick:
        args.rows, args.users = 50_000, 5_000
    args.spark_data = args.spark_data or args.rows > 2_000_000
    args.out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "mixed.json")
    return args


def generate(spark, args):
    """(train, test): cached DataFrames of (features, user_features, user, label), 80/20 by row."""
    import pandas as pd
    from pyspark.ml.functions import array_to_vector
    from pyspark.sql import functions as F

    rng = np.random.default_rng(args.seed)
    n, m, d, p = args.rows, args.users, args.features, args.user_features
    popularity = 1.0 / np.arange(1, m + 1) ** 0.6
    user = rng.choice(m, size=n, p=popularity / popularity.sum())
    x, z = rng.normal(size=(n, d)), rng.normal(size=(n, p))
    beta, a, g = rng.normal(scale=0.3, size=d), rng.normal(scale=0.8, size=m), rng.normal(scale=0.5, size=(m, p))
    eta = -0.5 + x @ beta + a[user] + (z * g[user]).sum(axis=1)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-eta))).astype(np.float64)
    frame = pd.DataFrame({"x": list(x), "z": list(z), "user": user.astype(np.int64), "label": y, "r": rng.random(n)})
    df = spark.createDataFrame(frame).repartition(args.partitions)
    df = df.select(
        array_to_vector("x").alias("features"), array_to_vector("z").alias("user_features"), "user", "label", "r"
    )
    train = df.where(F.col("r") < 0.8).drop("r").cache()
    test = df.where(F.col("r") >= 0.8).drop("r").cache()
    return train, test, int(train.count()), int(test.count())


def generate_in_spark(spark, args):
    """``generate``'s model, every row made by Spark (no driver copy: 10M rows and more). Users are drawn as
    floor(m u^2.5), u uniform: density proportional to k^-0.6 over the m users, as ``generate``'s weights."""
    from pyspark.ml.functions import array_to_vector
    from pyspark.sql import functions as F

    rng = np.random.default_rng(args.seed)
    n, m, d, p, seed = args.rows, args.users, args.features, args.user_features, args.seed
    beta = rng.normal(scale=0.3, size=d)
    users = spark.range(m).select(
        F.col("id").alias("user"),
        (F.randn(seed + 1) * 0.8).alias("a"),
        F.array(*[F.randn(seed + 2 + j) * 0.5 for j in range(p)]).alias("g"),
    )
    rows = spark.range(0, n, 1, args.partitions).select(
        F.least(F.floor(F.lit(m) * F.pow(F.rand(seed + 100), 2.5)).cast("long"), F.lit(m - 1)).alias("user"),
        F.array(*[F.randn(seed + 200 + j) for j in range(d)]).alias("x"),
        F.array(*[F.randn(seed + 300 + j) for j in range(p)]).alias("z"),
        F.rand(seed + 400).alias("u"),
        F.rand(seed + 500).alias("r"),
    )
    joined = rows.join(users, "user")
    linear = F.lit(-0.5) + F.col("a")
    for j in range(d):
        linear = linear + F.col("x")[j] * float(beta[j])
    for j in range(p):
        linear = linear + F.col("z")[j] * F.col("g")[j]
    label = (F.col("u") < 1 / (1 + F.exp(-linear))).cast("double")
    df = joined.select(
        array_to_vector("x").alias("features"),
        array_to_vector("z").alias("user_features"),
        "user",
        label.alias("label"),
        "r",
    ).repartition(args.partitions)
    df = df.cache()  # computed once; the two sides read it
    train = df.where(F.col("r") < 0.8).drop("r")
    test = df.where(F.col("r") >= 0.8).drop("r")
    return train, test, int(train.count()), int(test.count())


def held_out(predictions):
    """(log-loss, area under the ROC curve) of the held-out rows' predicted probabilities."""
    from sklearn.metrics import log_loss, roc_auc_score

    rows = predictions.select("label", "prediction").toPandas()
    prob = np.clip(rows["prediction"].to_numpy(), 1e-15, 1 - 1e-15)
    return float(log_loss(rows["label"], prob)), float(roc_auc_score(rows["label"], prob))


def joint_minimum(train, reg_param, entity_reg):
    """The minimum of the mixed model's objective over (b, beta, every user's (a, g)) at once, on the collected
    training rows: F = sum_i l(y_i, eta_i) + reg_param n / 2 |beta|^2 + entity_reg / 2 sum_u |(a_u, g_u)|^2."""
    from scipy import sparse
    from scipy.optimize import minimize

    rows = train.select("features", "user_features", "user", "label").toPandas()
    x = np.stack([v.toArray() for v in rows["features"]])
    z = np.stack([v.toArray() for v in rows["user_features"]])
    users, codes = np.unique(rows["user"].to_numpy(), return_inverse=True)
    y = rows["label"].to_numpy()
    n, d, p, m = len(y), x.shape[1], z.shape[1], len(users)
    k = 1 + p
    per_row = 1 + d + k
    columns = np.empty((n, per_row), dtype=np.int64)
    columns[:, : 1 + d] = np.arange(1 + d)
    columns[:, 1 + d :] = (1 + d + codes * k)[:, None] + np.arange(k)
    values = np.hstack([np.ones((n, 1)), x, np.ones((n, 1)), z])
    design = sparse.csr_matrix(
        (values.ravel(), columns.ravel(), np.arange(0, n * per_row + 1, per_row)), shape=(n, 1 + d + m * k)
    )
    penalty = np.r_[0.0, np.full(d, reg_param * n), np.full(m * k, entity_reg)]

    def f(theta):
        eta = design @ theta
        loss = np.logaddexp(0.0, eta) - y * eta
        gradient = design.T @ (1.0 / (1.0 + np.exp(-eta)) - y) + penalty * theta
        return loss.sum() + 0.5 * penalty @ theta**2, gradient

    began = time.perf_counter()
    result = minimize(
        f,
        np.zeros(design.shape[1]),
        jac=True,
        method="L-BFGS-B",
        options={"ftol": 1e-16, "gtol": 1e-9, "maxiter": 20000},
    )
    return float(result.fun), time.perf_counter() - began, int(result.nit), design.shape[1]


def main(argv=None):
    args = parse_args(argv)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(args.master)
        .config("spark.driver.memory", args.driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    from memory import PeakMemory

    from sparkml.regression import GeneralizedLinearMixedModel, GeneralizedLinearRegression

    train, test, n_train, n_test = (generate_in_spark if args.spark_data else generate)(spark, args)
    print(f"{n_train:,} training rows, {n_test:,} held out, {args.users:,} users", flush=True)
    results = []
    fixed_alone = (
        []
        if args.skip_fixed
        else [("fixed effect alone", GeneralizedLinearRegression(family="binomial", regParam=1e-4))]
    )
    for name, estimator in [
        *fixed_alone,
        (
            "GeneralizedLinearMixedModel",
            GeneralizedLinearMixedModel(
                family="binomial", regParam=1e-4, entityCols=["user"], entityFeaturesCols=["user_features"]
            ),
        ),
        *(
            [
                (
                    "GeneralizedLinearMixedModel, tol 1e-10",
                    GeneralizedLinearMixedModel(
                        family="binomial",
                        regParam=1e-4,
                        entityCols=["user"],
                        entityFeaturesCols=["user_features"],
                        tol=1e-10,
                        maxIter=100,
                    ),
                )
            ]
            if args.joint
            else []
        ),
    ]:
        began = time.perf_counter()
        with PeakMemory() as peak:
            model = estimator.fit(train)
        seconds = time.perf_counter() - began
        memory = peak.result()
        loss, auc = held_out(model.transform(test))
        history = getattr(model, "objectiveHistory", [])
        results.append(
            {
                "model": name,
                "seconds": seconds,
                "passes": len(history) or None,
                "objective": history[-1] if history else None,
                "log_loss": loss,
                "auc": auc,
                "memory": memory,
            }
        )
        print(f"  {name}: {seconds:.1f} s, log-loss {loss:.4f}, AUC {auc:.4f}, peak memory {memory}", flush=True)
    head = [
        "model",
        "fit s",
        "passes",
        "held-out log-loss",
        "held-out AUC",
        "peak GB: JVM / Python workers / driver Python",
    ]
    joint = None
    if args.joint:
        value, seconds, iterations, size = joint_minimum(train, 1e-4, 1.0)
        joint = {"objective": value, "seconds": seconds, "iterations": iterations, "parameters": size}
        print(f"  joint L-BFGS over {size:,} parameters: F* = {value:.10g} ({iterations} iterations)", flush=True)
        head.append("objective, relative to the joint minimum")
    body = []
    for r in results:
        mem = r["memory"]
        peaks = f"{mem['jvm_gb']:.1f} / {mem['python_workers_gb']:.1f} / {mem['driver_python_gb']:.2f}"
        line = [r["model"], f"{r['seconds']:.1f}", str(r["passes"] or "-"), f"{r['log_loss']:.4f}", f"{r['auc']:.4f}"]
        line.append(peaks)
        if joint is not None:
            gap = None if r["objective"] is None else (r["objective"] - joint["objective"]) / abs(joint["objective"])
            r["relative_gap"] = gap
            line.append("-" if gap is None else f"{gap:+.1e}")
        body.append(line)
    title = (
        f"Mixed model against the fixed effect alone: {args.rows:,} rows, {args.users:,} users, "
        f"{args.features} fixed and {args.user_features} per-user features (binomial)"
    )
    notes = (
        ("Rows generated in Spark (--spark-data). " if args.spark_data else "")
        + "Peak memory: PSS of the JVM (driver and executor in local mode), of the Python workers and of the "
        "driver's Python process while the fit runs (benchmarks/memory.py). "
        "Fit on 80% of the rows, scored on the other 20%. The fixed effect alone is GeneralizedLinearRegression "
        "(binomial, regParam 1e-4); the mixed model runs at its defaults (maxIter 20 passes, tol 1e-6, "
        "entityRegParams 1.0) with the same regParam."
    )
    if joint is not None:
        notes += (
            f" The joint minimum: scipy's L-BFGS-B over all {joint['parameters']:,} parameters at once on the "
            f"collected training rows ({joint['iterations']} iterations, {joint['seconds']:.0f} s on the driver)."
        )
    env = {"args": vars(args), "load_avg_at_end": os.getloadavg()}
    extra = {"environment": env, "results": results, "joint": joint}
    report.write(args.out, title, report.markdown_table(head, body), extra, notes)
    spark.stop()


if __name__ == "__main__":
    main()
