"""KernelSVC against scikit-learn's SVC: same data, same kernel, gamma and C, same train/test split, one run.

Datasets:

* synthetic nonlinear binary problems of ``--sizes`` training rows x ``--features`` features (the
  script generates them: x ~ N(0, I); the label is the sign of a sum of a sphere, a product and
  a sine in the first five coordinates, plus noise: no linear separator does better than ~60%),
  with ``--test-rows`` held-out rows from the same distribution;
* the classification datasets bundled with scikit-learn (breast cancer, digits with 10 classes,
  wine, iris), 70/30 stratified split, standardized on the training rows; with ``--real-rows N``, breast cancer
  and digits also sized up to N rows (each side of the split drawn with replacement, plus N(0, 0.25^2) noise on
  the standardized features: ``datasets.sized_up``);
* public problems defined by generators or shipped in packages (``datasets.py``): Breiman's twonorm and
  ringnorm (binary, 20 features) and waveform (3 classes, 21 features) at ``--public-rows`` rows, and the
  UCI image segmentation set (7 classes; needs ``pip install river``, skipped without it), split and
  standardized the same way.

Binary problems also time MLlib's ``LinearSVC()`` at its defaults on the same cached DataFrame (``--no-linear-svc``
skips it): a kernel SVM at defaults should cost a small multiple of the linear one Spark users know.

For each: scikit-learn ``SVC(C, kernel, gamma="scale")`` fit seconds and test accuracy; then, for
each ``--landmarks`` value m, ``--selection`` s and ``--loss`` l, ``KernelSVC(regParam=1/(n C), kernel,
gamma="scale", numLandmarks=m, landmarkSelection=s, loss=l)`` on a cached Spark DataFrame
(``--partitions`` partitions, ``--master``): fit seconds (conversion, landmark sampling, the
Nystroem features, Newton), test accuracy (``transform`` of the cached test DataFrame), Newton
rounds. speedup = SVC fit s / KernelSVC fit s; accuracy diff in points. SVC runs with a 2 GB
kernel cache (its default of 200 MB makes it slower). ``--sklearn-max-rows`` skips SVC above that
many training rows (1M rows would take hours). One untimed KernelSVC fit on 5000 rows runs first:
Spark starts its Python workers once per session, and that start (about 10 s here) and the first landmark
search's one-off costs on the driver would otherwise land on whichever fit comes first.

    .venv/bin/python benchmarks/bench_kernel_svc.py                        # 10k, 30k, 100k x 20 + bundled
    .venv/bin/python benchmarks/bench_kernel_svc.py --sizes 1000000 --no-bundled --sklearn-max-rows 0

``--rows N``: the scale run, KernelSVC at its defaults (numLandmarks unset) on N synthetic rows only, no SVC, no
LinearSVC, no other data set; each fit also records the peak memory of the local application (the JVM and its
Python workers, ``memory.py``) and how many rows' kernel blocks the executors stored (the others' are computed
by every pass), into ``benchmarks/results/kernel_svc_<N>.json``:

    .venv/bin/python benchmarks/bench_kernel_svc.py --rows 1000000
    .venv/bin/python benchmarks/bench_kernel_svc.py --rows 3000000
    .venv/bin/python benchmarks/bench_kernel_svc.py --rows 10000000

Prints a table and writes JSON (default ``benchmarks/results/kernel_svc.json``).
"""

import argparse
import logging
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report
from datasets import bundled, public, sized_up, synthetic
from memory import PeakMemory

