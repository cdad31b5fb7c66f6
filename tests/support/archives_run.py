"""The packed-environment deployment, end to end (tests/test_archives.py runs it in the background).

``python archives_run.py <scratch dir>``:

1. builds the wheel of this checkout and installs it, with its requirements and no pyspark, into a
   fresh virtual environment (what a user ships: the library, torch, numpy, pyarrow, scipy);
2. packs that environment with ``venv-pack``;
3. ``spark-submit``s this file's ``job`` on ``local-cluster[2,1,1024]`` (two executor JVMs) with
   ``--archives env.tar.gz#environment`` and ``spark.pyspark.python=./environment/bin/python``: the
   executors' Python is the unpacked archive's, and the driver's environment carries no path to this
   checkout, so the executors can import sparkml and torch from nowhere else;
4. the job fits LogisticRegression with ``allreduce`` and with ``sync``, fits KernelSVC and transforms
   with it, and prints one ``RESULTS {json}`` line with what the tasks saw and the numbers.
"""

import glob
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/support/ -> the root


def _run(argv, **kw):
    started = time.time()
    out = subprocess.run(argv, capture_output=True, text=True, **kw)
    if out.returncode != 0:
        raise SystemExit(
            f"{' '.join(argv[:4])} ... failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-5000:]}"
        )
    return time.time() - started, out


def _wheel(scratch, timings):
    """The wheel of this checkout: the one in ``$SPARKML_TESTS_DIST`` (the ``dist/`` that ``make dist`` built, as
    CI does before the system tier; tests/test_packaging.py reads it too), or one built here."""
    wheels = os.environ.get("SPARKML_TESTS_DIST")
    if wheels:
        timings["wheel"] = 0.0
    else:
        wheels = os.path.join(scratch, "wheel")
        timings["wheel"], _ = _run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", wheels, ROOT]
        )
    (wheel,) = [os.path.join(wheels, f) for f in os.listdir(wheels) if f.endswith(".whl")]
    return wheel


