"""MLflow helpers for this library's models.

``autolog``: MLflow's pyspark.ml autologging with this library's models on the allowlist of models it logs
(MLflow's built-in list names pyspark.ml's classes only, so without it a fit logs its Params and metrics but
skips the model with a warning).

``log_model``: a model logged with a ``python_function`` flavor that scores pandas rows without Spark
(``sparkml.serving``), for ``mlflow models serve`` and model serving platforms.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# the fully qualified class names autologging logs the models of: ours and pyspark.ml's (MLflow's own list)
ALLOWLIST = ("sparkml.*", "pyspark.ml.*")


def autolog(log_model_allowlist: Sequence[str] = (), **options: Any) -> None:
    """``mlflow.pyspark.ml.autolog(**options)`` with this library's models and pyspark.ml's allowlisted, plus
    the class name patterns in ``log_model_allowlist``. A fit is then a run with every Param (``strategy``,
    ``device``, ``dtype`` too) and the fitted model logged as ``mlflow.spark.log_model`` logs it: MLlib's files
    (JSON and Parquet, no pickle), which ``mlflow.spark.load_model`` reads back. ``autolog(disable=True)``
    switches it off."""
    import mlflow.pyspark.ml

    mlflow.pyspark.ml.autolog(log_model_allowlist=[*ALLOWLIST, *log_model_allowlist], **options)


def _saved(model, tmp):
    """A local directory holding ``model``'s saved files: ``model`` itself when it is such a path."""
    import os

    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    path = os.path.join(tmp, "model")
    model.write().save(path)
    return path


def _flavor(path, input_example, options):
    """``mlflow.pyfunc``'s arguments for the saved model at ``path``: this library's loader module, the files,
    the signature inferred from ``input_example`` (default ``PandasModel.example()``: one row of zeros, a zero
    offset where the model takes one, a known entity of each table of a mixed model) and the model's output on it."""
    import numpy as np
    import pandas as pd
    from mlflow.models import infer_signature

    from sparkml import __version__, serving

    pyfunc = serving._load_pyfunc(path)
    if input_example is None:
        input_example = pyfunc.example()
    if not isinstance(input_example, pd.DataFrame):  # feature rows: the example's other columns beside each
        example = pyfunc.example()
        column = example.columns[0]  # the features column
        rows = pd.DataFrame({column: [list(map(float, r)) for r in np.atleast_2d(input_example)]})
        input_example = rows.join(example.drop(columns=column), how="cross")
    options.setdefault("pip_requirements", [f"sparkml-torch=={__version__}"])
    return dict(
        loader_module="sparkml.serving",
        data_path=path,
        signature=infer_signature(input_example, pyfunc.predict(input_example)),
        input_example=input_example,
        **options,
    )


def log_model(model: Any, name: str = "model", input_example: Any = None, **options: Any) -> Any:
    """Log ``model`` (a fitted model of this library, or the directory it was saved to) to the active MLflow
    run with a ``python_function`` flavor that scores pandas rows without Spark: its loader
    (``sparkml.serving``) reads the model's own saved files (MLlib's layout: JSON and Parquet, no pickle, kept
    under ``data/model`` in the logged model), with the checks ``load`` makes, and scores them with numpy and
    torch on the CPU, as ``transform`` does. ``mlflow.pyfunc.load_model``, ``mlflow models serve`` and model
    serving platforms take it. The input is a DataFrame with a ``features`` column of feature value lists; the
    output has ``prediction`` and, where the model has them, ``rawPrediction`` and ``probability`` (lists); no
    rows give an empty frame of those columns, and a row that is not the model's count of numbers a ValueError
    naming it.

    ``input_example``: a few feature rows (an array of shape (n, d), or such a DataFrame); default: one row of
    zeros. The model's signature is inferred from it and the model's output on it. ``options`` go to
    ``mlflow.pyfunc.log_model`` (``registered_model_name``, ``pip_requirements``, ...). Returns its ModelInfo."""
    import tempfile

    import mlflow.pyfunc

    with tempfile.TemporaryDirectory(prefix="sparkml-model-") as tmp:
        path = _saved(model, tmp)
        return mlflow.pyfunc.log_model(name=name, **_flavor(path, input_example, options))


def save_model(model: Any, path: str, input_example: Any = None, **options: Any) -> None:
    """``log_model``'s MLflow model written to the local directory ``path`` instead of a run (``mlflow.pyfunc
    .save_model``): what the batch jobs log as each run's ``model`` artifact."""
    import tempfile

    import mlflow.pyfunc

    with tempfile.TemporaryDirectory(prefix="sparkml-model-") as tmp:
        mlflow.pyfunc.save_model(path, **_flavor(_saved(model, tmp), input_example, options))
