"""Checkpoint and resume of a fit's optimizer (the ``checkpointDir`` and ``checkpointInterval`` Params).

Every ``checkpointInterval`` iterations the L-BFGS / OWL-QN loop (``optim.lbfgs``) hands its whole state to
``Checkpoint.snapshot``, which writes it as

    checkpointDir/iteration-000012/state.json    the scalars: iteration and accepted-step counts, memory
                                                 resets, failed-search flag, evaluations, objective history,
                                                 the convergence check's last 20 values and F_0, f and F,
                                                 the iteration times, and the fingerprint below
    checkpointDir/iteration-000012/<name>.npy    the arrays: the iterate x, the smooth gradient g, the
                                                 (pseudo-)gradient pg, the L-BFGS pairs s and y (m, n)

(``np.save``; read back with ``allow_pickle=False``: no pickle). The rounds of model averaging
(``strategies.averaging.run_rounds``) save theta, the round, the history and the round times the same way,
and so do KernelSVC's Newton rounds (``optim.newton``: the solve, warm start or main, every problem's theta,
objective, rounds, history and end state; the iteration number counts the rounds of both solves). What a fit
computes once before its iterations is a part, written once beside them, ``checkpointDir/part-<name>/``
(KernelSVC's feature map: ``part-feature-map``), with the same fingerprint.
The directory is written under a temporary name beside it and renamed into place, so a kill at any moment
leaves the previous checkpoint or the new one, complete; then the older ones are deleted. A fit with
``checkpointDir`` set first looks there (on the driver): it resumes from the newest checkpoint when its
fingerprint (the estimator's class, the Params but checkpointDir / checkpointInterval, the conversion's
statistics of the data: rows, features, weight, label and feature sums, and the size and sums of the start)
matches this fit's, and refuses it otherwise with a ValueError naming the checkpoint and what differs. Floats
compare to a relative 1e-9 (the same data summed in another partitioning). The resumed iterations are those
the uninterrupted fit would have taken: same iterates, objectiveHistory and totalIterations. When the fit
succeeds the checkpoints are deleted (as MLlib deletes its checkpoint files), and ``checkpointDir`` too if
that leaves it empty.

Where it runs: ``sync`` and ``averaging`` read and write on the driver; ``allreduce`` and
``allreduce-averaging`` read on the driver (the state travels to every barrier task, which all resume alike)
and rank 0's task writes, so the directory must be one the driver and the executors share (the same disk in
local mode, a mount such as NFS on a cluster).
"""

import json
import logging
import math
import os
import re
import shutil
import uuid

import numpy as np

from sparkml.params.rules import check
from sparkml.params.training import RULES

logger = logging.getLogger("sparkml")

FORMAT = 1
STATE = "state.json"
_DIR = re.compile(r"^iteration-(\d+)$")
_TMP = ".tmp-iteration-"
_PART = "part-"
_UNFINGERPRINTED = ("checkpointDir", "checkpointInterval")  # where and how often: not what is fitted
_RTOL = 1e-9


def check_params(directory, interval, refusal):
    """ValueError when a fit with ``checkpointDir`` = ``directory`` (None: unset) cannot checkpoint (``refusal``: the
    estimator's reason, or None), or ``directory`` or ``interval`` (``checkpointInterval``) breaks its Param's rule
    (``sparkml.params.training``: a local or mounted path; at least 1)."""
    if directory is None:
        return
    if refusal:
        raise ValueError(f"checkpointDir is set but {refusal}: unset checkpointDir")
    rules = {name: RULES[name] for name in ("checkpointDir", "checkpointInterval")}
    check(rules, {"checkpointDir": directory, "checkpointInterval": interval})


def _jsonable(value):
    if hasattr(value, "toArray"):  # a Vector or Matrix Param
        value = value.toArray()
    return value.tolist() if hasattr(value, "tolist") else value