SVC_CACHE_MB = 2000


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="10000,30000,100000", help="training rows of the synthetic problems")
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--test-rows", type=int, default=10000)
    p.add_argument("--c", type=float, default=1.0, help="SVC's C; KernelSVC regParam = 1 / (n C)")
    p.add_argument("--kernel", default="rbf")
    p.add_argument(
        "--landmarks",
        default="1000,3000",
        help="numLandmarks values, one KernelSVC fit each; 'auto': numLandmarks unset (chosen by the fit)",
    )
    p.add_argument("--selection", default="kmeans", help="landmarkSelection values (kmeans, random), one fit each")
    p.add_argument("--loss", default="hinge", help="KernelSVC loss values (hinge, squared_hinge), one fit each")
    p.add_argument("--strategy", default="allreduce")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="8g")
    p.add_argument("--sklearn-max-rows", type=int, default=200_000)
    p.add_argument("--no-bundled", action="store_true", help="skip scikit-learn's bundled datasets")
    p.add_argument("--no-public", action="store_true", help="skip twonorm, ringnorm, waveform and segment")
    p.add_argument("--public-rows", type=int, default=5000, help="rows of the generated public problems")
    p.add_argument(
        "--real-rows", type=int, default=0, help="rows of the bundled breast cancer and digits sets sized up (0: none)"
    )
    p.add_argument("--no-linear-svc", action="store_true", help="skip MLlib's LinearSVC on binary problems")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rows", type=int, default=None, help="the scale run on this many rows (module docstring)")
    p.add_argument("--kernel-blocks", default=None, help="KernelSVC's kernelBlocks (default: its default)")
    p.add_argument("--kernel-block-memory", default=None, help="KernelSVC's kernelBlockMemory (default: its default)")
    p.add_argument("--out", default=None, help="default: benchmarks/results/kernel_svc.json (kernel_svc_<N>.json)")
    args = p.parse_args(argv)
    if args.rows:
        args.sizes, args.landmarks, args.sklearn_max_rows = str(args.rows), "auto", 0
        args.no_bundled = args.no_public = args.no_linear_svc = True
    args.out = args.out or f"benchmarks/results/kernel_svc{f'_{args.rows}' if args.rows else ''}.json"
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    args.landmarks = [m if m == "auto" else int(m) for m in str(args.landmarks).split(",") if m]
    args.selection = [s for s in args.selection.split(",") if s]
    args.loss = [s for s in args.loss.split(",") if s]
    return args


def fit_linear_svc(train):
    """MLlib's LinearSVC at its defaults on the same cached frame: fit seconds."""
    from pyspark.ml.classification import LinearSVC

    t0 = time.perf_counter()
    LinearSVC().fit(train)
    return time.perf_counter() - t0


def make_session(args):
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(args.master)
        .appName("bench_kernel_svc")
        .config("spark.driver.memory", args.driver_memory)
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    return spark


def frame(spark, x, y, partitions):
    """A cached (label, features: VectorUDT) DataFrame of numpy rows, counted. The rows go through one Arrow table
    (no Python object per row: 10M rows would take minutes and gigabytes as a pandas column of arrays)."""
    import pyarrow as pa
    from pyspark.ml.functions import array_to_vector
    from pyspark.sql import functions as F

    n, d = x.shape
    offsets = pa.array(np.arange(0, n * d + 1, d, dtype=np.int64))
    features = pa.LargeListArray.from_arrays(offsets, pa.array(np.ascontiguousarray(x, dtype=np.float64).ravel()))
    table = pa.table({"label": pa.array(np.asarray(y, dtype=np.float64)), "features": features})
    df = (
        spark.createDataFrame(table)
        .repartition(partitions)
        .select("label", array_to_vector(F.col("features")).alias("features"))
        .cache()
    )
    df.count()
    return df


def fit_sklearn(args, xtr, xte, ytr, yte):
    from sklearn.svm import SVC

    t0 = time.perf_counter()
    svc = SVC(C=args.c, kernel=args.kernel, gamma="scale", cache_size=SVC_CACHE_MB).fit(xtr, ytr)
    fit_s = time.perf_counter() - t0
    return {
        "fit_s": fit_s,
        "accuracy": float(np.mean(svc.predict(xte) == yte)),
        "support_vectors": int(svc.support_vectors_.shape[0]),
    }


def fit_ours(args, train, test, n, m, selection, loss):
    from sparkml.classification import KernelSVC

    blocks = {"kernelBlocks": args.kernel_blocks, "kernelBlockMemory": args.kernel_block_memory}
    est = KernelSVC(
        regParam=1.0 / (n * args.c),
        kernel=args.kernel,
        gamma="scale",
        landmarkSelection=selection,
        loss=loss,
        strategy=args.strategy,
        dtype=args.dtype,
        seed=args.seed,
        **({} if m == "auto" else {"numLandmarks": m}),
        **{k: v for k, v in blocks.items() if v is not None},
    )
    search, logger = LandmarkSearch(), logging.getLogger("sparkml")
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(search)
    try:
        t0 = time.perf_counter()
        with PeakMemory() as peak:
            model = est.fit(train)
        fit_s = time.perf_counter() - t0
    finally:
        logger.removeHandler(search)
        logger.setLevel(level)
    out = model.transform(test).select("label", "prediction").toPandas()
    return {
        "fit_s": fit_s,
        "accuracy": float(np.mean(out["label"].to_numpy() == out["prediction"].to_numpy())),
        "landmarks": model.numLandmarksUsed,
        "selection": selection,
        "loss": loss,
        "gamma": model.gammaValue,
        "newton_rounds": [s.totalIterations for s in model.summaries],
        "landmark_search": search.lines,
        "kernel_blocks_stored": search.stored,
        "peak_memory": peak.result(),
    }


