"""A Python worker daemon for Spark whose workers start with torch and this library already imported.

Set it where the session is created (the jobs set it themselves for the local sessions they start)::

    spark.python.daemon.module=sparkml.worker_daemon

Spark's Python workers fork from a daemon process (``pyspark.daemon``). A fresh worker imports what its first task
needs: for this library's tasks that is torch, about 2 s of CPU on a 2-core machine, paid again by every worker
Spark starts: the first fit of an application, every fit after the workers sat idle for a minute (Spark stops
idle workers after one minute, a fixed interval), and every task after one that failed. This daemon imports torch,
numpy, pyarrow and the modules the library's tasks run before it forks, so each worker starts with them (shared
copy-on-write), and freezes what those imports made out of the garbage collector's reach (``gc.freeze``: the
collection pyspark runs after each task skips them; ``sparkml.runtime.task_context.freeze_imports`` does the same
in workers of other daemons). Measured on 2 cores (``benchmarks/bench_worker_start.py``): a fit of 20,000 rows after
the workers sat idle took 2.2 s (LogisticRegression) and 4.6 s (KernelSVC) with pyspark's daemon, 1.0 s and 1.6 s
with this one; 0.4 to 0.7 s and 1.3 s with the workers running.

Where an import fails (an executor without torch or this package) the daemon starts anyway, as pyspark's own:
it never stops Spark's other Python tasks. Importing torch does not initialise CUDA, so forked workers can use
their GPUs. Spark 3.5 and 4.x read ``spark.python.daemon.module``; Spark Connect servers and managed platforms
that start their own workers may not.
"""

from __future__ import annotations

import gc
import sys

# what the library's tasks import: the conversion, the strategies' passes, scoring
PRELOADED = (
    "numpy",
    "pyarrow",
    "torch",
    "sparkml.data.training_data",
    "sparkml.strategies.exact",
    "sparkml.scoring.batch",
)


def preload(modules=PRELOADED) -> list[str]:
    """Import ``modules``; the names of those that failed (each reported on stderr, which Spark logs)."""
    import importlib

    failed = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as e:  # an executor without the package: the daemon still serves every other task
            failed.append(name)
            print(f"sparkml worker daemon: {name} not preloaded ({type(e).__name__}: {e})", file=sys.stderr)
    return failed


def main() -> None:
    preload()
    gc.freeze()
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main()
