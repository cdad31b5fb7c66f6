"""Which kind of Spark session a DataFrame belongs to (classic: py4j, RDDs; or Spark Connect), and how
many tasks its cluster runs at once."""


def is_connect(obj):
    """True for a Spark Connect DataFrame or SparkSession (there is no SparkContext or RDD API)."""
    return type(obj).__module__.startswith("pyspark.sql.connect")


def is_stopped(spark):
    """Whether ``spark``'s session has stopped (or can no longer be asked): its executors' directories are gone."""
    try:
        if is_connect(spark):
            return bool(getattr(spark, "is_stopped", False))
        jsc = spark.sparkContext._jsc
        return jsc is None or bool(jsc.sc().isStopped())
    except Exception:
        return True


def task_slots(spark):
    """Tasks the cluster can run at once (None when a Spark Connect client cannot tell)."""
    if not is_connect(spark):
        sc = spark.sparkContext
        try:  # what Spark's own barrier check counts
            jsc = sc._jsc.sc()
            n = int(jsc.maxNumConcurrentTasks(jsc.resourceProfileManager().defaultResourceProfile()))
            if n > 0:
                return n
        except Exception:  # a JVM without that (private) method: estimate from the conf
            pass
        return max(1, sc.defaultParallelism // int(sc.getConf().get("spark.task.cpus", "1")))
    return slots_from_conf(lambda key: spark.conf.get(key, None))


def conf_value(spark, key):
    """The session's setting ``key`` (its runtime conf, which starts from the application's), or None."""
    return spark.conf.get(key, None)


def slots_from_conf(get):
    """Task slots from the master URL and executor settings, or None."""
    import os
    import re

    cpus = int(get("spark.task.cpus") or 1)
    master = get("spark.master") or ""
    m = re.fullmatch(r"local\[(\d+|\*)(?:,\d+)?\]", master)
    if master == "local":
        return 1
    if m:
        return (os.cpu_count() or 1) if m.group(1) == "*" else int(m.group(1))
    m = re.fullmatch(r"local-cluster\[(\d+),\s*(\d+),\s*\d+\]", master)
    if m:
        return int(m.group(1)) * int(m.group(2)) // cpus
    instances, cores = get("spark.executor.instances"), get("spark.executor.cores")
    if instances and cores:
        return int(instances) * int(cores) // cpus
    return None


def estimated_bytes(df):
    """Spark's own estimate of ``df``'s size in bytes (its optimized plan's statistics: exact for local rows and
    cached frames, the files' size for a file source), read on the driver without a job; None where Spark has no
    estimate (a frame over an RDD) or the session cannot tell (Spark Connect)."""
    if is_connect(df):
        return None
    try:
        size = int(str(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))
        default = int(df.sparkSession.conf.get("spark.sql.defaultSizeInBytes", str(2**63 - 1)).rstrip("bB"))
    except Exception:  # a JVM without these (private) methods
        return None
    return None if size >= default else size
