"""What a Spark task runs in the one scoring pass of a validation fold: pyarrow, numpy and torch only, no pyspark.

Each Arrow batch holds the rows' feature vectors (``x``: dense, as lists of doubles, or the ``VectorUDT``
struct of sparse and dense rows), their label (``y``) and weight (``w``). The k models of a param grid score the
batch in one product (``sparkml.scoring.stack.ModelStack``: M = X W^T + b over the stacked coefficients), each
model's kind turns its columns of M into its outputs, and the task keeps what the evaluator needs:

* ``regression``: the label moments and, per model, sum w e^2, sum w |e|, sum w p, sum w p^2 (e = y - p);
* ``multiclass``: per model, the weighted confusion entries (label, prediction, weight) and the log-loss sums;
* ``binary``: the rows themselves (label, weight and each model's score), which Spark's evaluator reads.

``stats_partition`` returns the first two as rows of ``STATS_SCHEMA``, a few per partition;
``scores_partition`` the third as one row per input row. A row the stock path would treat otherwise (a null or
non-finite label, a weight Spark's evaluators refuse, a null or non-finite feature vector or one of another size)
marks the partition ``irregular`` (``scores_partition``: the row ``bad``), and the driver evaluates that fold
model by model as pyspark does, so its result or its error is the stock one.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from sparkml.runtime import task_context, worker_socket
from sparkml.scoring.batch import outputs_of
from sparkml.scoring.stack import ModelStack
from sparkml.tuning.metrics import REGRESSION_SUMS, LabelMoments

STATS_SCHEMA = "part string, model int, stats binary"
BAD_COLUMN = "__sparkml_bad"
SCORE_PREFIX = "__sparkml_score_"


@dataclass(frozen=True)
class PassPlan:
    """What one pass computes: the ``stack`` of the k models, the evaluator's ``kind`` (``regression``,
    ``multiclass``, ``binary``), the output ``keys`` each model computes, the keys of the prediction and
    the probability the evaluator reads (``prediction``, ``probability``: multiclass log-loss), the key of the
    binary evaluator's score (``score``; its column 1 when ``score_vector``), log-loss's ``eps``, whether the
    log-loss sums are needed (``log_loss``), the binary frame's label column (``label_name``) and the evaluator's
    weight column (``weight_name``: None without one; every row then weighs 1)."""

    stack: ModelStack
    kind: str
    keys: tuple[str, ...]
    prediction: str | None = None
    probability: str | None = None
    score: str | None = None
    score_vector: bool = False
    eps: float = 1e-15
    log_loss: bool = False
    label_name: str = "label"
    weight_name: str | None = None

    @property
    def n_features(self) -> int:
        return self.stack.specs[0].n_features


def feature_rows(column, d):
    """The rows of a features column, a list of doubles per row (``vector_to_array``) or the ``VectorUDT``
    struct itself, as an (n, d) float64 array (every row dense) or a scipy CSR matrix; None when a row is null,
    of another size than ``d``, holds an index outside [0, d) or a value that is not finite."""
    if column.null_count:
        return None
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    n = len(column)
    if not pa.types.is_struct(column.type):
        lengths = np.asarray(column.value_lengths(), dtype=np.int64)
        values = column.flatten().to_numpy(zero_copy_only=False)
        if (lengths != d).any() or not np.isfinite(values).all():
            return None
        return values.reshape(n, d)
    kinds, sizes, index_lists, value_lists = column.flatten()  # the struct's offset applied
    kinds = np.asarray(kinds.to_numpy(zero_copy_only=False))
    lengths = np.asarray(value_lists.value_lengths().fill_null(0), dtype=np.int64)
    values = value_lists.flatten().to_numpy(zero_copy_only=False)
    if not np.isfinite(values).all():
        return None
    dense = kinds == 1
    if dense.all():
        return values.reshape(n, d) if (lengths == d).all() else None
    row_sizes = np.where(dense, lengths, np.asarray(sizes.fill_null(0).to_numpy(zero_copy_only=False)))
    if (row_sizes != d).any():
        return None
    from scipy.sparse import csr_matrix

    indptr = np.concatenate([[0], np.cumsum(lengths)])
    columns = np.arange(len(values), dtype=np.int64) - np.repeat(indptr[:-1], lengths)  # a dense row's
    sparse_entries = np.repeat(~dense, lengths)
    if sparse_entries.any():
        indices = np.asarray(index_lists.flatten().to_numpy(zero_copy_only=False), dtype=np.int64)
        if len(indices) != int(sparse_entries.sum()) or (indices < 0).any() or (indices >= d).any():
            return None
        columns[sparse_entries] = indices
    return csr_matrix((values, columns, indptr), shape=(n, d))


def model_outputs(x, plan: PassPlan) -> list[dict[str, np.ndarray]]:
    """Each model's outputs (``plan.keys``) for the rows ``x``: the margins of all k models in one product."""
    import torch

    stack = plan.stack
    if isinstance(x, np.ndarray):
        with warnings.catch_warnings():  # Arrow's buffer is read-only; the product never writes to it
            warnings.simplefilter("ignore", UserWarning)
            m = stack.margins(x)
    else:  # CSR: the sparse product, then the same kinds
        m = torch.from_numpy(np.ascontiguousarray(x @ stack.coefficients.T + stack.intercepts))
    return [
        {k: v.numpy() for k, v in outputs_of(m[:, a:b].contiguous(), spec, plan.keys).items()}
        for spec, (a, b) in zip(stack.specs, stack.bounds)
    ]


