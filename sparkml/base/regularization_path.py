"""The regularization path: which param maps of a grid one warm-started solve serves, and in what order.

A grid over the penalty (``regParam`` lambda, ``elasticNetParam`` a) and the stopping rule (``maxIter``,
``tol``) leaves the data, the loss and the parametrization of the objective unchanged: only the penalty
lambda (1 - a)/2 ||C||^2 + lambda a ||C||_1 and where the optimizer stops differ. Such maps are solved on one
path, as glmnet and H2O's ``lambda_search`` solve theirs: lambda from the largest down, each solve starting at
the previous one's solution, which for a nearby lambda is close to the new optimum (the solution is continuous
in lambda), so the solves after the first take a few iterations each. One path is one strategy run: one
barrier stage with ``allreduce``, one chain of Spark jobs on the driver with ``sync``.

Grouping (``group_maps``): maps whose estimator can run a path (``TorchEstimator._path_params``: the linear
models on the exact strategies) fall into one group when they share the conversion of the data and every Param
but the ones the path varies and the ones no fit reads (``FIT_FREE_PARAMS``: the decision threshold and the
output column names). Every other Param (family, fitIntercept, standardization, bounds, the strategy, the
device, ...) separates groups; a map alone in its group is fitted as ``fit`` fits it.

Order (``path_steps``): by elasticNetParam, then lambda from the largest down (ties: the looser stopping
rule first, ``maxIter`` up and ``tol`` down, then the grid's order); maps with the same penalty and stopping
rule, which differ only in Params no fit reads, share one solve. The first map starts where ``fit``
starts (zeros, MLlib's intercepts, or ``setInitialModel``); each later map of the same elasticNetParam starts
at the previous map's solution. The first map of the next elasticNetParam starts at whichever of two points
has the lower objective: the solution at the same lambda of the previous elasticNetParam (the nearest solved
point) or ``fit``'s start. Neither is near in general: with a large lambda and an L1 term the optimum is often
at or near zero (glmnet starts each elasticNetParam's path at zero), with a small one near the other
penalty's solution; one objective evaluation each picks the better.

The linear models of one output without bounds (binomial ``LogisticRegression``, ``LinearSVC``,
``LinearRegression``'s squared error) do not walk the path: their steps run side by side, each from ``fit``'s
start, every pass over the rows evaluating all the steps still running as one (n, d) x (d, k) product
(``ComposedStrategy.minimize_path``, ``optim.lockstep``). On a CPU that pass costs a few single passes and the
grid as many passes as its longest fit, less than the sum of the warm-started solves (which still take
several iterations each, and LinearSVC's at least about 20: its hinge is not smooth); and each model is
exactly its own ``fit``'s. The warm-started path remains for the multinomial model, bounded fits and grids too wide
to keep every run's L-BFGS memory at once (``linear.estimator._SIDE_BY_SIDE_COEFFICIENTS``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

PATH_PARAMS = ("regParam", "elasticNetParam", "maxIter", "tol")  # what one path varies
FIT_FREE_PARAMS = ("threshold", "thresholds", "predictionCol", "rawPredictionCol", "probabilityCol")


def _canonical(value: Any) -> Any:
    """A hashable stand-in for a Param's value that is equal exactly when the values are (matrices and vectors
    by their shape and entries, lists and dicts by their items)."""
    if hasattr(value, "toArray"):
        array = np.asarray(value.toArray(), dtype=np.float64)
        return ("array", array.shape, array.tobytes())
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _canonical(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return ("list", tuple(_canonical(v) for v in value))
    return value


def path_key(estimator, arguments: dict) -> tuple | None:
    """The key that maps solvable on one path share, or None when ``estimator`` fits this map alone;
    ``arguments``: the map's conversion (``TorchEstimator._conversion``)."""
    varying = estimator._path_params(arguments["strategy"])
    if not varying:
        return None
    rest = tuple(
        sorted(
            (param.name, _canonical(value))
            for param, value in estimator.extractParamMap().items()
            if param.name not in varying and param.name not in FIT_FREE_PARAMS
        )
    )
    return type(estimator), tuple(sorted(arguments.items())), rest


def group_maps(estimators, conversions) -> list[list[int]]:
    """The groups of map indices, in the order of their first map: maps with the same ``path_key`` together,
    every other map alone. ``conversions``: each map's ``TrainingData.prepare`` arguments."""
    groups: dict[Any, list[int]] = {}
    for index, (estimator, arguments) in enumerate(zip(estimators, conversions)):
        key = path_key(estimator, arguments)
        groups.setdefault(("alone", index) if key is None else key, []).append(index)
    return list(groups.values())


def _value(estimator, name, default):
    return estimator.getOrDefault(name) if estimator.hasParam(name) else default


def path_steps(estimators) -> list[tuple[tuple[int, ...], tuple[int | None, ...]]]:
    """The path over ``estimators`` (one group's), in solving order: (the positions in ``estimators`` the
    step's solve serves: maps with the same penalty and stopping rule, which differ only in Params no fit
    reads, share it; its candidate starts), each candidate the earlier step whose solution it may start from,
    or None (the start ``fit`` takes); with two, the one of lower objective (module docstring)."""

    def key(i):
        e = estimators[i]
        alpha = _value(e, "elasticNetParam", 0.0)
        return alpha, -e.getOrDefault("regParam"), e.getOrDefault("maxIter"), -e.getOrDefault("tol")

    solves: dict[tuple, list[int]] = {}
    for i in sorted(range(len(estimators)), key=lambda i: (key(i), i)):
        solves.setdefault(key(i), []).append(i)
    steps: list[tuple[tuple[int, ...], tuple[int | None, ...]]] = []
    head, previous_alpha = 0, None  # the step of the current elasticNetParam's largest lambda
    for step, ((alpha, *_), indices) in enumerate(solves.items()):
        starts: tuple[int | None, ...]
        if step == 0:
            starts = (None,)
        elif alpha != previous_alpha:
            starts = (head, None)
        else:
            starts = (step - 1,)
        if alpha != previous_alpha:
            head, previous_alpha = step, alpha
        steps.append((tuple(indices), starts))
    return steps


def path_label(estimator) -> str:
    """The name a path map's iterations are reported under: the model and the map's penalty."""
    penalty = f"regParam={estimator.getOrDefault('regParam'):g}"
    if estimator.hasParam("elasticNetParam"):
        penalty += f", elasticNetParam={estimator.getOrDefault('elasticNetParam'):g}"
    return f"{type(estimator).__name__} [{penalty}]"
