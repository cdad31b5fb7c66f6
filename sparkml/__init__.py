"""Drop-in pyspark.ml linear models and kernel SVMs trained data-parallel on Spark with PyTorch kernels.

    from sparkml.classification import LogisticRegression, LinearSVC, KernelSVC
    from sparkml.regression import LinearRegression

The PyTorch math is ``sparkml.gpu`` and the batch jobs ``sparkml.jobs``, so the project claims no
top-level names (``gpu``, ``jobs``) that another distribution could hold. A source checkout keeps them
beside this folder, as ``gpu/`` and ``jobs/``, and links them in (``sparkml/gpu -> ../gpu``,
``sparkml/jobs -> ../jobs``): a checkout on sys.path, an editable install and the wheel (whose build copies
the files through the links) import them alike, with Python's own import system.
"""

__version__ = "0.1.0"


def release_conversions(spark=None):
    """Release the conversions kept for cached DataFrames (``sparkml.data.reuse``): of ``spark``'s session,
    or of every session when None. Their blocks are deleted on the executors now (those a running fit
    reads, when it ends). Returns how many there were."""
    from sparkml.data import reuse

    return reuse.release_all(spark)


def __getattr__(name):
    # ``sparkml.FitCancelled``, the error of a cancelled fit, imported when first asked for (``import sparkml``
    # stays free of pyspark: sparkml.serving runs without it)
    if name == "FitCancelled":
        from sparkml.runtime.cancellation import FitCancelled

        return FitCancelled
    raise AttributeError(f"module 'sparkml' has no attribute {name!r}")
