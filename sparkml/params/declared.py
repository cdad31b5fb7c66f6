"""One Param, declared once: ``Declared``, and the tables read off a list of them.

A declaration says everything about a Param that does not need pyspark: its name, its description, its type
converter (which refuses a value as it is set and as a saved file is read), its default, its rule (checked
before any Spark job, by the checkpoint and by the job config) and the type its getter returns. The pyspark
side builds the ``Param``, the getter, the setter, the default and the signature from it
(``sparkml.base.params``); the saved-file reader takes the converters (``sparkml.saved.classes``); the type
stubs are written from it (``tools/write_param_stubs.py``).

MLlib's own Params are declared too, with ``doc=None``: their description, default and converter are
pyspark's (the declaration only adds the rule MLlib's validator sets and the converter that reads a saved
file without pyspark), unless an estimator declares a default of its own (``with_default``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sparkml.params.rules import Rule


class _NoDefault:
    def __repr__(self):
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()  # the Param has no default (unset until a user sets it)


@dataclass(frozen=True)
class Declared:
    """One Param.

    Attributes:
        name: the Param's name (``regParam``).
        converter: value -> the stored value, or TypeError / ValueError naming the Param (pyspark.ml's type
            converters mirrored without pyspark, or this library's: ``sparkml.params.converters``).
        type: the type the getter returns and the setter takes, as a stub writes it (``"float"``,
            ``"str | float"``).
        doc: the description ``explainParams`` shows; None for MLlib's own Params (pyspark's description).
        default: the default, or ``NO_DEFAULT``; for MLlib's Params, set only where an estimator's default
            differs from pyspark's (``with_default``).
        rule: what a value must satisfy (``sparkml.params.rules.Rule``), or None: the converter says it all.
    """

    name: str
    converter: Callable[[Any], Any]
    type: str
    doc: str | None = None
    default: Any = NO_DEFAULT
    rule: Rule | None = None

    @property
    def mllib(self) -> bool:
        """One of MLlib's Params (pyspark declares it)."""
        return self.doc is None

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT

    def with_default(self, default: Any) -> Declared:
        """The same Param with an estimator's own default."""
        return dataclasses.replace(self, default=self.converter(default))

    def with_rule(self, rule: Rule) -> Declared:
        """The same Param with an estimator's own rule."""
        return dataclasses.replace(self, rule=rule)


def by_name(declarations: Iterable[Declared]) -> dict[str, Declared]:
    """Name -> declaration, in order; ValueError when a name is declared twice."""
    out: dict[str, Declared] = {}
    for d in declarations:
        if d.name in out:
            raise ValueError(f"Param {d.name!r} is declared twice")
        out[d.name] = d
    return out


def defaults(declarations: Iterable[Declared]) -> dict[str, Any]:
    """Name -> default of the declarations that have one."""
    return {d.name: d.default for d in declarations if d.has_default}


def rules(declarations: Iterable[Declared]) -> dict[str, Rule]:
    """Name -> rule of the declarations that have one."""
    return {d.name: d.rule for d in declarations if d.rule is not None}


def converters(declarations: Iterable[Declared]) -> dict[str, Callable[[Any], Any]]:
    """Name -> type converter."""
    return {d.name: d.converter for d in declarations}
