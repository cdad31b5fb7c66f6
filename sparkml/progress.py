"""Live progress of a fit: a progress bar in interactive sessions, and the switch for it.

Every fit reports each iteration as it ends (``Iteration``: the fitted thing's name, the iteration, the
objective, its gradient norm where the optimizer has one, the seconds it took) to the callbacks added
with ``addIterationCallback``, on the driver, whichever strategy runs the optimizer (a barrier stage's
rank 0 relays its iterations to the driver as they end). One such callback is a progress bar:

* ``show_progress()`` (default ``None``): a bar in interactive sessions (a notebook, IPython, the Python
  prompt), none in scripts, ``spark-submit`` jobs and the batch jobs; ``show_progress(True)`` or
  ``show_progress(False)`` forces it on or off for the process.
* The bar is ``tqdm``'s (``tqdm.auto``: a widget in notebooks, text in terminals), one per fitted problem
  (KernelSVC's problems, its classes or pairs, each get theirs), counting iterations up to ``maxIter``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from sparkml.optim.iterations import Iteration

__all__ = ["Iteration", "ProgressBar", "every", "show_progress"]

_SHOW: bool | None = None


def show_progress(enabled: bool | None = True) -> None:
    """Show a progress bar during fits (True), never (False), or in interactive sessions only (None, the default)."""
    global _SHOW
    _SHOW = enabled


def interactive() -> bool:
    """Whether this process is an interactive session: an IPython kernel or shell, or the Python prompt."""
    ipython = sys.modules.get("IPython")
    if ipython is not None and getattr(ipython, "get_ipython", lambda: None)() is not None:
        return True
    return hasattr(sys, "ps1") or bool(sys.flags.interactive)


def progress_shown() -> bool:
    return interactive() if _SHOW is None else _SHOW


class ProgressBar:
    """An iteration callback drawing a ``tqdm`` bar per fitted problem: iterations out of ``total``, with
    the objective and the gradient norm."""

    def __init__(self, total: int | None = None):
        self.total = total
        self._bar: Any = None  # the tqdm bar of the problem being fitted
        self._name: str | None = None

    def __call__(self, event: Iteration) -> None:
        if event.name != self._name:
            self.close()
            from tqdm.auto import tqdm

            self._name = event.name
            self._bar = tqdm(total=self.total, desc=event.name, unit=event.kind.split()[-1], leave=True)
        assert self._bar is not None
        self._bar.update(1)
        postfix = {"objective": f"{event.objective:.6g}"}
        if event.gradient_norm is not None:
            postfix["gradient norm"] = f"{event.gradient_norm:.2e}"
        self._bar.set_postfix(postfix, refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __del__(self):
        self.close()


def every(n: int, write: Callable[[str], None] = print) -> Callable[[Iteration], None]:
    """An iteration callback writing one line every ``n`` iterations of each problem (and its first)."""

    def callback(event: Iteration) -> None:
        if event.iteration == 1 or event.iteration % n == 0:
            grad = f", gradient norm {event.gradient_norm:.3e}" if event.gradient_norm is not None else ""
            write(f"{event.name} {event.kind} {event.iteration}: objective {event.objective:.10g}{grad}")

    return callback
