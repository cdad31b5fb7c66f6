"""The documentation's examples run, and its API reference covers the public API.

Every fenced ``python`` block of ``README.md`` and ``docs/**/*.md`` runs, page by page in one namespace (a
page's blocks build on each other, as a reader runs them), in a scratch working directory, on the test
session (``SparkSession.builder.getOrCreate()`` in a block returns it). A block whose first line starts
with ``# needs `` (``# needs a cluster``, ``# needs Databricks``) is compiled, not run.
"""

import ast
import glob
import os
import re
import sys

import pytest
from support.helpers import ROOT

DOCS = os.path.join(ROOT, "docs")
FENCE = re.compile(r"^(?P<indent> *)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```\s*$", re.M | re.S)
COMPILE_ONLY = "# needs "


def pages():
    found = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(DOCS, "**", "*.md"), recursive=True))
    return [p for p in found if python_blocks(p)]


def python_blocks(path):
    """[(line, source)] of the page's ``python`` blocks, dedented."""
    with open(path) as f:
        text = f.read()
    out = []
    for m in FENCE.finditer(text):
        if m.group("info").strip().split(" ")[0] in ("python", "py"):
            indent = len(m.group("indent"))
            body = "".join(line[indent:] for line in m.group("body").splitlines(keepends=True))
            out.append((text.count("\n", 0, m.start()) + 1, body))
    return out


def test_fences_are_found():
    blocks = python_blocks(os.path.join(DOCS, "getting-started.md"))
    assert len(blocks) >= 3 and all("```" not in body for _, body in blocks)


@pytest.fixture
def mlflow_state(monkeypatch):
    """A page may set MLflow's tracking URI, start runs or turn autologging on: undone after it."""
    try:
        from mlflow.tracking._tracking_service import utils
    except ImportError:
        yield
        return
    monkeypatch.setattr(utils, "_tracking_uri", utils._tracking_uri)
    env = os.environ.get("MLFLOW_TRACKING_URI")  # set_tracking_uri exports it for subprocesses
    yield
    import mlflow

    while mlflow.active_run():
        mlflow.end_run()
    if env is None:
        os.environ.pop("MLFLOW_TRACKING_URI", None)
    else:
        os.environ["MLFLOW_TRACKING_URI"] = env
    if "mlflow.pyspark.ml" in sys.modules:
        sys.modules["mlflow.pyspark.ml"].autolog(disable=True)


@pytest.mark.parametrize("page", pages(), ids=lambda p: os.path.relpath(p, ROOT))
def test_page_examples_run(page, spark, tmp_path, monkeypatch, mlflow_state):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__docs__"}
    ran = 0
    for line, body in python_blocks(page):
        code = compile(body, f"{os.path.relpath(page, ROOT)}:{line}", "exec")
        if body.lstrip().startswith(COMPILE_ONLY):
            continue
        exec(code, namespace)
        ran += 1
    assert ran or all(b.lstrip().startswith(COMPILE_ONLY) for _, b in python_blocks(page))


def reference_targets():
    """Every ``::: dotted.name`` in the API reference pages, under its ``heading`` where one is given (the jobs:
    ``::: jobs.train.main`` with heading ``sparkml.jobs.train.main``, as the source checkout lays them out)."""
    names = set()
    for path in glob.glob(os.path.join(DOCS, "reference", "*.md")):
        with open(path) as f:
            for target, heading in re.findall(
                r'^::: *([\w.]+)(?:\n    options:\n      heading: "([\w.]+)")?', f.read(), re.M
            ):
                names.add(heading or target)
    return names


def test_api_reference_covers_the_public_api():
    import sparkml.classification
    import sparkml.regression

    targets = reference_targets()
    for module in (sparkml.classification, sparkml.regression):
        for name in module.__all__:
            assert f"{module.__name__}.{name}" in targets, f"{module.__name__}.{name} is not in docs/reference"
            assert getattr(module, name).__doc__, f"{module.__name__}.{name} has no docstring"
    for job in ("train", "retrain", "predict"):
        assert f"sparkml.jobs.{job}.main" in targets, f"sparkml.jobs.{job}.main is not in docs/reference"


def test_no_work_history_in_user_docs():
    """Commit hashes and work history belong in the changelog (by version), not in pages or docstrings."""
    history = re.compile(r"(?i)\bcommits? [0-9a-f]{7,40}\b|\bsession \d+\b|\(commit\b")
    files = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "benchmarks", "README.md")]
    files += [
        p for p in glob.glob(os.path.join(DOCS, "**", "*.md"), recursive=True) if os.path.basename(p) != "changelog.md"
    ]
    for package in ("sparkml", "gpu", "jobs"):
        files += glob.glob(os.path.join(ROOT, package, "**", "*.py"), recursive=True)
    for path in files:
        with open(path) as f:
            text = f.read()
        if path.endswith(".py"):
            text = "\n".join(
                ast.get_docstring(node) or ""
                for node in ast.walk(ast.parse(text))
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            )
        found = history.search(text)
        assert not found, f"{os.path.relpath(path, ROOT)}: {found.group(0)!r}"


def test_readme_fits_one_screen():
    with open(os.path.join(ROOT, "README.md")) as f:
        assert len(f.read().splitlines()) <= 100
    with open(os.path.join(ROOT, "benchmarks", "README.md")) as f:
        assert len(f.read().splitlines()) <= 80


@pytest.mark.parametrize(
    "page",
    [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(DOCS, "**", "*.md"), recursive=True)),
    ids=lambda p: os.path.relpath(p, ROOT),
)
def test_a_blank_line_follows_every_code_block(page):
    """Markdown renders a table or paragraph glued to a closing fence as plain text."""
    with open(page) as f:
        lines = f.read().split("\n")
    inside = False
    for i, line in enumerate(lines):
        if line.strip().startswith("```"):
            inside = not inside
            if not inside and i + 1 < len(lines):
                assert not lines[i + 1].strip(), f"{os.path.relpath(page, ROOT)}:{i + 2} follows a code block"
