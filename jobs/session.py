"""The Spark session a job runs in, and shipping this project's code to its executors.

A job reuses a session it is given or that is already active (notebook, tests), takes the one
spark-submit configured, or else starts one from the config's `spark` section after checking
for Java.
"""

import hashlib
import importlib.util
import io
import os
import sys
import tempfile
import zipfile

from sparkml.jobs.java_check import require_java
from sparkml.runtime.cancellation import ctrl_c_cancels

SHIPPED_PACKAGES = ("sparkml", "sparkml.gpu")  # what executors import; sparkml.jobs runs on the driver only


def under_spark_submit():
    """True when spark-submit launched this Python process (it hands over its JVM's gateway)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def get_or_create(spark_cfg, spark=None):
    """Return (session, created_here). The `spark` config section applies only to a new local session."""
    if spark is not None:
        return spark, False
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    if under_spark_submit():  # master and conf come from the spark-submit command line
        return SparkSession.builder.getOrCreate(), True
    require_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers use this interpreter and its packages
    builder = SparkSession.builder.master(spark_cfg["master"]).appName(spark_cfg["app_name"])
    for key, value in session_conf(spark_cfg).items():
        builder = builder.config(key, str(value).lower() if isinstance(value, bool) else str(value))
    return builder.getOrCreate(), True


DAEMON_MODULE = "spark.python.daemon.module"


def session_conf(spark_cfg):
    """The conf of a session the job starts: the config's, and for a local master (whose workers run this
    interpreter, with this package) Python workers that start with torch and the library imported
    (``sparkml.worker_daemon``) unless the config names a daemon of its own. Other masters get the package
    shipped after the session starts, too late for a daemon their executors start first."""
    conf = dict(spark_cfg["conf"])
    master = spark_cfg["master"]
    if master == "local" or master.startswith("local["):
        conf.setdefault(DAEMON_MODULE, "sparkml.worker_daemon")
    return conf


def package_zip(packages=SHIPPED_PACKAGES, directory=None):
    """Zip the importable `packages` (dotted names, sources only) into `directory`; return the path or None.

    Each lands at its dotted name's path in the zip (``sparkml.gpu`` under ``sparkml/gpu/``), once: a
    package's folder is walked without the subpackages zipped on their own, and without following links (in a
    source checkout sparkml/gpu and sparkml/jobs link to gpu/ and jobs/).

    The file name carries a hash of the contents, so shipping unchanged code twice in one
    application adds the same file again (a no-op) instead of a conflicting one.
    """
    buf, count = io.BytesIO(), 0
    nested = set()  # a wheel's sparkml/gpu is zipped as its own entry, not twice
    for name in packages:
        if "." in name:
            spec = importlib.util.find_spec(name)
            if spec is not None and spec.submodule_search_locations:
                location = list(spec.submodule_search_locations)[0]
                nested.add((os.path.dirname(location), os.path.basename(location)))
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in packages:
            spec = importlib.util.find_spec(name)
            if spec is None or not spec.submodule_search_locations:
                continue
            pkg_dir = list(spec.submodule_search_locations)[0]
            prefix = name.replace(".", "/")
            for root, dirs, files in os.walk(pkg_dir):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__" and (root, d) not in nested)
                for f in sorted(files):
                    if not f.endswith((".pyc", ".pyo")):
                        full = os.path.join(root, f)
                        arcname = os.path.join(prefix, os.path.relpath(full, pkg_dir))
                        info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
                        with open(full, "rb") as src:
                            zf.writestr(info, src.read(), zipfile.ZIP_DEFLATED)
                        count += 1
    if count == 0:
        return None
    digest = hashlib.sha256(buf.getvalue()).hexdigest()[:12]
    directory = directory or os.path.join(tempfile.gettempdir(), "sparkml-pyfiles")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{'_'.join(packages)}-{digest}.zip")
    if not os.path.exists(path):
        with open(path, "wb") as out:
            out.write(buf.getvalue())
    return path


def ship_packages(spark):
    """addPyFile a zip of sparkml (with sparkml.gpu) when executors may not be able to import them.

    Skipped for `local`/`local[n]` masters, whose Python workers run on the driver's machine with this
    interpreter, and for Spark Connect sessions (install the packages on the server there).
    Otherwise (yarn, k8s, spark://, local-cluster) the zip goes first on the executors' sys.path.
    """
    try:
        sc = spark.sparkContext
        master = sc.master
    except Exception:  # Spark Connect: no SparkContext
        return None
    if master == "local" or master.startswith("local["):
        return None
    path = package_zip()
    if path is not None:
        sc.addPyFile(path)
    return path


def run_with(spark_cfg, spark, fn):
    """`fn(session)` in `spark`, or in a session started from the config's `spark` section and stopped
    afterwards; Ctrl-C cancels the session's jobs and ends it with ``KeyboardInterrupt``
    (``sparkml.runtime.cancellation.ctrl_c_cancels``)."""
    spark, created = get_or_create(spark_cfg, spark)
    try:
        with ctrl_c_cancels(spark):
            return fn(spark)
    finally:
        if created:
            spark.stop()
