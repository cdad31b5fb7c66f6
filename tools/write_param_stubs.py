"""Write the type stubs of the Params' methods into the classes that declare them.

``sparkml.base.params.declares`` and ``declared_estimator`` make each class's getters, setters and ``__init__`` from
the Params' declarations (``sparkml.params``) when the class is made, so type checkers and editors cannot see them.
This script writes their stubs, typed from the declarations, into each such class between the lines
``# <param-stubs>`` and ``# </param-stubs>``, inside ``if TYPE_CHECKING:``, as pyspark.ml generates its shared
Params' code. ``--check``: write nothing, exit 1 naming the files whose stubs are out of date
(``tests/test_params_declared.py`` runs it).

    python tools/write_param_stubs.py [--check]
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULES = (
    "sparkml.base.params",
    "sparkml.kernel.params",
    "sparkml.linear.logistic_regression",
    "sparkml.linear.linear_svc",
    "sparkml.linear.linear_regression",
    "sparkml.glm.model",
    "sparkml.glm.estimator",
    "sparkml.kernel.kernel_svc",
    "sparkml.glm.mixed_model",
    "sparkml.glm.mixed",
)
BEGIN, END = "# <param-stubs>", "# </param-stubs>"


def _literal(value):
    """``value`` as ruff formats it in source."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def stub_lines(cls) -> list[str]:
    """The stubs of the methods ``declares`` and ``declared_estimator`` made on ``cls`` itself, at the class body's
    indentation plus one level (inside ``if TYPE_CHECKING:``)."""
    from sparkml.base.params import accessor_name, made_by_declaration

    declared = cls.__dict__.get("_declared", ())
    defs = []
    if "__signature__" in getattr(cls.__dict__.get("__init__"), "__dict__", {}):
        defaults = inspect.signature(cls.__init__).parameters
        keywords = []
        for d in declared:
            default = defaults[d.name].default
            annotation = d.type if default is not None else f"{d.type} | None"
            keywords.append(f"    {d.name}: {annotation} = {_literal(default)},")
        defs.append(["def __init__(", "    self,", "    *,", *keywords, ") -> None: ..."])
    for d in declared:
        getter, setter = (cls.__dict__.get(accessor_name(p, d.name)) for p in ("get", "set"))
        if made_by_declaration(getter):
            defs.append([f"def {accessor_name('get', d.name)}(self) -> {d.type}: ..."])
        if made_by_declaration(setter):
            defs.append([f"def {accessor_name('set', d.name)}(self, value: {d.type}) -> Self: ..."])
    if not defs:
        return []
    lines = ["if TYPE_CHECKING:  # made from the Params' declarations (tools/write_param_stubs.py)"]
    for block in defs:
        lines += ["", *("    " + line for line in block)]
    return lines


def rewrite(module_name: str) -> tuple[str, str]:
    """(path, the module's source with every marked class's stubs written)."""
    module = importlib.import_module(module_name)
    path = inspect.getsourcefile(module)
    assert path is not None
    with open(path) as f:
        lines = f.read().split("\n")
    classes = [c for c in vars(module).values() if inspect.isclass(c) and c.__module__ == module_name]
    for cls in sorted(classes, key=lambda c: -inspect.getsourcelines(c)[1]):  # bottom-up: line numbers hold
        stubs = stub_lines(cls)
        source, first = inspect.getsourcelines(cls)
        marks = [first - 1 + i for i, line in enumerate(source) if line.strip() in (BEGIN, END)]
        if not marks:
            if stubs:
                raise SystemExit(f"{path}: class {cls.__name__} has Params' stubs to write but no {BEGIN!r} line")
            continue
        begin, end = marks
        indent = lines[begin][: len(lines[begin]) - len(lines[begin].lstrip())]
        body = [indent + line if line else "" for line in stubs]
        lines[begin + 1 : end] = [*body, ""] if body else []
    return path, "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if any stub is out of date")
    args = parser.parse_args(argv)
    sys.path.insert(0, ROOT)
    stale = []
    for name in MODULES:
        path, text = rewrite(name)
        with open(path) as f:
            if f.read() == text:
                continue
        stale.append(os.path.relpath(path, ROOT))
        if not args.check:
            with open(path, "w") as f:
                f.write(text)
    if stale:
        print(("out of date: " if args.check else "written: ") + ", ".join(stale))
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
