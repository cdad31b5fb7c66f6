"""Fitting many param maps on one conversion of the data, and on one regularization path where they allow it.

A fit converts its DataFrame once into executor-resident blocks (``TrainingData``): often most of
an ``allreduce`` fit's time. ``CrossValidator`` and ``TrainValidationSplit``
fit every param map of their grid on the same training fold through ``Estimator.fitMultiple``,
and pyspark's own ``fitMultiple`` fits each map from the DataFrame, converting the fold once per
map. Here ``fitMultiple`` converts it once per distinct conversion (the columns, the storage and
compute dtypes, how many blocks and whether a barrier stage reads them: what
``TorchEstimator._conversion`` returns) and trains every map on it.

The maps that differ only in regParam, elasticNetParam, maxIter and tol (and Params no fit reads) are
solved together on a regularization path (``base.regularization_path``): the first time the iterator is asked for any
of them, one strategy run (one barrier stage with ``allreduce``, one chain of Spark jobs with ``sync``)
solves them all, lambda from the largest down, each map warm-started at the previous map's solution;
the other maps' requests hand out the stored models. Each model is the one its own ``fit`` would find
(same objective, its own Params, uid and training summary: the iterations of its own solve). The linear
models on the exact strategies run paths; KernelSVC's maps that differ only in regParam (C), maxIter and tol
share one feature map (the landmarks and every partition's kernel blocks), each solved as its own ``fit``
solves it; every other map is fitted alone (the first-order and model-averaging strategies). A map whose
Params are invalid fails alone, at its own request; a path that fails fails every map of it not yet handed
out.

The blocks are released when the last group using them has been trained, or when the iterator is
garbage-collected after an error stopped the grid.

With ``strategy="auto"``, a group whose barrier stage lost an executor is fitted again, with ``sync`` and a
conversion of its own (``TorchEstimator._fit_falling_back``).

Only the estimator itself benefits: a ``Pipeline`` in pyspark's ``CrossValidator`` fits its stages one map
at a time (pyspark's ``Pipeline.fitMultiple``); ``sparkml.tuning``'s validators fit the stages before the
estimator once per split (``sparkml.tuning.pipeline``).
"""

import threading
import weakref
from typing import Any

from sparkml.base.regularization_path import group_maps
from sparkml.base.validation import check_finite_model
from sparkml.data import lent_conversions
from sparkml.data.training_data import TrainingData
from sparkml.runtime.cancellation import cancellable


class _Conversion:
    """One conversion of the dataset, made by its first user (a group of maps) and released after its last."""

    def __init__(self, arguments):
        self.arguments, self.users, self.remaining = arguments, 0, 0
        self.data, self.lock = None, threading.Lock()
        self.owned = True  # False: lent by the caller (``data.lent_conversions``), who releases it

    def acquire(self, dataset):
        with self.lock:
            if self.data is None:
                self.data = lent_conversions.borrowed(dataset, self.arguments)
                self.owned = self.data is None
                if self.owned:
                    self.data = TrainingData.prepare(dataset, **self.arguments)
            return self.data

    def done(self):
        with self.lock:
            self.remaining -= 1
            if self.remaining == 0:
                self.release()

    def release(self):
        data, self.data = self.data, None
        if data is not None and self.owned:
            data.release()


def _finite_or_error(est, model):
    """``model``, or the ValueError of ``check_finite_model`` (raised at that map's request, as ``fit`` raises it)."""
    try:
        return check_finite_model(est, model)
    except ValueError as e:
        return e


def _release_all(conversions):
    """The iterator's finalizer: release what an interrupted grid left converted."""
    for conversion in conversions:
        try:
            with conversion.lock:
                conversion.release()
        except Exception:  # the session may be gone; Spark deletes its local dirs when it ends
            pass


class _Group:
    """The maps one solve serves (a regularization path, or one map alone) and, once solved, their results:
    index -> model, or the exception that map raises."""

    def __init__(self, indices, conversion):
        self.indices, self.conversion = indices, conversion
        self.results: dict[int, Any] | None = None
        self.lock = threading.Lock()


class SharedConversionFits:
    """``fitMultiple``'s iterator: (index, model) per param map, each conversion made once, each group of
    maps solved once (module docstring)."""

    def __init__(self, estimator, dataset, param_maps):
        self.dataset = dataset
        self.estimators = [estimator.copy(m) for m in param_maps]
        if len(self.estimators) > 1 and any(e._checkpoint_dir() for e in self.estimators):
            raise ValueError(
                f"checkpointDir is set but fitMultiple fits {len(self.estimators)} param maps (a "
                f"CrossValidator or TrainValidationSplit grid), and a checkpointDir serves one fit: "
                f"unset checkpointDir"
            )
        by_key: dict[tuple[tuple[str, Any], ...], _Conversion] = {}
        arguments = [est._conversion(dataset) for est in self.estimators]
        conversions = [
            by_key.get(key) or by_key.setdefault(key, _Conversion(a))
            for a, key in ((a, tuple(sorted(a.items()))) for a in arguments)
        ]
        self.group_of: dict[int, _Group] = {}
        for indices in group_maps(self.estimators, arguments):
            group = _Group(indices, conversions[indices[0]])
            group.conversion.users += 1
            group.conversion.remaining += 1
            self.group_of.update((i, group) for i in indices)
        self.next_index, self.lock = 0, threading.Lock()
        weakref.finalize(self, _release_all, list(by_key.values()))

    def __iter__(self):
        return self

    def __next__(self):
        with self.lock:
            index = self.next_index
            if index >= len(self.estimators):
                raise StopIteration
            self.next_index += 1
        group = self.group_of[index]
        with group.lock:  # a request for another map of a group being solved waits for its solve
            if group.results is None:
                group.results = self._solve(group)
        result = group.results[index]
        if isinstance(result, BaseException):
            raise result
        return index, result

    def _solve(self, group):
        """index -> model or exception for every map of ``group``; the group's use of its conversion ends."""
        results: dict[int, Any] = {}
        try:
            valid = []
            for index in group.indices:
                try:
                    self.estimators[index]._check_params()
                    valid.append(index)
                except Exception as e:  # this map's own error, raised at its request
                    results[index] = e
            if valid:
                try:
                    results.update(zip(valid, self._fit(valid, group.conversion)))
                except BaseException as e:
                    results.update((index, e) for index in valid)
        finally:
            group.conversion.done()
        return results

    def _fit(self, indices, conversion):
        """The models of the maps ``indices`` (one group's), trained on ``conversion``."""
        estimators = [self.estimators[i] for i in indices]
        first, shared = estimators[0], conversion.arguments

        def train(data, last_pass):
            if len(estimators) == 1:
                return [first._train(data, last_pass)]
            return first._train_path(estimators, data, last_pass)

        def fit(arguments):
            if arguments is shared:
                data = conversion.acquire(self.dataset)
                return train(data, conversion.users == 1 and conversion.owned)
            return first._fit_converted(self.dataset, arguments, train)  # the fallback: a conversion of its own

        what = f"param map {indices[0]}" if len(indices) == 1 else f"regularization path over param maps {indices}"
        with cancellable(self.dataset.sparkSession, f"{type(first).__name__} fit of {what}"):
            models = first._fit_falling_back(self.dataset, fit, shared)
        return [_finite_or_error(est, model) for est, model in zip(estimators, models)]
