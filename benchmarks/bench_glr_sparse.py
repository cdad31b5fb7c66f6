"""GeneralizedLinearRegression on wide hashed features (MLlib refuses more than 4096): sparkml against glum.

The data: ``--rows`` rows of ``--fields`` categorical fields hashed into ``--features`` columns (value 1) plus 4
numeric columns (``bench_sparse.hashed_rows``), Poisson counts y ~ Poisson(exp(x . beta + 1)) with beta_j ~
N(0, 1) on one column in fifty and 0 elsewhere. Written as LIBSVM files and read with
``spark.read.format("libsvm")``, cached and counted before the fit.

* pyspark.ml's GeneralizedLinearRegression(family="poisson") is tried first: it refuses (its message recorded).
* sparkml's GeneralizedLinearRegression(family="poisson", regParam, elasticNetParam) at its other defaults: the
  elastic net by OWL-QN on the penalized mean deviance (``sparkml.glm.penalized``).
* glum's GeneralizedLinearRegressor(family="poisson", alpha=regParam, l1_ratio=elasticNetParam) on the same rows
  (a scipy CSR matrix on the driver, one process), to a tight gradient tolerance: the reference objective
  (below).

glum's L1 solver forms a dense Hessian of its columns (2^18 columns: 512 GiB), so it solves the problem restricted
to the columns that can be nonzero at the optimum (ours, and those whose gradient at our solution comes within half
the L1 threshold); each solution's optimality on the whole problem is then measured (the largest violation of
the KKT conditions, relative to the threshold regParam x elasticNetParam).

Columns: fit seconds, iterations, the objective (1/n) sum d/2 + penalty, its relative difference from glum's, the
KKT violation, and the nonzero coefficients.

    .venv/bin/python benchmarks/bench_glr_sparse.py                     # 500k x 2^18
    .venv/bin/python benchmarks/bench_glr_sparse.py --rows 50000        # a smoke run

Prints a table and writes JSON (default ``benchmarks/results/glr_sparse.json``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report
from bench_linear import environment, make_session
from bench_sparse import hashed_rows

SIGNAL = 0.02  # of the hashed columns carry an effect, N(0, 1)
INTERCEPT = 1.0


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=500_000)
    p.add_argument("--features", type=int, default=1 << 18, help="columns the fields are hashed into")
    p.add_argument("--fields", type=int, default=20, help="categorical fields: one-hot nonzeros a row")
    p.add_argument("--partitions", type=int, default=2, help="LIBSVM files written, one partition each")
    p.add_argument("--reg-param", type=float, default=3e-4)
    p.add_argument("--elastic-net", type=float, default=0.5)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="8g")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "glr_sparse.json")
    )
    args = p.parse_args(argv)
    args.repeats = 1
    return args


def write_libsvm(directory, args):
    """The LIBSVM files (one per partition) and the same rows as a scipy CSR matrix and label vector."""
    from scipy.sparse import csr_matrix

    truth = np.random.default_rng(args.seed)
    beta = np.where(truth.random(args.features) < SIGNAL, truth.normal(0, 1.0, args.features), 0.0)
    per_file = -(-args.rows // args.partitions)
    blocks, labels = [], []
    for part in range(args.partitions):
        n = min(per_file, args.rows - part * per_file)
        rng = np.random.default_rng([args.seed, part])
        cols, values = hashed_rows(n, args.features, args.fields, rng)
        y = rng.poisson(np.exp((values * beta[cols]).sum(1) + INTERCEPT)).astype(float)
        pairs = np.char.add(np.char.add((cols + 1).astype(str), ":"), np.char.mod("%.6g", values))
        with open(os.path.join(directory, f"part-{part:05d}.libsvm"), "w") as f:
            f.write("\n".join(f"{int(label)} " + " ".join(row) for label, row in zip(y, pairs)) + "\n")
        # the values as the file holds them (6 significant digits), so both fits see the same numbers
        values = np.char.mod("%.6g", values).astype(float)
        indptr = np.arange(0, cols.size + 1, cols.shape[1])
        blocks.append(csr_matrix((values.ravel(), cols.ravel(), indptr), shape=(n, args.features)))
        labels.append(y)
    from scipy.sparse import vstack

    return vstack(blocks).tocsr(), np.concatenate(labels)


def objective(x, y, beta, b, lam, alpha):
    """(1/n) sum_i d(y_i, mu_i) / 2 + lam (alpha |beta|_1 + (1 - alpha) / 2 |beta|^2), Poisson, log link."""
    mu = np.exp(x @ beta + b)
    d = 2 * (np.where(y > 0, y * np.log(np.where(y > 0, y, 1) / mu), 0.0) - (y - mu))
    return float(d.mean() / 2 + lam * (alpha * np.abs(beta).sum() + (1 - alpha) / 2 * beta @ beta))


def gradient(x, y, beta, b, lam, alpha):
    """The smooth part's gradient in beta: (1/n) X^T (mu - y) + lam (1 - alpha) beta."""
    mu = np.exp(x @ beta + b)
    return x.T @ (mu - y) / len(y) + lam * (1 - alpha) * beta