def _doubles(column):
    """(values, valid): a double Arrow column as float64 (nulls as NaN) and False where a row is null."""
    values = np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.float64)
    valid = ~np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    return values, valid


def _regular_weights(w, valid):
    """Spark's evaluators refuse null, NaN, negative and infinite weights."""
    return bool(valid.all()) and bool((np.isfinite(w) & (w >= 0)).all())


class _Confusions:
    """Per model: {(label, prediction): weight} and the log-loss sums (loss, weight)."""

    def __init__(self, k):
        self.entries: list[dict[tuple[float, float], float]] = [{} for _ in range(k)]
        self.log_loss = np.zeros((k, 2))

    def add(self, j, y, prediction, w):
        labels, label_code = np.unique(y, return_inverse=True)
        predictions, prediction_code = np.unique(prediction, return_inverse=True)
        code = label_code.ravel() * len(predictions) + prediction_code.ravel()
        size = len(labels) * len(predictions)
        weights = np.bincount(code, weights=w, minlength=size)
        seen = np.bincount(code, minlength=size) > 0  # a zero-weight row still makes an entry, as in Spark
        entries = self.entries[j]
        for c in np.flatnonzero(seen):
            key = (float(labels[c // len(predictions)]), float(predictions[c % len(predictions)]))
            entries[key] = entries.get(key, 0.0) + float(weights[c])

    def add_log_loss(self, j, y_index, probability, w, eps):
        q = probability[np.arange(len(y_index)), y_index]
        with np.errstate(divide="ignore", invalid="ignore"):
            loss = np.where(q < eps, -np.log(eps), np.where(q > 1 - eps, -np.log1p(-eps), -np.log(q)))
        self.log_loss[j] += (float((loss * w).sum()), float(w.sum()))


def _stats_row(part, model, values):
    return part, model, np.asarray(values, dtype=np.float64).tobytes()


def _stats_batch(rows):
    parts, models, blobs = zip(*rows) if rows else ((), (), ())
    return pa.RecordBatch.from_arrays(
        [pa.array(parts, pa.string()), pa.array(models, pa.int32()), pa.array(blobs, pa.binary())],
        names=["part", "model", "stats"],
    )


class FoldStatistics:
    """The sufficient statistics of a validation fold (module docstring), added a run of rows at a time:
    ``add(x, y, w)`` with the rows' features (``feature_rows``), labels and weights, all regular but for what
    ``add`` checks itself (log-loss needs labels that index the probability); ``irregular`` once a run fails
    that; ``rows()`` the statistics as ``STATS_SCHEMA`` rows."""

    def __init__(self, plan: PassPlan):
        self.plan, self.k = plan, len(plan.stack.specs)
        self.labels = LabelMoments()
        self.sums = np.zeros((self.k, REGRESSION_SUMS))
        self.confusions = _Confusions(self.k)
        self.irregular = False

    def add(self, x, y, w) -> None:
        plan = self.plan
        if self.irregular or not len(y):
            return
        prediction, probability = plan.prediction or "", plan.probability or ""  # the keys the evaluator reads
        outputs = model_outputs(x, plan)
        if plan.log_loss:  # Spark's log-loss takes the probability at index y: y a whole number in range
            y_index = y.astype(np.int64)
            width = min(out[probability].shape[1] for out in outputs)
            self.irregular = bool((y_index != y).any() or (y < 0).any() or (y_index >= width).any())
            if self.irregular:
                return
        if plan.kind == "regression":
            kept = w > 0  # colStats skips the rows of weight 0
            y, w = y[kept], w[kept]
            self.labels = self.labels.merge(LabelMoments.of(y, w))
            for j, out in enumerate(outputs):
                p = out[prediction][kept]
                e = y - p
                self.sums[j] += ((w * e * e).sum(), (w * np.abs(e)).sum(), (w * p).sum(), (w * p * p).sum())
        else:
            for j, out in enumerate(outputs):
                self.confusions.add(j, y, out[prediction], w)
                if plan.log_loss:
                    self.confusions.add_log_loss(j, y_index, out[probability], w, plan.eps)

    def rows(self) -> list[tuple]:
        if self.irregular:
            return [_stats_row("irregular", -1, [])]
        if self.plan.kind == "regression":
            labels = self.labels
            rows = [_stats_row("label", -1, [labels.weight, labels.weight_sq, labels.mean, labels.m2, labels.sum_sq])]
            return rows + [_stats_row("model", j, self.sums[j]) for j in range(self.k)]
        confusions = self.confusions
        return [
            _stats_row("model", j, [*confusions.log_loss[j], *np.ravel(list(entries_of(confusions.entries[j])))])
            for j in range(self.k)
        ]


def stats_partition(batches: Iterator[pa.RecordBatch], plan: PassPlan) -> Iterator[pa.RecordBatch]:
    """The sufficient statistics of one partition (module docstring) as rows of ``STATS_SCHEMA``: part
    ``label`` (regression: W, W2, mean, M2, SSy), part ``model`` (model j's sums or confusion), or one row of
    part ``irregular``."""
    worker_socket.acknowledge_promptly()
    statistics = FoldStatistics(plan)
    for batch in batches:
        if statistics.irregular:
            continue  # drained, so Spark may reuse the worker
        y, y_valid = _doubles(batch.column("y"))
        w, w_valid = _doubles(batch.column("w"))
        x = feature_rows(batch.column("x"), plan.n_features)
        if x is None or not y_valid.all() or not np.isfinite(y).all() or not _regular_weights(w, w_valid):
            statistics.irregular = True
            continue
        statistics.add(x, y, w)
    task_context.freeze_imports()  # a worker that only scores: the daemon's collection after the task skips torch
    yield _stats_batch(statistics.rows())


def _float64(x):
    """Stored rows (an ndarray or a CSR matrix, float32 or float64) in float64: the models score them as they
    score the rows' vectors, in float64."""
    return x.astype(np.float64, copy=False) if x.dtype != np.float64 else x


def _evaluator_weights(y, w, plan: PassPlan) -> np.ndarray:
    """The stored rows' weights where the evaluator has a weight column (the conversion's: ``ValidationBlocks.serves``),
    else 1 for every row: the fit's weights are not the evaluator's."""
    return w if plan.weight_name else np.ones(len(y))


def block_statistics(x, y, w, plan: PassPlan) -> list[tuple]:
    """``FoldStatistics.rows`` of validation rows read from a conversion's blocks (already checked by it)."""
    statistics = FoldStatistics(plan)
    statistics.add(_float64(x), y, _evaluator_weights(y, w, plan))
    return statistics.rows()


def binary_scores(x, plan: PassPlan) -> list[np.ndarray]:
    """Each model's score (the binary evaluator's raw prediction, its column 1 for a vector) of the rows ``x``."""
    scores = []
    for out in model_outputs(x, plan):
        s = out[plan.score or ""]
        scores.append(np.ascontiguousarray(s[:, 1] if plan.score_vector else s, dtype=np.float64))
    return scores


def block_scores(x, y, w, plan: PassPlan) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(labels, the evaluator's weights, (n, k) scores) of validation rows read from a conversion's blocks."""
    return y, _evaluator_weights(y, w, plan), np.stack(binary_scores(_float64(x), plan), axis=1)


def entries_of(entries):
    """(label, prediction, weight) triples of a confusion dict."""
    for (label, prediction), weight in entries.items():
        yield (label, prediction, weight)


def scores_partition(batches: Iterator[pa.RecordBatch], plan: PassPlan) -> Iterator[pa.RecordBatch]:
    """The binary evaluator's input for one partition: per row ``BAD_COLUMN`` (its features are irregular),
    the label and weight as they came (``plan.label_name``, ``plan.weight_name``) and each model's score
    (``SCORE_PREFIX`` + j)."""
    k = len(plan.stack.specs)
    names = [BAD_COLUMN, plan.label_name] + ([plan.weight_name] if plan.weight_name else [])
    names += [f"{SCORE_PREFIX}{j}" for j in range(k)]
    for batch in batches:
        n = batch.num_rows
        x = feature_rows(batch.column("x"), plan.n_features) if n else None
        scores = [np.full(n, np.nan)] * k if x is None else binary_scores(x, plan)
        carried = [batch.column("y")] + ([batch.column("w")] if plan.weight_name else [])
        arrays = [pa.array(np.full(n, x is None and n > 0)), *carried, *[pa.array(s) for s in scores]]
        yield pa.RecordBatch.from_arrays(arrays, names=names)
    task_context.freeze_imports()  # as stats_partition
