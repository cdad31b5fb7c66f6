"""Fitting many param maps on one conversion of the data.

A fit converts its DataFrame once into executor-resident blocks (``TrainingData``): often most of
an ``allreduce`` fit's time. ``CrossValidator`` and ``TrainValidationSplit``
fit every param map of their grid on the same training fold through ``Estimator.fitMultiple``,
and pyspark's own ``fitMultiple`` fits each map from the DataFrame, converting the fold once per
map. Here ``fitMultiple`` converts it once per distinct conversion (the columns, the storage and
compute dtypes, how many blocks and whether a barrier stage reads them: what
``TorchEstimator._conversion`` returns) and trains every map on it; regParam, elasticNetParam,
maxIter, tol, ... grids share one conversion. The blocks are released when the last map using
them has been trained, or when the iterator is garbage-collected after an error stopped the grid.

With ``strategy="auto"``, a map whose barrier stage lost an executor is fitted again alone, with ``sync``
and a conversion of its own (``TorchEstimator._fit_falling_back``).

Only the estimator itself benefits: a ``Pipeline`` in ``CrossValidator`` fits its stages one map at
a time (pyspark's ``Pipeline.fitMultiple``).
"""

import threading
import weakref
from typing import Any

from sparkml.cancellation import cancellable
from sparkml.data.training_data import TrainingData


class _Conversion:
    """One conversion of the dataset, made by its first user and released after its last."""

    def __init__(self, arguments):
        self.arguments, self.users, self.remaining = arguments, 0, 0
        self.data, self.lock = None, threading.Lock()

    def acquire(self, dataset):
        with self.lock:
            if self.data is None:
                self.data = TrainingData.prepare(dataset, **self.arguments)
            return self.data

    def done(self):
        with self.lock:
            self.remaining -= 1
            if self.remaining == 0:
                self.release()

    def release(self):
        data, self.data = self.data, None
        if data is not None:
            data.release()


def _release_all(conversions):
    """The iterator's finalizer: release what an interrupted grid left converted."""
    for conversion in conversions:
        try:
            with conversion.lock:
                conversion.release()
        except Exception:  # the session may be gone; Spark deletes its local dirs when it ends
            pass


class SharedConversionFits:
    """``fitMultiple``'s iterator: (index, model) per param map, each conversion made once."""

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
        self.conversions = []
        for est in self.estimators:
            arguments = est._conversion(dataset)
            key = tuple(sorted(arguments.items()))
            conversion = by_key.get(key) or by_key.setdefault(key, _Conversion(arguments))
            conversion.users += 1
            conversion.remaining += 1
            self.conversions.append(conversion)
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
        estimator, conversion = self.estimators[index], self.conversions[index]
        try:
            estimator._check_params()
            shared = conversion.arguments

            def fit(arguments):
                if arguments is shared:
                    return estimator._train(conversion.acquire(self.dataset), last_pass=conversion.users == 1)
                return estimator._fit_converted(self.dataset, arguments)  # the fallback: a conversion of its own

            with cancellable(self.dataset.sparkSession, f"{type(estimator).__name__} fit of param map {index}"):
                return index, estimator._fit_falling_back(self.dataset, fit, shared)
        finally:
            conversion.done()
