"""benchmarks/report.py: the results files' reports, and the performance page rendered from them."""

import glob
import json
import os
import sys

import pytest
from support.helpers import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import report

TABLE = "| case | seconds | ratio |\n|---|---|---|\n| MLlib | 4.80 | 1.00 |\n| ours | 2.40 | 0.50 |"


def test_write_then_page_round_trips(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/somewhere/bench_x.py", "--rows", "10"])
    report.write(str(tmp_path / "x.json"), "a title", TABLE, {"rows": [1, 2]}, "a note", echo=False)
    with open(tmp_path / "x.json") as f:
        saved = json.load(f)
    assert saved["rows"] == [1, 2]
    assert saved["report"]["command"] == "python benchmarks/bench_x.py --rows 10"
    assert saved["report"]["columns"] == ["case", "seconds", "ratio"]
    assert saved["report"]["rows"] == [["MLlib", "4.80", "1.00"], ["ours", "2.40", "0.50"]]
    page = report.page(str(tmp_path))
    assert "### a title" in page and "| ours | 2.40 | 0.50 |" in page and "`python benchmarks/bench_x.py" in page


def test_a_ragged_table_is_refused():
    with pytest.raises(ValueError, match="3 cells under a header of 5"):
        report.parse_table("| a | |b| | c |\n|---|---|---|\n| 1 | 2 | 3 |")


@pytest.mark.parametrize(
    "path", sorted(glob.glob(os.path.join(ROOT, "benchmarks", "results", "*.json"))), ids=os.path.basename
)
def test_committed_results_have_a_report(path):
    with open(path) as f:
        r = json.load(f)["report"]
    assert r["command"].startswith("python benchmarks/bench_") and r["rows"]
    assert all(len(row) == len(r["columns"]) for row in r["rows"])