def data_fingerprint(summary):
    """The data's part of a fingerprint, from the conversion's ``DatasetSummary``: counts and weighted sums."""
    s, w = summary, summary.weight_sum
    second = (np.asarray(s.var_population) + np.asarray(s.mean) ** 2) * w  # sum_i w_i x_ij^2
    return {
        "rows": int(s.rows),
        "features": int(s.n_features),
        "weight sum": float(w),
        "weight square sum": float(s.weight_sq_sum),
        "label sum": float(s.label_mean * w),
        "label square sum": float((s.label_var_population + s.label_mean**2) * w),
        "feature sum": float(np.sum(s.mean) * w),
        "feature square sum": float(np.sum(second)),
        "feature index-weighted sum": float(np.arange(s.n_features) @ np.asarray(s.mean) * w),
        "classes": int(len(s.class_weights)),
    }


def fingerprint(estimator_class, param_values, data, theta0=None):
    """What a checkpoint must match to be resumed: the estimator (``module.Class``), its Params (``param_values``: name
    -> value), the data (``data``: name -> number, e.g. ``data_fingerprint`` of the conversion's summary) and the
    start (module docstring; None: a fit that always starts at zero)."""
    params = {name: _jsonable(v) for name, v in param_values.items() if name not in _UNFINGERPRINTED}
    record = {
        "estimator": {"class": estimator_class},
        "params": json.loads(json.dumps(params, default=str)),
        "data": dict(data),
    }
    if theta0 is not None:
        theta0 = np.asarray(theta0, dtype=np.float64)
        record["start"] = {"size": int(theta0.size), "sum": float(theta0.sum()), "norm": float(np.linalg.norm(theta0))}
    return record


