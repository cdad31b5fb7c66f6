"""What a Param's value must satisfy: ``Rule``, the rules most Params share (``at_least``, ``choice_of``) and the
check that reads them (``first_problem``).

Each Param's rule is part of its declaration (``sparkml.params.declared``). The estimators check them before
any Spark job runs (``base.validation.check_params``), the checkpoint before it resumes
(``optim.checkpoint.check_params``) and the job config as it reads a YAML file (``jobs.config``), so all three
refuse a value with the same words. This module imports nothing of the library, and no pyspark or torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


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
