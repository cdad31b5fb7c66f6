"""Peak memory of a local Spark application while something runs: the JVM and its Python workers.

Samples /proc (Linux) every ``interval`` seconds in a background thread. Each process is measured by
its PSS (proportional set size, ``/proc/<pid>/smaps_rollup``): a page shared by k processes (the
memory-mapped training blocks, the forked Python workers' common pages) counts 1/k in each, so the
sums below are the memory actually used, not the RSS double count. Also samples the bytes of the
training blocks on disk written while it runs: the datasets created since it started under every
``sparkml-blocks`` directory of the temp dir and of its subdirectories (the executors' root is their first
``SPARK_LOCAL_DIRS``, which a local application sets to its ``blockmgr-*`` directory).

    with PeakMemory() as peak:
        model = estimator.fit(df)
    peak.result()  # {"jvm_gb": ..., "python_workers_gb": ..., "driver_python_gb": ..., "blocks_gb": ...}
"""

import glob
import os
import tempfile
import threading
import time

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


def _block_roots():
    """The ``sparkml-blocks`` directories an executor of a local application may write: under the temp dir, one
    level down (``blockmgr-*``, ``spark-*``) or at its top. Listed at every sample: a new application's appears
    with its first conversion, and other applications' (or tests') stale ones must not hide it."""
    tmp = tempfile.gettempdir()
    return glob.glob(os.path.join(tmp, "*", "sparkml-blocks")) + glob.glob(os.path.join(tmp, "sparkml-blocks"))


def _blocks_bytes(since=0.0):
    """Bytes of the datasets (and their staging directories) created at or after ``since`` (a ``time.time()``)."""
    total = 0
    for root in _block_roots():
        try:
            entries = [e for e in os.scandir(root) if e.is_dir() and e.stat().st_mtime >= since]
        except OSError:  # removed while listed
            continue
        for entry in entries:
            for directory, _, files in os.walk(entry.path):
                for name in files:
                    try:
                        total += os.path.getsize(os.path.join(directory, name))
                    except OSError:
                        pass
    return total


def sample(since=0.0):
    """Current bytes: (JVM, Python workers, this driver process, training blocks on disk written since ``since``)."""
    tree = _children()
    me = os.getpid()
    jvm = [p for p in _descendants(me, tree) if "java" in _cmdline(p).split(" ")[0]]
    workers = [p for j in jvm for p in _descendants(j, tree) if "python" in _cmdline(p)]
    return (sum(_pss_bytes(p) for p in jvm), sum(_pss_bytes(p) for p in workers), _pss_bytes(me), _blocks_bytes(since))


class PeakMemory:
    """Context manager recording the peak of each of ``sample()``'s figures (and of JVM + workers)."""

    def __init__(self, interval=0.5):
        self.interval, self.peaks, self._stop = interval, [0, 0, 0, 0, 0], threading.Event()
        self.started = 0.0

    def _record(self):
        jvm, workers, driver, blocks = sample(self.started)
        for i, v in enumerate((jvm, workers, driver, blocks, jvm + workers)):
            self.peaks[i] = max(self.peaks[i], v)

    def _loop(self):
        while not self._stop.wait(self.interval):
            self._record()

    def __enter__(self):
        self.started = time.time() - 1.0  # directory mtimes have a coarse clock on some file systems
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
