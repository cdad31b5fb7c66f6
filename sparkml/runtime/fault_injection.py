"""Test-only fault injection, the library's one test seam: make one chosen task attempt fail, to prove that a
fit survives it (``inject``); a straggler (``straggle``), to measure what a slow task costs each strategy; and a
pause at a named point of a job (``pause``), to kill or race it there. Every hook is off unless its environment
variable is set.

Off unless ``SPARKML_TEST_FAULT_DIR`` names a directory every executor sees (in the executors'
environment: ``spark.executorEnv.*``) holding a file ``faults``, whose text lists ``point:arrival``
pairs, e.g. ``convert:1,pass:3``: the task that reads partition 1 raises ``InjectedFault`` the
``arrival``-th time it reaches ``point``:

* ``convert``: a conversion task, after its blocks are committed (``data.convert``);
* ``pass``: a pass over the blocks, as it opens them: one per iteration with ``sync``, one per
  round with ``averaging``, one per barrier stage with ``allreduce`` (``strategies.partition_sums``).

Arrivals are counted with marker files ``point.N`` in that directory, so a retried attempt, in
whatever process it runs, passes. A test changes ``faults`` between fits and clears the markers.
"""

import os
import time

DIR_ENV = "SPARKML_TEST_FAULT_DIR"
PARTITION = 1
STRAGGLER_ENV = "SPARKML_TEST_STRAGGLER"


class InjectedFault(RuntimeError):
    """The failure the ``faults`` file asked for."""


def inject(point, partition):
    """Raise ``InjectedFault`` where the ``faults`` file asks for it (module docstring)."""
    folder = os.environ.get(DIR_ENV)
    if not folder or partition != PARTITION:
        return
    try:
        with open(os.path.join(folder, "faults")) as f:
            wanted = dict(item.split(":") for item in f.read().split(",") if item.strip())
    except FileNotFoundError:
        return
    if point not in wanted:
        return
    arrival = 1
    while True:  # the attempts of one partition arrive one after another
        try:
            os.close(os.open(os.path.join(folder, f"{point}.{arrival}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            break
        except FileExistsError:
            arrival += 1
    if arrival == int(wanted[point]):
        raise InjectedFault(f"injected fault: {point} of partition {partition}, arrival {arrival}")


def straggle(partition, seconds):
    """The test-only straggler: when ``SPARKML_TEST_STRAGGLER`` (in the executors' environment) is
    ``partition:factor``, a pass over the blocks of that partition that took ``seconds`` sleeps
    (factor - 1) * seconds more, so that its task runs ``factor`` times slower than its peers (the
    scenario of ``benchmarks/bench_strategies.py``)."""
    wanted = os.environ.get(STRAGGLER_ENV)
    if not wanted:
        return
    slow, factor = wanted.split(":")
    if int(slow) == partition and float(factor) > 1:
        time.sleep((float(factor) - 1) * seconds)


PAUSE_ENV = "SPARKML_TEST_PAUSE_FILE"


def pause(point):
    """With ``$SPARKML_TEST_PAUSE_FILE`` set to a path: write ``<path>.<point>`` (holding this process's id), then
    wait until ``<path>`` exists (at most 10 minutes). ``jobs.retrain`` pauses at ``retrain-registered``, between
    registering a version and promoting it."""
    path = os.environ.get(PAUSE_ENV)
    if not path:
        return
    with open(f"{path}.{point}", "w") as f:
        f.write(str(os.getpid()))
    deadline = time.time() + 600
    while not os.path.exists(path) and time.time() < deadline:
        time.sleep(0.1)
