"""The test session's Python worker daemon: pyspark's own, with torch and the library imported before it forks.

A Python worker that ends a task abnormally (a task that failed, or a ``head()`` that stopped reading a Python
RDD) is not reused: pyspark's daemon forks a new one, which imports torch again (about 2 s of CPU here). The
suite provokes that hundreds of times (bad input, faults, cancels), so its daemon imports them once, and freezes
what the imports made (``gc.freeze``: the forked workers share those pages and their per-task collections skip
them, as ``sparkml.runtime.task_context.freeze_imports`` does in a user's workers).
"""

import gc

import numpy  # noqa: F401
import pyarrow  # noqa: F401
import torch  # noqa: F401
from pyspark.daemon import manager

import sparkml.data.training_data
import sparkml.strategies.exact  # noqa: F401

if __name__ == "__main__":
    gc.freeze()
    manager()