def _same(a, b):
    """Equal, floats to a relative ``_RTOL`` (sums of the same data in another order)."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
    if numbers and (isinstance(a, float) or isinstance(b, float)):
        a, b = float(a), float(b)
        return a == b or math.isclose(a, b, rel_tol=_RTOL) or (math.isnan(a) and math.isnan(b))
    return a == b


def differences(saved, current):
    """The entries where fingerprint ``saved`` and ``current`` differ, as 'section key: checkpoint X, this fit Y'."""
    out = []
    for section in sorted(set(saved) | set(current)):
        a, b = saved.get(section, {}), current.get(section, {})
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b or not _same(a[key], b[key]):
                was, now = a.get(key, "(absent)"), b.get(key, "(absent)")
                out.append(f"{section} {key}: checkpoint {was!r}, this fit {now!r}")
    return out


class Checkpoint:
    """One fit's checkpoints under ``directory``: ``load`` (the state to resume from, in ``resume``),
    ``snapshot`` every ``interval`` iterations, ``remove`` once the fit has succeeded. ``writer``: False in the
    allreduce ranks other than 0, which resume from the same state but write nothing."""

    def __init__(self, directory, interval, fingerprint, name, writer=True):
        if directory.startswith("file:"):
            directory = re.sub(r"^file:(//)?", "", directory)
        self.directory = os.path.abspath(directory)
        self.interval, self.fingerprint, self.name, self.writer = int(interval), fingerprint, name, writer
        self.resume = None  # the state ``load`` found, or None
        self.resume_path = None  # the directory it was read from

    def on_rank(self, rank):
        """This checkpoint as rank ``rank`` of an allreduce stage uses it: only rank 0 writes."""
        if rank == 0:
            return self
        other = Checkpoint(self.directory, self.interval, self.fingerprint, self.name, writer=False)
        other.resume, other.resume_path = self.resume, self.resume_path
        return other

    def _latest(self):
        if not os.path.isdir(self.directory):
            return None
        found = [(int(m.group(1)), n) for n in os.listdir(self.directory) if (m := _DIR.match(n))]
        return os.path.join(self.directory, max(found)[1]) if found else None

    def load(self):
        """The newest checkpoint's state (also kept in ``resume``), or None when there is none; ValueError
        when it belongs to another fit (another fingerprint) or cannot be read."""
        path = self._latest()
        if path is None:
            return None
        state = self._read(path)
        logger.info("%s: resuming from the checkpoint %s (iteration %d)", self.name, path, state["iteration"])
        self.resume, self.resume_path = state, path
        return state

    def load_part(self, part):
        """The state ``save_part`` wrote as ``part``, or None when there is none; ValueError as ``load``."""
        path = os.path.join(self.directory, _PART + part)
        if not os.path.isdir(path):
            return None
        state = self._read(path)
        logger.info("%s: the %s comes from the checkpoint %s", self.name, part, path)
        return state

    def _read(self, path):
        try:
            with open(os.path.join(path, STATE), encoding="utf-8") as f:
                record = json.load(f)
            if record.get("format") != FORMAT:
                raise ValueError(f"format {record.get('format')!r}, this library reads format {FORMAT}")
            differ = differences(record["fingerprint"], self.fingerprint)
            if differ:
                raise ValueError(f"it was written by another fit ({'; '.join(differ)})")
            state = dict(record["state"])
            for name in record["arrays"]:
                state[name] = np.load(os.path.join(path, f"{name}.npy"), allow_pickle=False)
        except (OSError, KeyError, TypeError, json.JSONDecodeError, ValueError) as exc:
            raise ValueError(
                f"{self.name}: cannot resume from the checkpoint {path}: {exc}. Remove it or set "
                f"another checkpointDir to start afresh"
            ) from None
        return state

    def snapshot(self, iteration, export):
        """Write ``export()`` (the optimizer's state dict) when ``iteration`` is a multiple of the interval."""
        if self.writer and iteration % self.interval == 0:
            self.save(iteration, export())

    def save(self, iteration, state, beside=None):
        """Write ``state`` (numpy arrays to ``.npy`` files, everything else to JSON) as the checkpoint of
        ``iteration``, atomically, then delete the older checkpoints. ``beside``: None, or a function of the
        checkpoint's directory (still under its temporary name) that writes files of its own there, which the
        rename makes part of the checkpoint (GeneralizedLinearMixedModel's tables, written by Spark)."""
        final = os.path.join(self.directory, f"iteration-{iteration:06d}")
        self._write(final, f"{iteration:06d}", state, iteration, beside)
        self._delete(keep=final)
        logger.info("%s: checkpoint of iteration %d written to %s", self.name, iteration, final)

    def save_part(self, part, state):
        """Write ``state`` as ``part`` of this fit, atomically: what the fit computes once before its
        iterations (KernelSVC's feature map), kept beside the iterations' checkpoints until ``remove``."""
        final = os.path.join(self.directory, _PART + part)
        self._write(final, part, state, None)
        logger.info("%s: the %s written to %s", self.name, part, final)

    def _write(self, final, tag, state, iteration, beside=None):
        os.makedirs(self.directory, exist_ok=True)
        tmp = os.path.join(self.directory, f"{_TMP}{tag}-{uuid.uuid4().hex}")
        os.makedirs(tmp)
        if beside is not None:
            beside(tmp)
        arrays = {k: v for k, v in state.items() if isinstance(v, np.ndarray)}
        record = {
            "format": FORMAT,
            "name": self.name,
            "iteration": iteration,
            "fingerprint": self.fingerprint,
            "arrays": sorted(arrays),
            "state": {k: v for k, v in state.items() if k not in arrays},
        }
        for name, array in arrays.items():
            with open(os.path.join(tmp, f"{name}.npy"), "wb") as f:
                np.save(f, np.ascontiguousarray(array), allow_pickle=False)
                _flush(f)
        with open(os.path.join(tmp, STATE), "w", encoding="utf-8") as f:
            json.dump(record, f)
            _flush(f)
        try:
            os.rename(tmp, final)
        except OSError:  # the same iteration's checkpoint (or part) is already there (the same state): keep it
            shutil.rmtree(tmp, ignore_errors=True)
        _sync_dir(self.directory)

    def _delete(self, keep=None, parts=False):
        if not os.path.isdir(self.directory):
            return
        for name in os.listdir(self.directory):
            path = os.path.join(self.directory, name)
            if path != keep and (_DIR.match(name) or name.startswith(_TMP) or (parts and name.startswith(_PART))):
                shutil.rmtree(path, ignore_errors=True)

    def remove(self):
        """Delete this fit's checkpoints and parts (the fit succeeded), and the directory when nothing else is
        in it."""
        self._delete(parts=True)
        try:
            os.rmdir(self.directory)
        except OSError:  # absent, or holds files of the user's
            pass


def _flush(f):
    f.flush()
    os.fsync(f.fileno())


def _sync_dir(directory):
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
