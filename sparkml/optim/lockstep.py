"""Several optimizer runs in lock step, their evaluations batched: one pass over the rows for all of them.

A parameter grid's maps are independent minimizations over the same rows. Each run here is an ordinary
sequential optimizer (``minimize_lbfgs`` calling its ``fun_grad``), run in a thread of its own; but the threads
take turns, one at a time, like coroutines: a run executes until it asks for an evaluation (or returns), then
hands control back. Once every run still going has asked, ``batch`` evaluates all the asked-for points in one
call (one pass over the data: ``sparkml.gpu.problems.GridProblems``), and each run resumes with its own result.

So each run takes exactly the steps it would take alone (its evaluations are its own), the order of everything
is fixed by the runs' own logic and never by thread timing (a barrier stage's ranks make the same collective
calls in the same order), and no two runs execute at the same time (the callbacks they make need no locks).
The number of batched passes is the largest number of evaluations any run makes, not their sum.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any


class Aborted(Exception):
    """Raised inside a run whose evaluation will not come: another run or the batch failed."""


class _Run:
    def __init__(self, index: int, fn: Callable[[Callable[[Any], Any]], Any], back: threading.Semaphore):
        self.index, self.fn, self.back = index, fn, back
        self.go = threading.Semaphore(0)
        self.request: Any = None
        self.reply: Any = None
        self.failure: BaseException | None = None  # to raise in the run instead of returning a reply
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name=f"lockstep-{index}", daemon=True)

    def _main(self):
        self.go.acquire()
        try:
            self.result = self.fn(self.evaluate)
        except BaseException as exc:  # handed to the caller of ``run``
            self.error = exc
        self.done = True
        self.back.release()

    def evaluate(self, x):
        """Called in the run's thread: wait for the batch with every other run's request, return this one's."""
        self.request = x
        self.back.release()
        self.go.acquire()
        if self.failure is not None:
            raise self.failure
        reply, self.reply = self.reply, None
        return reply

    def resume(self):
        """Called by the coordinator: let the run go until it asks again or ends."""
        self.go.release()
        self.back.acquire()


def run(fns: Sequence[Callable[[Callable[[Any], Any]], Any]], batch: Callable[[list], list]) -> list:
    """``[fn(evaluate) for fn in fns]``, the runs in lock step (module docstring): each ``evaluate(x)`` returns
    its element of ``batch([x of every run still going, in the runs' order])``, which is called once per round.

    An exception in a run or in ``batch`` ends every other run (``Aborted`` inside them) and is re-raised here.
    """
    back = threading.Semaphore(0)
    runs = [_Run(i, fn, back) for i, fn in enumerate(fns)]
    for r in runs:
        r.thread.start()
        r.resume()
    error: BaseException | None = next((r.error for r in runs if r.error is not None), None)
    while error is None:
        waiting = [r for r in runs if not r.done]
        if not waiting:
            break
        try:
            replies = batch([r.request for r in waiting])
            if len(replies) != len(waiting):
                raise ValueError(f"batch returned {len(replies)} results for {len(waiting)} points")
        except BaseException as exc:
            error = exc
            break
        for r, reply in zip(waiting, replies):
            r.request, r.reply = None, reply
            r.resume()
        error = next((r.error for r in waiting if r.error is not None), None)
    if error is not None:
        for r in runs:
            if not r.done:
                r.failure = Aborted("another run of the lock step failed")
                r.resume()
        for r in runs:
            r.thread.join()
        raise error
    for r in runs:
        r.thread.join()
    return [r.result for r in runs]
