"""Peak memory of a local Spark application while something runs: the JVM and its Python workers.

Samples /proc (Linux) every ``interval`` seconds in a background thread. Each process is measured by
its PSS (proportional set size, ``/proc/<pid>/smaps_rollup``): a page shared by k processes (the
memory-mapped training blocks, the forked Python workers' common pages) counts 1/k in each, so the
sums below are the memory actually used, not the RSS double count. Also samples the bytes of the
training blocks on disk (``sparkml-blocks`` directories under the temp dir: Spark's local dirs).

    with PeakMemory() as peak:
        model = estimator.fit(df)
    peak.result()  # {"jvm_gb": ..., "python_workers_gb": ..., "driver_python_gb": ..., "blocks_gb": ...}
"""

import glob
import os
import tempfile
import threading

_GB = 1024**3


def _children():
    """{ppid: [pid, ...]} of every process."""
    tree = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(ppid, []).append(int(entry))
    return tree


def _descendants(pid, tree):
    out, todo = [], list(tree.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(tree.get(p, []))
    return out


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _pss_bytes(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


_BLOCK_ROOTS: set[str] = set()


def _blocks_bytes():
    if not _BLOCK_ROOTS:  # searched until found: the directories appear with the first conversion, then stay
        # (Spark's local dirs live for the whole application)
        _BLOCK_ROOTS.update(glob.glob(os.path.join(tempfile.gettempdir(), "**", "sparkml-blocks"), recursive=True))
    total = 0
    for root in _BLOCK_ROOTS:
        for directory, _, files in os.walk(root):
            for name in files:
                try:
                    total += os.path.getsize(os.path.join(directory, name))
                except OSError:
                    pass
    return total


def sample():
    """Current bytes: (JVM, Python workers, this driver process, training blocks on disk)."""
    tree = _children()
    me = os.getpid()
    jvm = [p for p in _descendants(me, tree) if "java" in _cmdline(p).split(" ")[0]]
    workers = [p for j in jvm for p in _descendants(j, tree) if "python" in _cmdline(p)]
    return (sum(_pss_bytes(p) for p in jvm), sum(_pss_bytes(p) for p in workers), _pss_bytes(me), _blocks_bytes())


class PeakMemory:
    """Context manager recording the peak of each of ``sample()``'s figures (and of JVM + workers)."""

    def __init__(self, interval=0.5):
        self.interval, self.peaks, self._stop = interval, [0, 0, 0, 0, 0], threading.Event()

    def _record(self):
        jvm, workers, driver, blocks = sample()
        for i, v in enumerate((jvm, workers, driver, blocks, jvm + workers)):
            self.peaks[i] = max(self.peaks[i], v)

    def _loop(self):
        while not self._stop.wait(self.interval):
            self._record()

    def __enter__(self):
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._record()

    def result(self):
        names = ("jvm_gb", "python_workers_gb", "driver_python_gb", "blocks_gb", "jvm_plus_workers_gb")
        return {n: round(v / _GB, 3) for n, v in zip(names, self.peaks)}
