"""Results files: every benchmark writes its numbers as JSON with one ``report`` entry the docs render.

``write(path, title, table, payload)`` prints ``table`` (a Markdown table, as each script formats it) and
writes ``payload`` (every number the script measured) plus::

    "report": {"title": ..., "command": "python benchmarks/bench_x.py --flags", "measured": "YYYY-MM-DD",
               "machine": {...}, "columns": [...], "rows": [[...], ...], "notes": ...}

``page(results_dir)`` renders the reports of a directory's results files as Markdown, one section each; the
docs' performance page is generated with it, so its tables are always the latest files' numbers.
"""

import datetime
import json
import os
import platform
import sys

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
# the page's order: the headline comparisons with pyspark.ml and scikit-learn first, then the rest by name
ORDER = [
    "logistic",
    "svc",
    "sparse",
    "refit",
    "refit_16k",
    "small",
    "cv_logistic",
    "cv_logistic_exact_curve",
    "cv_logistic_pipeline_exact_curve",
    "transform",
    "kernel_svc",
    "kernel_svc_probability",
    "transform_kernel_svc",
    "strategies",
]


def machine():
    """What the numbers depend on: CPU model and cores, the accelerator torch sees, library versions."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    out = {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version()}
    for name in ("torch", "pyspark", "sklearn"):
        module = sys.modules.get(name)
        if module is not None:
            out[name] = module.__version__
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(0)
    return out


def markdown_table(head, body):
    """A Markdown table of the column names ``head`` and the rows ``body`` (strings), padded to align."""
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]

    def line(cells):
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

    return "\n".join([line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(b) for b in body])


def parse_table(table):
    """(columns, rows) of a Markdown table: the header line, then every line but the separator."""
    lines = [line.strip() for line in table.strip().splitlines() if line.strip().startswith("|")]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    body = [row for row in cells[1:] if not all(set(c) <= set("-: ") for c in row)]
    ragged = [row for row in body if len(row) != len(cells[0])]
    if ragged:
        raise ValueError(f"table rows of {len(ragged[0])} cells under a header of {len(cells[0])}: {cells[0]}")
    return cells[0], body


def write(path, title, table, payload, notes="", echo=True):
    """Print ``table`` (``echo``) and write ``payload`` with its report to ``path`` (directories created)."""
    columns, rows = parse_table(table)
    argv = [os.path.join("benchmarks", os.path.basename(sys.argv[0]))] + sys.argv[1:]
    report = {
        "title": title,
        "command": "python " + " ".join(argv),
        "measured": datetime.date.today().isoformat(),
        "machine": machine(),
        "columns": columns,
        "rows": rows,
        "notes": notes,
    }
    if echo:
        print(f"\n{title}\n\n{table}\n")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"report": report, **payload}, f, indent=1)
    if echo:
        print(f"wrote {path}")


def markdown(report):
    """One report as a Markdown section: title, table, then how and where it was measured."""
    m = report["machine"]
    where = ", ".join(f"{k} {v}" for k, v in m.items() if k not in ("cpu", "cores"))
    lines = [
        f"### {report['title']}",
        "",
        "| " + " | ".join(report["columns"]) + " |",
        "|" + "---|" * len(report["columns"]),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in report["rows"]]
    lines += ["", f"`{report['command']}` on {report['measured']}: {m['cpu']}, {m['cores']} cores; {where}."]
    if report.get("notes"):
        lines += ["", report["notes"]]
    return "\n".join(lines) + "\n"


def page(results_dir=RESULTS):
    """Every results file's report in ``results_dir`` as Markdown: those named in ``ORDER`` first, then the rest
    by name."""
    sections = []
    names = [n for n in os.listdir(results_dir) if n.endswith(".json")]
    rank = {name: i for i, name in enumerate(ORDER)}
    for name in sorted(names, key=lambda n: (rank.get(n[:-5], len(ORDER)), n)):
        with open(os.path.join(results_dir, name)) as f:
            result = json.load(f)
        if "report" in result:
            sections.append(markdown(result["report"]))
    return "\n".join(sections)
