"""The weighted Gram matrix of a partition's rows, accumulated while the conversion reads them.

The normal equations (LinearRegression's ``solver="normal"``, MLlib's WeightedLeastSquares) need only the
sufficient statistics of the rows, with a_i = (x_i, 1) the features and the intercept's column:

    A = sum_i w_i a_i a_i^T        ((d + 1) x (d + 1))
    b = sum_i w_i y_i a_i          (d + 1)

The conversion already reads every row once; computing A and b there leaves the fit no pass over the rows,
so a conversion asked for them (``TrainingData.prepare(gram=True)``) stores no rows when the features are few
enough (``GRAM_MAX_FEATURES``): no pass, no blocks to delete after the fit. Above that the rows are stored
and the fit makes its Gram pass as before (a partition's A travels to the driver with its statistics row).
The sums are taken in float64 over the rows as stored (``dtype``), as a pass computing in float64 reads them.
"""

from __future__ import annotations

import numpy as np

GRAM_MAX_FEATURES = 256  # A is (d + 1)^2 float64 per partition in its statistics row: 0.5 MB at 256
_CHUNK_ROWS = 1024  # float64 copies of this many rows stay in cache (as ``statistics._moments``)


class GramSums:
    """A and b (module docstring) of one partition, added batch by batch."""

    def __init__(self, d: int) -> None:
        self.d = d
        self.a = np.zeros((d + 1, d + 1))
        self.b = np.zeros(d + 1)

    def add(self, x, y: np.ndarray, w: np.ndarray) -> None:
        """Add rows ``x`` (dense (n, d), or CSR (indptr, indices, values) of d columns) labelled ``y``,
        weighted ``w`` (float64)."""
        n = len(y)
        chunk = np.empty((_CHUNK_ROWS, self.d + 1))
        for i in range(0, n, _CHUNK_ROWS):
            k = min(_CHUNK_ROWS, n - i)
            c = chunk[:k]
            _rows_into(c[:, : self.d], x, i, k)
            c[:, self.d] = 1.0
            cw = c * w[i : i + k, None]
            self.a += cw.T @ c
            self.b += cw.T @ y[i : i + k]

    def to_bytes(self) -> bytes:
        return np.concatenate([self.a.ravel(), self.b]).tobytes()


def _rows_into(out, x, start, k):
    """Rows ``start`` .. ``start + k`` of ``x`` (dense or CSR) written densely into ``out`` (float64)."""
    if not isinstance(x, tuple):
        np.copyto(out, x[start : start + k])
        return
    indptr, indices, values = x
    out[:] = 0.0
    lo, hi = indptr[start], indptr[start + k]
    rows = np.repeat(np.arange(k), np.diff(indptr[start : start + k + 1]))
    out[rows, indices[lo:hi]] = values[lo:hi]


def gram_sums(rows, infos, d):
    """(A, b) added over the conversion's handle rows and their decoded ``info`` dicts, every non-empty
    partition having computed its own: its ``GramSums.to_bytes`` follow its moments
    (``statistics.PartitionStats.info``: 2 d moments, then a weight and a count per histogrammed label)."""
    p = d + 1
    a, b = np.zeros((p, p)), np.zeros(p)
    for row, info in zip(rows, infos):
        if info["rows"]:
            m = np.frombuffer(row[3], dtype=np.float64)[2 * d + 2 * info.get("n_classes_hist", 0) :]
            a += m[: p * p].reshape(p, p)
            b += m[p * p : p * p + p]
    return a, b