class LandmarkSearch(logging.Handler):
    """Keeps the fit's INFO line on the landmark count it chose (numLandmarks unset)."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.lines, self.stored = [], None

    def emit(self, record):
        if "numLandmarks unset" in record.getMessage():
            self.lines.append(record.getMessage())
        if "the kernel blocks of" in record.getMessage():  # rows stored (the others' computed per pass), of all
            self.stored = list(record.args)


def warm_workers(args, spark, rows=2000):
    """An untimed small fit just before a timed one: Spark stops Python workers that sat idle for a minute, and the
    SVC fit before this one often takes longer, so the timed fit would otherwise pay its workers' start (torch
    imported again in each: ``docs/deployment.md``, "Python workers that start with torch loaded"). Under
    ``allreduce``, which keeps a task per slot whatever the input's size: a small input under ``auto`` is one block,
    one task, and would leave the other slots' workers to start in the timed fit."""
    x, y = synthetic(rows, args.features, args.seed + 2)
    warm = frame(spark, x, y, args.partitions)
    fit_ours(
        argparse.Namespace(**{**vars(args), "strategy": "allreduce"}),
        warm,
        warm,
        rows,
        "auto",
        args.selection[0],
        args.loss[0],
    )
    warm.unpersist()


def run(args, spark, name, xtr, xte, ytr, yte):
    """One row per numLandmarks value, each against the same SVC fit."""
    base = {
        "dataset": name,
        "train_rows": len(ytr),
        "test_rows": len(yte),
        "features": xtr.shape[1],
        "classes": int(len(np.unique(ytr))),
    }
    svc = None
    if len(ytr) <= args.sklearn_max_rows:
        svc = fit_sklearn(args, xtr, xte, ytr, yte)
        print(f"  {name}: SVC fit {svc['fit_s']:.2f} s, accuracy {svc['accuracy']:.4f}", flush=True)
    train, test = frame(spark, xtr, ytr, args.partitions), frame(spark, xte, yte, args.partitions)
    if base["classes"] == 2 and not args.no_linear_svc:
        base["linear_svc_fit_s"] = fit_linear_svc(train)
        print(f"  {name}: MLlib LinearSVC fit {base['linear_svc_fit_s']:.2f} s", flush=True)
    rows = []
    for m, selection, loss in [(m, s, lo) for m in args.landmarks for s in args.selection for lo in args.loss]:
        warm_workers(args, spark)
        row = dict(base, kernel_svc=fit_ours(args, train, test, len(ytr), m, selection, loss))
        print(
            f"  {name}: KernelSVC ({m} landmarks, {selection}, {loss}) fit {row['kernel_svc']['fit_s']:.2f} s, "
            f"accuracy {row['kernel_svc']['accuracy']:.4f}",
            *row["kernel_svc"]["landmark_search"],
            flush=True,
        )
        if svc is not None:
            row.update(
                svc=svc,
                speedup=svc["fit_s"] / row["kernel_svc"]["fit_s"],
                accuracy_diff_points=100 * (row["kernel_svc"]["accuracy"] - svc["accuracy"]),
            )
        rows.append(row)
    train.unpersist()
    test.unpersist()
    return rows


