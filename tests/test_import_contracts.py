"""The import contracts of pyproject.toml (``[tool.importlinter]``, which ``make lint`` checks on the import
statements) hold over the imports no statement shows: the ``module:attr`` strings that the strategy table (each
row's solvers) and the catalog (each public class, and its stock pyspark.ml twin) hand to ``importlib``.

The tables themselves import nothing of the library (a contract says so: serving and Param checks read them
without torch or pyspark), so a string is an import made by the module that resolves it: ``string_edges`` lists
each string with that module, and ``test_only_the_known_modules_resolve_strings`` keeps the list complete. The
import graph import-linter builds gets those edges added, and every contract is checked on it; a row whose string
names a module on a floor above the module that resolves it breaks the layers contract (the negative case).
"""

import ast
import dataclasses
import os

import pytest
from support.helpers import ROOT

from sparkml import catalog
from sparkml.strategies import table

pytest.importorskip("importlinter")  # the lint extra (not in the compatibility venvs)

PYPROJECT = os.path.join(ROOT, "pyproject.toml")
# the calls that resolve a table's strings, and the modules allowed to make them (those string_edges names)
RESOLVERS = {
    "minimizer": {"sparkml.strategies.composed"},
    "newton_solver": {"sparkml.strategies.composed"},
    "import_path": {"sparkml.jobs.config", "sparkml.jobs.models"},
}


def string_edges(rows=None, entries=None):
    """(module that resolves it, ``module:attr``) for every string of the strategy table's ``rows`` and the
    catalog's ``entries`` (default: the tables as they are)."""
    rows = table.TABLE if rows is None else rows
    entries = catalog.ENTRIES if entries is None else entries
    edges = []
    for row in rows:  # ComposedStrategy.minimize and .newton call row.minimizer() and row.newton_solver()
        edges += [("sparkml.strategies.composed", p) for p in (row.minimize, row.newton) if p is not None]
    for entry in entries:  # jobs.config.estimator_class; jobs.models.model_class (either flavor)
        edges.append(("sparkml.jobs.config", entry.estimator_path()))
        edges.append(("sparkml.jobs.models", entry.model_path()))
        if entry.stock_model is not None:
            edges.append(("sparkml.jobs.models", entry.stock_model))
    return edges


def contract_report(edges):
    """import-linter's report on pyproject.toml's contracts, over the import graph plus ``edges``."""
    from importlinter import configuration
    from importlinter.adapters.building import GraphBuilder
    from importlinter.application import use_cases
    from importlinter.application.app_config import settings

    class WithStringEdges(GraphBuilder):
        def build(self, *args, **kwargs):
            graph = super().build(*args, **kwargs)
            for importer, path in edges:
                module = path.partition(":")[0]
                if module.split(".")[0] != "sparkml":
                    module = module.split(".")[0]  # external packages are one node each (include_external_packages)
                assert module in graph.modules, f"{path!r} names no module of the graph"
                graph.add_import(importer=importer, imported=module, line_number=0, line_contents=f"resolves {path!r}")
            return graph

    configuration.configure()
    use_cases._register_built_in_contract_types()  # as lint_imports does, before reading contracts
    previous = settings.GRAPH_BUILDER
    settings.configure(GRAPH_BUILDER=WithStringEdges())
    try:
        return use_cases.create_report(use_cases.read_user_options(PYPROJECT), cache_dir=None)
    finally:
        settings.configure(GRAPH_BUILDER=previous)


def broken(report):
    """(contract type, name, what breaks it) of each broken contract."""
    assert not report.could_not_run
    return [
        (type(contract).__name__, contract.name, str(check.metadata)[:3000])
        for contract, check in report.get_contracts_and_checks()
        if not check.kept
    ]


def test_every_string_resolves():
    pytest.importorskip("pyspark")  # the facades and the stock models
    for row in table.TABLE:
        assert callable(row.minimizer()), row.name
        assert row.newton is None or callable(row.newton_solver()), row.name
    for _, path in string_edges(rows=()):
        assert isinstance(catalog.import_path(path), type), path


def test_only_the_known_modules_resolve_strings():
    """A new caller of a resolving function makes imports the contracts do not see until string_edges lists
    them: every call of RESOLVERS' names in the package is in the modules named there."""
    found = {name: set() for name in RESOLVERS}
    package = os.path.join(ROOT, "sparkml")
    for directory, _, files in os.walk(package, followlinks=True):  # sparkml/gpu and sparkml/jobs are links
        for name in (f for f in files if f.endswith(".py")):
            path = os.path.join(directory, name)
            module = os.path.relpath(path, ROOT)[: -len(".py")].replace(os.sep, ".").removesuffix(".__init__")
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.Call):
                    func = node.func
                    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                    if called in found:
                        found[called].add(module)
    assert found == RESOLVERS


def test_the_contracts_hold_with_the_tables_strings():
    edges = string_edges()
    assert len(edges) == 2 * len(catalog.ENTRIES) + sum(e.stock_model is not None for e in catalog.ENTRIES) + sum(
        1 + (r.newton is not None) for r in table.TABLE
    )
    report = contract_report(edges)
    assert report.kept_count >= 6 and broken(report) == []


def test_a_string_to_a_floor_above_breaks_the_layers_contract():
    """A strategy whose solver lives with the estimators (``sparkml.linear``, above ``sparkml.strategies``): no
    import statement shows the edge, the check with the table's strings does."""
    upward = dataclasses.replace(table.TABLE[0], name="upward", minimize="sparkml.linear.estimator:LinearEstimator")
    found = broken(contract_report(string_edges(rows=[*table.TABLE, upward])))
    layers = [(name, why) for kind, name, why in found if kind == "LayersContract"]
    assert len(layers) == 1 and layers[0][0].startswith("jobs -> MLflow -> public faces -> estimators")
    assert "sparkml.strategies.composed" in layers[0][1] and "sparkml.linear.estimator" in layers[0][1]
    # and the cycle it closes (sparkml.linear imports sparkml.strategies)
    assert {kind for kind, _, _ in found} == {"LayersContract", "AcyclicSiblingsContract"}
