"""Model selection: ``CrossValidator`` and ``TrainValidationSplit``, pyspark.ml's with each validation split
scored for the whole param grid in one pass, and pyspark's ``ParamGridBuilder``.

    from sparkml.tuning import CrossValidator, ParamGridBuilder

* ``cross_validator``, ``train_validation_split``: the drop-ins (pyspark's Params, folds and fitted models);
* ``validator``: what both run per split (the grid fitted through ``fitMultiple``, then scored);
* ``scores``: the one scoring pass of a split (driver side) and when it applies;
* ``batches``: what its Spark tasks run (no pyspark);
* ``curves``: the areas under the ROC and PR curves of one model's scores, with Spark's steps;
* ``metrics``: the evaluators' metrics from the pass's sufficient statistics, with Spark's formulas;
* ``pipeline``: a ``Pipeline``'s stages before the estimator, fitted once per split;
* ``grid``: the checks of a param grid; ``persistence``: saving as pyspark's classes; ``threads``: the
  ``parallelism`` threads.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.ml.tuning import ParamGridBuilder, TrainValidationSplitModel

    from sparkml.tuning.cross_validator import CrossValidator, CrossValidatorModel
    from sparkml.tuning.train_validation_split import TrainValidationSplit

__all__ = [
    "CrossValidator",
    "TrainValidationSplit",
    "ParamGridBuilder",
    "CrossValidatorModel",
    "TrainValidationSplitModel",
]

# the names above, imported when first asked for: a Spark task that runs ``batches`` imports this package, and
# should not pay for pyspark.ml and the validators (about 2 s in a fresh Python worker)
_HOMES = {
    "CrossValidator": "sparkml.tuning.cross_validator",
    "TrainValidationSplit": "sparkml.tuning.train_validation_split",
    "ParamGridBuilder": "pyspark.ml.tuning",
    "CrossValidatorModel": "sparkml.tuning.cross_validator",
    "TrainValidationSplitModel": "pyspark.ml.tuning",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
