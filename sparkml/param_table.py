"""Each training Param's default and each Param's check, written once.

``DEFAULTS``: the defaults of the Params this library adds to pyspark.ml's, and of MLlib's ``aggregationDepth``
(MLlib's own, which pyspark sets too; a strategy reads it). Read by the Params' ``_setDefault``
(``base.params``), the estimators' signatures (filled in from the Params' defaults:
``base.params.with_signature_defaults``) and the strategies' options (``strategies.table.StrategyOptions``).
The defaults of MLlib's other Params are pyspark's own, those of KernelSVC's Params ``kernel.params``'s.

``RULES``: Param name -> ``Rule``, what a value must satisfy and the words that refuse it: MLlib's bounds
(its ``ParamValidators``) and those of this library's Params. An estimator adds or overrides rules for its own
Params (``_param_rules``). Read by the estimators before any Spark job runs (``base.validation.check_params``),
by the checkpoint (``optim.checkpoint.check_params``) and by the job config (``jobs.config``), so all three
refuse a value with the same words. The choices of ``strategy``, ``device``, ``dtype`` and ``topology`` are their
Params' type converters (``param_converters.OneOf``), which refuse a value as it is set, with the same words
wherever it is set.

This module imports nothing of the library, and no pyspark or torch: every floor reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

DEFAULTS: dict[str, Any] = dict(  # keyword arguments, as ``_setDefault`` and the signatures write them
    strategy="auto",
    device="auto",
    dtype="float32",
    numWorkers=0,
    localIter=10,
    staleness=3,
    topology="ring",
    checkpointInterval=10,
    aggregationDepth=2,  # MLlib's
)


@dataclass(frozen=True)
class Rule:
    """What a Param's value must satisfy.

    Attributes:
        accepted: value -> whether it is allowed.
        why: what an allowed value is, as the message says it after the Param's name (``must be >= 0``); or a
            function returning it (choices read when the check runs).
        only_with: the rule applies only when this Param (the same or another) is set to a non-empty value
            (``checkpointDir``: unset, no checkpoints, nothing to check).
    """

    accepted: Callable[[Any], bool]
    why: str | Callable[[], str]
    only_with: str | None = None

    def problem(self, name: str, value: Any) -> str | None:
        """The message refusing ``value`` for the Param ``name``, or None when it is allowed."""
        if self.accepted(value):
            return None
        why = self.why() if callable(self.why) else self.why
        return f"{name} {why}; got {value!r}"


def at_least(bound: float, finite: bool = False) -> Rule:
    """A value >= ``bound``; with ``finite``, also below infinity (MLlib's bound takes inf where a solver cannot)."""
    if finite:
        return Rule(lambda v: bound <= v < float("inf"), f"must be a finite number >= {bound}")
    return Rule(lambda v: v >= bound, f"must be >= {bound}")


def choice_of(
    choices: Callable[[], tuple[str, ...]] | tuple[str, ...], note: str = "", ignore_case: bool = False
) -> Rule:
    """A value among ``choices`` (a tuple, or a function returning one, read when the check runs); with
    ``ignore_case``, in any case (MLlib's GLR ``family`` and ``link``)."""

    def allowed():
        return choices() if callable(choices) else choices

    def accepted(v):
        return (v.lower() if ignore_case and isinstance(v, str) else v) in allowed()

    return Rule(accepted, lambda: f"must be one of {', '.join(allowed())}{note}")


def _local_path(directory):
    return "://" not in directory or directory.startswith("file:")


RULES: dict[str, Rule] = {
    # MLlib's (its ParamValidators)
    "maxIter": at_least(0),
    "tol": at_least(0),
    "regParam": at_least(0, finite=True),  # MLlib takes inf
    "elasticNetParam": Rule(lambda v: 0 <= v <= 1, "must be in [0, 1]"),
    "aggregationDepth": at_least(2),
    # this library's
    "numWorkers": at_least(0),
    "localIter": at_least(1),
    "staleness": at_least(0),
    "checkpointDir": Rule(
        _local_path,
        "must be a local or mounted path (shared by the driver and the executors with strategy 'allreduce')",
        only_with="checkpointDir",
    ),
    "checkpointInterval": Rule(lambda v: v >= 1, "must be >= 1 when checkpointDir is set", only_with="checkpointDir"),
}


def first_problem(rules: Mapping[str, Rule], values: Mapping[str, Any]) -> tuple[str, str] | None:
    """(Param, message) for the first Param of ``values`` (name -> value of the Params that have one) that breaks
    its rule in ``rules``, in the rules' order; None when all hold."""
    for name, rule in rules.items():
        if name not in values or (rule.only_with is not None and not values.get(rule.only_with)):
            continue
        problem = rule.problem(name, values[name])
        if problem is not None:
            return name, problem
    return None


def check(rules: Mapping[str, Rule], values: Mapping[str, Any]) -> None:
    """ValueError with the message of ``first_problem``, if any."""
    found = first_problem(rules, values)
    if found is not None:
        raise ValueError(found[1])
