"""MLflow helpers for this library's models.

``autolog``: MLflow's pyspark.ml autologging with this library's models on the allowlist of models it logs
(MLflow's built-in list names pyspark.ml's classes only, so without it a fit logs its Params and metrics but
skips the model with a warning).
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