def build(scratch):
    """The packed environment's path and the seconds each step took."""
    timings = {}
    wheel = _wheel(scratch, timings)
    env = os.path.join(scratch, "env")
    # without this checkout on PYTHONPATH: pip would take the checkout's metadata (the wheel's build writes it
    # there) for an installed sparkml-torch and leave it out of the environment
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    timings["venv"], _ = _run([sys.executable, "-m", "venv", env], env=clean)
    timings["install"], _ = _run(
        [
            os.path.join(env, "bin", "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-compile",  # venv-pack leaves __pycache__ out: byte-compiling torch's files would be wasted
            "-c",
            os.path.join(ROOT, "constraints.txt"),
            wheel,
        ],
        env=clean,
    )
    archive = os.path.join(scratch, "env.tar.gz")
    venv_pack = os.path.join(os.path.dirname(sys.executable), "venv-pack")
    timings["pack"], _ = _run(
        [
            venv_pack,
            "--prefix",
            env,
            "--output",
            archive,
            "--compress-level",
            "1",
            "--quiet",
            "--exclude",
            "*/__pycache__/*",
        ]
    )
    timings["archive_mb"] = round(os.path.getsize(archive) / 2**20, 1)
    return archive, timings


def submit(scratch, archive):
    spark_submit = os.path.join(os.path.dirname(sys.executable), "spark-submit")
    # without PYTHONDONTWRITEBYTECODE, each executor's first import of torch from the unpacked environment
    # (packed without __pycache__) writes its bytecode there, and the Python workers started after it load it
    # instead of compiling torch again, each
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYTHONDONTWRITEBYTECODE")}
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    seconds, out = _run(
        [
            spark_submit,
            "--master",
            "local-cluster[2,1,1024]",
            "--archives",
            f"{archive}#environment",
            "--conf",
            "spark.pyspark.python=./environment/bin/python",
            "--conf",
            f"spark.pyspark.driver.python={sys.executable}",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.ui.showConsoleProgress=false",
            "--conf",
            "spark.executor.memory=1g",
            os.path.abspath(__file__),
            "job",
        ],
        env=env,
        cwd=scratch,
        timeout=900,
    )
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULTS ")]
    if not lines:
        raise SystemExit(f"no RESULTS line:\n{out.stdout[-3000:]}\n{out.stderr[-5000:]}")
    return seconds, json.loads(lines[-1][len("RESULTS ") :])


def _where(_):
    """What a task's Python sees: its interpreter, and where torch and sparkml come from."""
    import os
    import sys

    import torch

    import sparkml

    yield {"executable": sys.executable, "cwd": os.getcwd(), "torch": torch.__file__, "sparkml": sparkml.__file__}


def job():
    import numpy as np
    from pyspark.ml.classification import LogisticRegression as StockLogisticRegression
    from pyspark.ml.linalg import Vectors, VectorUDT
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DoubleType, LongType, StructField, StructType

    from sparkml.classification import KernelSVC, LogisticRegression

    t0 = time.time()
    spark = SparkSession.builder.getOrCreate()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2000, 5))
    y = ((x @ np.linspace(1, -1, 5) + rng.logistic(size=2000)) > 0).astype(float)
    ring = (np.sum(x[:, :2] ** 2, axis=1) > 1.4).astype(float)  # not linearly separable
    rows = [(i, Vectors.dense(x[i]), float(y[i]), float(ring[i])) for i in range(len(y))]
    schema = StructType(
        [
            StructField("id", LongType()),
            StructField("features", VectorUDT()),
            StructField("label", DoubleType()),
            StructField("ring", DoubleType()),
        ]
    )
    df = spark.createDataFrame(rows, schema).repartition(2).cache()

    tasks = spark.sparkContext.parallelize(range(2), 2).mapPartitions(_where).collect()
    result = {"tasks": tasks, "driver_sparkml": __import__("sparkml").__file__}
    seconds = {"job_start_and_tasks": time.time() - t0}
    params = {"regParam": 0.01, "tol": 1e-10, "maxIter": 200}
    stock = StockLogisticRegression(**params).fit(df)
    for strategy in ("allreduce", "sync"):
        model = LogisticRegression(strategy=strategy, **params).fit(df)
        result[strategy] = {"coefficients": model.coefficients.toArray().tolist(), "intercept": model.intercept}
    seconds["job_linear_fits"] = time.time() - t0 - seconds["job_start_and_tasks"]
    result["stock"] = {"coefficients": stock.coefficients.toArray().tolist(), "intercept": stock.intercept}

    kernel = KernelSVC(labelCol="ring", numLandmarks=100, gamma=1.0).fit(df)
    scored = kernel.transform(df).select("features", "ring", "rawPrediction", "prediction").collect()
    result["kernel"] = {
        "accuracy": float(np.mean([r.prediction == r.ring for r in scored])),
        "largest_raw_difference": max(
            float(np.max(np.abs(r.rawPrediction.toArray() - kernel.predictRaw(r.features).toArray()))) for r in scored
        ),
        "rows": len(scored),
    }
    seconds["job_kernel"] = time.time() - t0 - sum(seconds.values())
    result["seconds"] = seconds
    print("RESULTS " + json.dumps(result), flush=True)
    spark.stop()


def _worker_dir():
    """Where local-cluster's workers put each executor's directory, and the archive unpacked in it (Spark's
    ``LocalSparkCluster`` fixes it to ``$SPARK_HOME/work``: the pip-installed pyspark's folder)."""
    import pyspark

    return os.path.join(os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__), "work")


def main(scratch):
    import shutil

    archive, timings = build(scratch)
    work = _worker_dir()
    before = set(os.listdir(work)) if os.path.isdir(work) else set()
    try:
        timings["spark_submit"], result = submit(scratch, archive)
    finally:  # each executor unpacked the 1.2 GB environment there (only this run's applications have one: an
        # application of another local-cluster started meanwhile keeps its executors' directories)
        for app in set(os.listdir(work)) - before if os.path.isdir(work) else ():
            if glob.glob(os.path.join(work, app, "*", "environment")):
                shutil.rmtree(os.path.join(work, app), ignore_errors=True)
    result["timings"] = {k: round(v, 1) for k, v in {**timings, **result.pop("seconds")}.items()}
    result["base_python"] = os.path.realpath(os.path.join(scratch, "env", "bin", "python"))
    print("RESULTS " + json.dumps(result), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "job":
        job()
    else:
        main(sys.argv[1])
