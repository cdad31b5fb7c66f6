"""``jobs/train.py`` run as spark-submit runs it, once per config, in one Spark application.

    spark-submit --master local-cluster[2,1,1024] tests/support/cluster_submit_run.py CONFIG [CONFIG ...]

Each config is run as the file ``jobs/train.py`` itself (``runpy``: ``__main__``, no package, as
``spark-submit jobs/train.py --config CONFIG`` starts it), in the session this script starts first: the job
finds it active, ships the library to the executors (``jobs.session.ship_packages``) and leaves it running
for the next config, so the executor JVMs start once for all the runs. Prints ``CONFIG: exit CODE (SECONDS s)``
per config, and exits with the largest exit code.
"""

import os
import runpy
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/support/ -> the root


def main(configs):
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    codes = []
    try:
        for config in configs:
            sys.argv = [os.path.join(ROOT, "jobs", "train.py"), "--config", config]
            started = time.time()
            try:
                runpy.run_path(sys.argv[0], run_name="__main__")
                codes.append(0)
            except SystemExit as e:
                codes.append(e.code if isinstance(e.code, int) else 1)
            print(f"{config}: exit {codes[-1]} ({time.time() - started:.1f} s)", flush=True)
    finally:
        spark.stop()
    return max(codes)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
