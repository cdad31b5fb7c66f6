"""The checks of a param grid, made before any Spark job.

pyspark copies each param map onto the estimator with ``Params.copy``, which skips a Param the estimator does
not have: a grid built from another estimator's Params (``addGrid(other.regParam, ...)``) fits the same model
k times and reports k equal metrics. Here such a map is a ``ValueError`` naming the Param. A Param belongs to
the estimator when its ``parent`` is the uid of the estimator or of one of its nested stages (a ``Pipeline``'s
stages, ``OneVsRest``'s classifier: pyspark's ``MetaAlgorithmReadWrite.getUidMap``) that has a Param of that
name. The estimators of this library also check each map's values (``_check_params``), so a value the fit
would refuse is refused before the first fold is cached.
"""

from __future__ import annotations

from typing import Any


def _stages(estimator) -> dict[str, Any]:
    """{uid: stage} of the estimator and its nested stages."""
    from pyspark.ml.util import MetaAlgorithmReadWrite

    try:
        return MetaAlgorithmReadWrite.getUidMap(estimator)
    except (ValueError, RuntimeError):  # a nested validator, stages sharing a uid: only the estimator itself
        return {estimator.uid: estimator}


def check_param_maps(estimator, param_maps, owner: str) -> None:
    """ValueError for the first Param of ``param_maps`` that ``estimator`` (and its nested stages) does not
    have, or, for this library's estimators, the first map whose values a fit would refuse. ``owner``: the
    tuning class, named in the message."""
    stages = _stages(estimator)
    for index, param_map in enumerate(param_maps):
        for param in param_map:
            parent = getattr(param, "parent", None)
            stage = stages.get(parent) if isinstance(parent, str) else None
            if stage is None or not stage.hasParam(param.name):
                raise ValueError(
                    f"{owner}: estimatorParamMaps[{index}] sets {param.name} of another stage (uid "
                    f"{parent}); the estimator is {type(estimator).__name__} (uid "
                    f"{estimator.uid}), which would ignore it: build the grid from the estimator's own Params, "
                    f"e.g. ParamGridBuilder().addGrid(estimator.{param.name}, [...])"
                )
    check = getattr(estimator, "_check_params", None)
    if not callable(check):
        return
    for index, param_map in enumerate(param_maps):
        try:
            estimator.copy(param_map)._check_params()
        except ValueError as e:
            raise ValueError(f"{owner}: estimatorParamMaps[{index}]: {e}") from None


def check_search_params(owner: str, param_maps, parallelism: int, num_folds=None, train_ratio=None) -> None:
    """ValueError, before any Spark job, for a search Spark's own validators refuse (MLlib: ``numFolds >= 2``,
    ``trainRatio`` in [0, 1], ``parallelism >= 1``) or that could only fail later: a training or validation set
    that is empty by construction (``trainRatio`` 0 or 1) and an empty grid (pyspark's thread pool's error)."""
    problems = []
    if not param_maps:
        problems.append("estimatorParamMaps is empty: give at least one map (ParamGridBuilder().build() is [{}])")
    if num_folds is not None and num_folds < 2:
        problems.append(f"numFolds must be >= 2; got {num_folds}")
    if train_ratio is not None and not 0 < train_ratio < 1:
        problems.append(f"trainRatio must be in (0, 1), the share of rows trained on; got {train_ratio}")
    if parallelism < 1:
        problems.append(f"parallelism must be >= 1; got {parallelism}")
    if problems:
        raise ValueError(f"{owner}: " + "; ".join(problems))
