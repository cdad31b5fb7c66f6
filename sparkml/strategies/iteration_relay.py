"""Progress events from rank 0 of a barrier stage to the driver, as they happen.

A barrier stage's optimizer runs on its executors, and its result reaches the driver when the stage ends.
So that a fit's iteration callbacks (``optim.iterations``'s listeners: a notebook's progress bar, the user's
own) see each iteration as it ends, rank 0 writes every line and event it reports to the driver's
rendezvous store (``TaskRelay``: one small ``set`` per iteration, sealed with the stage's secret like the
rendezvous itself), and a thread on the driver (``DriverListener``) reads them in order every
``POLL_SECONDS`` and hands them to the fit's ``Progress``. A stage attempt that fails and runs again
reports under its own keys; the listener follows the newest attempt. In Spark Connect rank 0 hosts the
store, which the client may not reach: there the events are replayed when the stage returns.
"""

from __future__ import annotations

import json
import logging
import threading

from sparkml.optim.iterations import from_record

logger = logging.getLogger("sparkml")

POLL_SECONDS = 0.2


class TaskRelay:
    """Rank 0's side: ``send(line, record)`` writes event n of this attempt under ``event/n``."""

    def __init__(self, store):
        self.store, self.sent = store, 0

    def send(self, line, record):
        self.store.set(f"event/{self.sent}", json.dumps({"line": line, "event": record}))
        self.sent += 1


class DriverListener:
    """The driver's side: a daemon thread passing attempt e's events, in order, to ``progress`` (logged
    lines, then its listeners); ``store_for(e)``: the store's view of attempt e."""

    def __init__(self, store_for, progress):
        self.store_for, self.progress = store_for, progress
        self.attempt, self.read, self.events = 0, 0, 0
        self._store, self._next = store_for(0), store_for(1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sparkml-progress", daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(POLL_SECONDS):
            self._drain()

    def _drain(self):
        try:
            while True:
                if self._store.check([f"event/{self.read}"]):
                    self._handle(json.loads(self._store.get(f"event/{self.read}")))
                    self.read += 1
                    continue
                if not self._next.check(["event/0"]):
                    return
                self.attempt, self.read = self.attempt + 1, 0  # a retried stage
                self._store, self._next = self._next, self.store_for(self.attempt + 1)
        except Exception as e:  # the store stopped with the stage: nothing more to read
            logger.debug("progress relay: %s", e)

    def _handle(self, message):
        line, record = message["line"], message["event"]
        self.progress.lines.append(line)
        logger.info("%s", line)
        if record is not None:
            self.events += 1
            self.progress.tell(from_record(record))

    def stop(self, drain=True):
        """End the thread; ``drain``: read the events still unread first (the stage has returned)."""
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join()
            if drain:
                self._drain()
            self._store = self._next = self.store_for = None  # the store stops when the stage lets it go
