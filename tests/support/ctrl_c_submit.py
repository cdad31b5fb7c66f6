"""Ctrl-C on ``spark-submit jobs/train.py``, mid-fit and before the fit: SIGINT to the whole process group, as a
terminal sends it.

    python tests/support/ctrl_c_submit.py SCRATCH

The demo config with an ``ssp`` fit that would run for minutes (``tol`` 0), a progress line per round (the
driver's output reaches the terminal through spark-submit's JVM); at round 5 the process group gets SIGINT:
the JVM stops its SparkContext (its shutdown hook), the driver's fit is cancelled. Then the same with 3 million
generated rows, SIGINT while they are handed to Spark, before any fit. Prints ``RESULTS {json}``, per run: the
exit code, the seconds from the signal to the exit, the Python tracebacks printed, whether anything was written
to ``output.dir``, and the job's processes still alive 10 s after the exit.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/support/ -> the root
ROUND = re.compile(r"ssp round (\d+): objective")


def _left(marker, wait=10.0):
    """The processes whose command line names ``marker`` still alive ``wait`` seconds after the exit (the job's
    Python driver, its Spark JVM)."""
    deadline = time.time() + wait
    while True:
        out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
        alive = [line.strip()[:200] for line in out.splitlines() if marker in line]
        if not alive or time.time() > deadline:
            return alive
        time.sleep(0.2)


def _submit(scratch, name, extra, signal_when):
    """Run ``spark-submit jobs/train.py`` with the demo config and ``extra`` overrides, SIGINT its process group
    once ``signal_when(stderr so far)`` holds, and return what happened."""
    out_dir = os.path.join(scratch, f"out-{name}")
    bin_dir = os.path.dirname(sys.executable)
    argv = [
        os.path.join(bin_dir, "spark-submit"),
        "--master",
        "local[2]",
        "--conf",
        "spark.ui.enabled=false",
        os.path.join(ROOT, "jobs", "train.py"),
        "--config",
        os.path.join(ROOT, "conf", "logistic_demo.yaml"),
        *extra,
        *("--set", f"output.dir={out_dir}"),
    ]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
    err_path = os.path.join(scratch, f"stderr-{name}")
    with open(err_path, "w") as err:
        proc = subprocess.Popen(argv, env=env, stdout=err, stderr=subprocess.STDOUT, start_new_session=True)
    started = time.time()
    deadline, reached = started + 300, False
    while time.time() < deadline and proc.poll() is None and not reached:
        time.sleep(0.2)
        with open(err_path) as f:
            reached = signal_when(f.read())
    sent = time.time()
    os.killpg(proc.pid, signal.SIGINT)
    try:
        code = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        code = None
    seconds = time.time() - sent
    with open(err_path) as f:
        text = f.read()
    return {
        "reached": reached,
        "seconds to the signal": round(sent - started, 1),  # where the run's time goes
        "exit code": code,
        "seconds": seconds,
        "tracebacks": text.count("Traceback (most recent call last)"),
        "output written": os.path.exists(out_dir) and bool(os.listdir(out_dir)),
        "job processes left": _left(out_dir),
    }


def main(scratch):
    # mid-fit: an ssp fit that would run for minutes (tol 0), SIGINT at its round 5
    fit = (
        *("--set", "model.params.strategy=ssp", "--set", "model.params.maxIter=100000", "--set", "model.params.tol=0"),
        *("--set", "model.progress_every=1", "--set", "data.generated.rows=100000"),
    )
    mid_fit = _submit(scratch, "fit", fit, lambda text: any(int(m.group(1)) >= 5 for m in ROUND.finditer(text)))
    # before any fit: SIGINT while the generated rows are handed to Spark (pyspark's own SIGINT handler would run)
    rows = ("--set", "data.generated.rows=3000000")
    before_fit = _submit(scratch, "before-fit", rows, lambda text: "Starting task 0.0 in stage 0.0" in text)
    print("RESULTS " + json.dumps({"mid-fit": mid_fit, "before the fit": before_fit}))


if __name__ == "__main__":
    main(sys.argv[1])
