"""A Spark cluster that schedules GPUs, on a machine without any: ``local-cluster[1,2,1024]`` (one executor JVM, two
task slots) whose discovery script reports two fake GPUs, with ``spark.task.resource.gpu.amount=1``.

    python tests/support/gpu_scheduling_run.py OUT.json SCRATCH

Writes what each task of a plain job was given (its GPU address) and the device choice made from it
(``sparkml.runtime.task_context.device``), and the devices an ``allreduce`` fit's barrier tasks report to the driver's
log, with the fit's coefficients beside a ``sync`` fit's. Without CUDA every choice computes on the CPU, as
``device="auto"`` does, and names the GPU it would have used.
"""

import json
import logging
import os
import stat
import sys
import time

import numpy as np


def discovery_script(scratch):
    path = os.path.join(scratch, "gpus.sh")
    with open(path, "w") as f:
        f.write('#!/usr/bin/env bash\necho \'{"name": "gpu", "addresses": ["0", "1"]}\'\n')
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path


def session(scratch):
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local-cluster[1,2,1024]")
        .appName("sparkml-gpu-scheduling")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.executor.cores", "2")
        .config("spark.task.cpus", "1")
        .config("spark.worker.resource.gpu.amount", "2")
        .config("spark.worker.resource.gpu.discoveryScript", discovery_script(scratch))
        .config("spark.executor.resource.gpu.amount", "2")
        .config("spark.task.resource.gpu.amount", "1")
        .config("spark.task.maxFailures", "1")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )


def task_devices(partition_rows):
    from pyspark import TaskContext

    from sparkml.runtime import task_context

    for _ in partition_rows:
        pass
    ctx = TaskContext.get()
    time.sleep(1.0)  # both tasks hold their GPU at once: Spark must give them different ones
    choice = task_context.device("auto")
    yield {
        "partition": ctx.partitionId(),
        "addresses": task_context.gpu_addresses(),
        "device": choice.device,
        "gpu": choice.gpu,
        "why": choice.why,
    }


def main(out_path, scratch):
    from pyspark.ml.functions import array_to_vector

    from sparkml.classification import LogisticRegression

    spark = session(scratch)
    tasks = spark.sparkContext.parallelize(range(2), 2).mapPartitions(task_devices).collect()

    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    logger = logging.getLogger("sparkml")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)

    rng = np.random.default_rng(3)
    x = rng.standard_normal((2000, 5))
    y = (x @ rng.standard_normal(5) + 0.5 * rng.standard_normal(2000) > 0).astype(float)
    rows = [(x[i].tolist(), float(y[i])) for i in range(len(y))]
    df = spark.createDataFrame(rows, "x array<double>, label double").repartition(2)
    df = df.withColumn("features", array_to_vector("x")).cache()
    allreduce = LogisticRegression(regParam=0.01, strategy="allreduce", tol=1e-10).fit(df)
    sync = LogisticRegression(regParam=0.01, strategy="sync", tol=1e-10).fit(df)
    out = {
        "tasks": sorted(tasks, key=lambda t: t["partition"]),
        "device_lines": [line for line in lines if "computed on" in line],
        "max_coefficient_difference": float(
            np.max(np.abs(allreduce.coefficients.toArray() - sync.coefficients.toArray()))
        ),
    }
    with open(out_path, "w") as f:
        json.dump(out, f)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
