"""mkdocs hook: pages' markers replaced by tables generated from the source tree.

* ``{{ benchmark_results }}``: the latest benchmark results files' tables (``benchmarks/results/*.json``,
  each written by its script with ``benchmarks/report.py``);
* ``{{ strategy_table }}``: the strategies' table (``sparkml/strategies/table.py``), the one validation and
  ``auto`` read;
* ``{{ training_params_table }}``: the Params this library adds to every estimator, from their declarations
  (``sparkml/params/training.py``).
"""

import importlib.util
import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _module(*path):
    spec = importlib.util.spec_from_file_location("_docs_" + path[-1][:-3], os.path.join(_ROOT, *path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _training_params():
    sys.path.insert(0, _ROOT)
    from sparkml.params import training

    rows = ["| Param | default | meaning |", "| --- | --- | --- |"]
    for d in (*training.TRAINING[:4], *training.SOLVER_OPTIONS, *training.TRAINING[4:], training.CLASS_WEIGHT):
        default = "unset" if not d.has_default else "`" + repr(d.default).replace("'", '"') + "`"
        rows.append(f"| `{d.name}` | {default} | {d.doc} |")
    return "\n".join(rows)


_MARKERS = {
    "{{ benchmark_results }}": lambda: _module("benchmarks", "report.py").page(),
    "{{ strategy_table }}": lambda: _module("sparkml", "strategies", "table.py").markdown(),
    "{{ training_params_table }}": _training_params,
}


def on_page_markdown(markdown, page, config, files):
    for marker, render in _MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, render())
    return markdown
