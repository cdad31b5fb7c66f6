"""Lost tasks and executors on ``local-cluster[2,1,1024]`` (tests/support/fault_runs.py, in the background).

The fault hook is ``sparkml.runtime.fault_injection``: off unless the executors' environment names a directory
(``SPARKML_TEST_FAULT_DIR``) whose ``faults`` file asks for a failure. fault_runs.py switches it on
per fit. For every strategy:

* a pass over the blocks that fails once (an iteration's task with ``sync``, a round's with
  ``averaging``, the barrier stage with ``allreduce``), and a conversion task that fails once after
  committing its blocks (in both block layouts: per task slot with ``sync``, per input partition with
  ``averaging``): the same model as a clean fit, bit for bit, and no blocks left;
* an executor JVM SIGKILLed at the third iteration, the one holding partition 1's blocks: ``sync`` and
  ``averaging`` rebuild them from lineage and end at the clean fit's model; ``allreduce`` either fails with
  ``ExecutorLost`` (the barrier stage's blocks cannot be rebuilt), well within a minute, or, when Spark's
  rerun of the stage finds the blocks (on one host the replacement executor can), ends at the clean fit's
  model up to the order of the sums; the default, ``auto`` (an ``allreduce`` stage on this cluster), then
  either fits again with ``sync`` and ends at the clean ``sync`` fit's model, or finishes the rerun stage.

Blocks left on disk are looked for under every executor's local directory; the killed executor's own
directory is its cluster manager's to remove (the process that could delete them is dead), so only
blocks elsewhere count as a leak.
"""

import json
import os
import sys

import pytest
from support import background, fault_runs
from support.helpers import SUPPORT

pytestmark = [pytest.mark.cluster, pytest.mark.system]
STRATEGIES = ("sync", "averaging", "allreduce", "allreduce-averaging")
_SCRATCH = {}


def _scratch():
    if "dir" not in _SCRATCH:
        _SCRATCH["dir"] = background.scratch_dir("faults-")
    return _SCRATCH["dir"]


def background_runs():
    scratch = _scratch()
    return {
        "fault runs": background.Run(
            [sys.executable, os.path.join(SUPPORT, "fault_runs.py"), os.path.join(scratch, "out.json"), scratch],
            env=background.python_env(sys.executable),
            cwd=scratch,
            group="local-cluster",
            timeout=1200,
        )
    }


@pytest.fixture(scope="module")
def outcome():
    run = background.result("fault runs", background_runs())
    assert run.returncode == 0, (run.stdout + run.stderr)[-5000:]
    with open(os.path.join(_scratch(), "out.json")) as f:
        return json.load(f)


def _leaked(blocks, outcome):
    """``blocks`` outside the directories of the executors the runs killed."""
    killed = [r["killed executor's directory"] for r in outcome["executor killed"].values()]
    return [b for b in blocks if not any(d and b.startswith(d + os.sep) for d in killed)]


@pytest.mark.parametrize(
    "strategy, fault",
    [(s, "task fails in a pass") for s in STRATEGIES]
    + [(s, "task fails in conversion") for s in fault_runs.CONVERSION_LAYOUTS],
)
def test_a_failed_task_changes_nothing(outcome, strategy, fault):
    clean, run = outcome[strategy]["clean"], outcome[strategy][fault]
    assert clean["error"] is None and clean["blocks_left"] == []
    assert run["error"] is None, run["error"]
    assert run["fired"] >= 2  # the injected failure happened, and a later attempt went past it
    assert run["max_difference"] == 0.0
    assert run["blocks_left"] == []


@pytest.mark.parametrize("strategy", ["sync", "averaging"])
def test_survives_a_killed_executor(outcome, strategy):
    run = outcome["executor killed"][strategy]
    assert run["killed executor's directory"]
    assert run["error"] is None, run["error"]
    assert run["max_difference"] <= 1e-12
    assert _leaked(run["blocks_left"], outcome) == []


def test_allreduce_fails_clearly_on_a_killed_executor(outcome):
    run = outcome["executor killed"]["allreduce"]
    assert run["killed executor's directory"]
    if run["error"] is None:  # the stage ran again and found the blocks (one host: the dead executor's files
        # stay readable): the same model up to the order of the sums, as for sync
        assert run["max_difference"] <= 1e-12
    else:
        assert run["error"].startswith("ExecutorLost: strategy='allreduce': an executor was lost"), run["error"]
        assert "strategy='sync'" in run["error"]
        assert run["seconds"] < 120
    assert _leaked(run["blocks_left"], outcome) == []


def test_auto_fits_again_with_sync_after_a_killed_executor(outcome):
    run = outcome["executor killed"]["auto"]
    assert run["killed executor's directory"]
    assert run["error"] is None, run["error"]
    if run["fell back to sync"]:  # the stage could not run again: a sync fit from a fresh conversion
        assert run["max_difference"] <= 1e-9  # against the clean sync fit
    else:  # Spark's rerun of the barrier stage finished it (see the allreduce test above)
        assert run["max_difference_from_allreduce"] <= 1e-12
    assert _leaked(run["blocks_left"], outcome) == []


def test_no_blocks_after_the_session_stops(outcome):
    assert _leaked(outcome["blocks left after stop"], outcome) == []


def test_a_stop_right_after_a_fit_waits_for_the_job_deleting_its_blocks(outcome):
    """``spark.stop()`` at once after a fit: no job runs under the shutdown (the JVM would print the job's end)."""
    run = background.result("fault runs", background_runs())
    assert outcome["stopped right after a fit"]["error"] is None
    for sign in ("RejectedExecutionException", "SparkContext was shut down", "cancelled because SparkContext"):
        assert sign not in run.stderr, run.stderr[-3000:]
