"""mkdocs hook: ``{{ benchmark_results }}`` in a page becomes the latest benchmark results files' tables.

The tables come from ``benchmarks/results/*.json`` (each written by its benchmark script with
``benchmarks/report.py``), so the performance page always shows the numbers of the files in the tree.
"""
import importlib.util
import os

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_MARKER = "{{ benchmark_results }}"


def _report_module():
    spec = importlib.util.spec_from_file_location("_benchmark_report", os.path.join(_ROOT, "benchmarks", "report.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def on_page_markdown(markdown, page, config, files):
    if _MARKER not in markdown:
        return markdown
    return markdown.replace(_MARKER, _report_module().page())