def kkt(g, beta, lam, alpha):
    """The largest violation of the optimality conditions over the coefficients, relative to the L1 threshold
    lam alpha: |g_j + lam alpha sign(beta_j)| where beta_j != 0, max(0, |g_j| - lam alpha) where it is 0."""
    t = lam * alpha
    violation = np.where(beta != 0, np.abs(g + t * np.sign(beta)), np.maximum(0.0, np.abs(g) - t))
    return float(violation.max() / t)


def main(argv=None):
    from pyspark.ml.regression import GeneralizedLinearRegression as MLlibGLR

    from sparkml.regression import GeneralizedLinearRegression

    args = parse_args(argv)
    spark = make_session(args)
    args.configs = [("auto", "float32")]
    env = environment(spark, args)
    lam, alpha = args.reg_param, args.elastic_net
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-glr-sparse-") as directory:
        x, y = write_libsvm(directory, args)
        df = spark.read.format("libsvm").option("numFeatures", args.features).load(directory).cache()
        assert df.count() == args.rows
        env.update(nnz=int(x.nnz), input_partitions=df.rdd.getNumPartitions(), fields=args.fields)
        print(f"{args.rows:,} x {args.features:,}, {x.nnz / args.rows:.0f} nonzeros a row", flush=True)
        try:
            MLlibGLR(family="poisson", regParam=lam).fit(df)
            refusal = "(fitted)"
        except Exception as e:
            refusal = next((line for line in str(e).splitlines() if "4096" in line), str(e).splitlines()[0])[:200]
        print(f"  pyspark.ml: {refusal}", flush=True)
        t0 = time.perf_counter()
        model = GeneralizedLinearRegression(family="poisson", regParam=lam, elasticNetParam=alpha).fit(df)
        ours_s = time.perf_counter() - t0
        beta, b = model.coefficients.toArray(), model.intercept
        iterations = model.summary.numIterations
        df.unpersist()
    print(f"  sparkml: {ours_s:.2f} s, {iterations} iterations", flush=True)
    import glum

    # glum's L1 solver (IRLS with coordinate descent) forms the Hessian of every column it is given: 2^18 columns
    # would be 512 GiB. It solves the problem restricted to the columns that can be nonzero at the optimum: ours
    # and every column whose gradient at our solution is within half of the L1 threshold of it. Both solutions'
    # optimality on the whole problem is then checked column by column (``kkt``).
    g = gradient(x, y, beta, b, lam, alpha)
    columns = np.flatnonzero((beta != 0) | (np.abs(g) > 0.5 * lam * alpha))
    t0 = time.perf_counter()
    reference = glum.GeneralizedLinearRegressor(
        family="poisson", alpha=lam, l1_ratio=alpha, gradient_tol=1e-10, max_iter=1000
    ).fit(x[:, columns], y)
    glum_s = time.perf_counter() - t0
    glum_beta = np.zeros(args.features)
    glum_beta[columns] = reference.coef_
    print(f"  glum: {glum_s:.2f} s on {len(columns)} columns, {reference.n_iter_} iterations", flush=True)
    f_glum = objective(x, y, glum_beta, reference.intercept_, lam, alpha)
    for impl, seconds, its, coef, intercept in (
        ("sparkml", ours_s, iterations, beta, b),
        (
            f"glum on {len(columns)} candidate columns (driver)",
            glum_s,
            int(reference.n_iter_),
            glum_beta,
            reference.intercept_,
        ),
    ):
        f = objective(x, y, coef, intercept, lam, alpha)
        rows.append(
            {
                "impl": impl,
                "fit_s": seconds,
                "iterations": its,
                "objective": f,
                "objective_rel_diff": (f - f_glum) / abs(f_glum),
                "kkt": kkt(gradient(x, y, coef, intercept, lam, alpha), coef, lam, alpha),
                "nonzeros": int(np.count_nonzero(coef)),
            }
        )
    cells = [
        [
            r["impl"],
            f"{r['fit_s']:.2f}",
            str(r["iterations"]),
            f"{r['objective']:.10f}",
            f"{r['objective_rel_diff']:+.1e}",
            f"{r['kkt']:.1e}",
            str(r["nonzeros"]),
        ]
        for r in rows
    ]
    cells.insert(0, ["pyspark.ml", "-", "-", "-", "-", "-", "refused: " + refusal.replace("|", "/")])
    title = (
        f"GeneralizedLinearRegression(family='poisson', regParam={lam:g}, elasticNetParam={alpha:g}) on hashed sparse "
        f"rows: {args.rows:,} x {args.features:,}, {x.nnz / args.rows:.0f} nonzeros a row, {args.master}"
    )
    notes = (
        "objective: the penalized mean deviance (sparkml.glm.penalized), both fits' coefficients evaluated in "
        "numpy on the same rows; rel diff from glum's. pyspark.ml's row: its error. glum runs on the driver alone."
    )
    head = ["impl", "fit s", "iterations", "objective", "rel diff from glum", "KKT violation", "nonzero coefficients"]
    table = report.markdown_table(head, cells)
    report.write(args.out, title, table, {"environment": env, "summary": rows, "refusal": refusal}, notes)
    spark.stop()


if __name__ == "__main__":
    main()