def table(rows):
    head = [
        "dataset",
        "train x d",
        "classes",
        "landmarks",
        "selection",
        "loss",
        "SVC fit s",
        "SVC acc",
        "KernelSVC fit s",
        "KernelSVC acc",
        "speedup",
        "acc diff pts",
        "Newton rounds",
        "LinearSVC fit s",
        "x LinearSVC",
        "blocks stored",
        "peak GB",
    ]
    lines = [head]
    for r in rows:
        ours, svc = r["kernel_svc"], r.get("svc")
        lines.append(
            [
                r["dataset"],
                f"{r['train_rows']} x {r['features']}",
                str(r["classes"]),
                str(ours["landmarks"]),
                ours["selection"],
                ours["loss"],
                f"{svc['fit_s']:.2f}" if svc else "-",
                f"{svc['accuracy']:.4f}" if svc else "-",
                f"{ours['fit_s']:.2f}",
                f"{ours['accuracy']:.4f}",
                f"{r['speedup']:.1f}x" if svc else "-",
                f"{r['accuracy_diff_points']:+.2f}" if svc else "-",
                ",".join(map(str, ours["newton_rounds"])),
                f"{r['linear_svc_fit_s']:.2f}" if "linear_svc_fit_s" in r else "-",
                f"{ours['fit_s'] / r['linear_svc_fit_s']:.2f}" if "linear_svc_fit_s" in r else "-",
                "{:,} of {:,} rows".format(*ours["kernel_blocks_stored"]) if ours.get("kernel_blocks_stored") else "-",
                f"{ours['peak_memory']['jvm_plus_workers_gb']:.1f}" if "peak_memory" in ours else "-",
            ]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = ["| " + " | ".join(c.ljust(w) for c, w in zip(line, widths)) + " |" for line in lines]
    out.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(out)


def main(argv=None):
    args = parse_args(argv)
    spark = make_session(args)
    import pyspark
    import sklearn
    import torch

    env = {
        "python": platform.python_version(),
        "cores": os.cpu_count(),
        "load_avg_at_start": os.getloadavg(),
        "spark": pyspark.__version__,
        "torch": torch.__version__,
        "sklearn": sklearn.__version__,
        **{k: v for k, v in vars(args).items() if k != "out"},
    }
    print(
        f"KernelSVC vs SVC: kernel {args.kernel}, C {args.c}, landmarks {args.landmarks}, {args.strategy}, "
        f"{args.dtype}, {args.master}, load {env['load_avg_at_start'][0]:.2f}",
        flush=True,
    )
    # untimed: starts the Python workers, and runs a landmark search on the driver (k-means, the stand-in classifier,
    # an eigendecomposition: their first calls pay one-off costs that would land on whichever fit comes first)
    warm_x, warm_y = synthetic(5000, args.features, args.seed)
    warm = frame(spark, warm_x, warm_y, args.partitions)
    fit_ours(args, warm, warm, 5000, "auto", args.selection[0], args.loss[0])
    if not args.no_linear_svc:
        fit_linear_svc(warm)  # untimed: loads MLlib's classes
    warm.unpersist()
    rows = []
    datasets = [
        (
            f"synthetic {n // 1000}k",
            *synthetic(n, args.features, args.seed),
            *synthetic(args.test_rows, args.features, args.seed + 1),
        )
        for n in args.sizes
    ]
    for name, xtr, ytr, xte, yte in datasets:
        rows += run(args, spark, name, xtr, xte, ytr, yte)
        save(args.out, env, rows, args, echo=False)
    if not args.no_public:
        for name, xtr, xte, ytr, yte in public(args.public_rows, args.seed):
            rows += run(args, spark, name, xtr, xte, ytr, yte)
            save(args.out, env, rows, args, echo=False)
    for name, xtr, xte, ytr, yte in sized_up(args.real_rows, args.seed) if args.real_rows else []:
        rows += run(args, spark, name, xtr, xte, ytr, yte)
        save(args.out, env, rows, args, echo=False)
    if not args.no_bundled:
        for name, xtr, xte, ytr, yte in bundled():
            rows += run(args, spark, name, xtr, xte, ytr, yte)
            save(args.out, env, rows, args, echo=False)
    save(args.out, env, rows, args)
    spark.stop()


def save(path, env, rows, args, echo=True):
    env["load_avg_at_end"] = os.getloadavg()
    title = (
        f"KernelSVC against scikit-learn's SVC: kernel {args.kernel}, C {args.c}, landmarks {args.landmarks}, "
        f"strategy {args.strategy}, {args.master}"
    )
    report.write(
        path,
        title,
        table(rows),
        {"environment": env, "svc_cache_mb": SVC_CACHE_MB, "results": rows},
        "Same kernel, gamma, C and train/test split for both; speedup: SVC's fit time over KernelSVC's. Each "
        "KernelSVC fit follows an untimed 2,000-row fit: its Python workers have started (Spark stops workers idle "
        "for a minute, as they are during SVC's fit).",
        echo=echo,
    )


if __name__ == "__main__":
    main()
