"""The weighted Gram matrix of a partition's rows, accumulated while the conversion reads them.

The normal equations (LinearRegression's ``solver="normal"``, MLlib's WeightedLeastSquares) need only the
sufficient statistics of the rows, with a_i = (x_i, 1) the features and the intercept's column:

    A = sum_i w_i a_i a_i^T        ((d + 1) x (d + 1))
    b = sum_i w_i y_i a_i          (d + 1)

The conversion already reads every row once; computing A and b there leaves the fit no pass over the rows,
so a conversion asked for them (``TrainingData.prepare(gram=GramPlan())``) stores no rows when the features are
few enough (``GRAM_MAX_FEATURES``): no pass, no blocks to delete after the fit. Above that the rows are stored
and the fit makes its Gram pass as before (a partition's A travels to the driver with its statistics row).
The sums are taken in float64 over the rows as stored (``dtype``), as a pass computing in float64 reads them.

GeneralizedLinearRegression's IRLS starts with the same sums of a working response: z_i = g(mu_0(y_i)) in
place of y_i (MLlib's start), plus sum_i w_i z_i^2 (``GramPlan.irls_start``); its later passes read the rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GRAM_MAX_FEATURES = 256  # A is (d + 1)^2 float64 per partition in its statistics row: 0.5 MB at 256
_CHUNK_ROWS = 1024  # float64 copies of this many rows stay in cache (as ``statistics._moments``)


@dataclass(frozen=True)
class GramPlan:
    """What a conversion computes beside its statistics (a value: conversions compare their arguments).

    ``irls_start``: None, the labels as they are; or (family, variance power, link or None, link power or None),
    the Params ``sparkml.gpu.glm.family_of`` and ``link_of`` take: the IRLS start's working response.
    ``rows``: whether the fit reads the rows after the Gram (IRLS's later passes) and they are stored.
    ``max_features``: the most features (an offset column included) whose sums a conversion task computes; the
    driver's ``GRAM_MAX_FEATURES``, carried to the tasks (``conversion_plan.gram_for``).
    """

    irls_start: tuple | None = None
    rows: bool = False
    max_features: int = GRAM_MAX_FEATURES

    def working(self, y: np.ndarray, w: np.ndarray):
        """(z, w') of the rows: (y, w), or the IRLS start's (g(mu_0(y)), w)."""
        if self.irls_start is None:
            return y, w
        import torch

        from sparkml.gpu.glm import family_of, link_of

        name, variance_power, link, link_power = self.irls_start
        family = family_of(name, variance_power)
        yt, wt = torch.from_numpy(np.array(y)), torch.from_numpy(np.array(w))  # Arrow's are read-only
        return link_of(name, link, link_power, variance_power).link(family.initialize(yt, wt)).numpy(), w


class GramSums:
    """A, b and sum_i w'_i z_i^2 (module docstring) of one partition's (z, w') = ``plan.working(y, w)``, added
    batch by batch."""

    def __init__(self, d: int, plan: GramPlan | None = None) -> None:
        self.d, self.plan = d, plan or GramPlan()
        self.a = np.zeros((d + 1, d + 1))
        self.b = np.zeros(d + 1)
        self.zz = 0.0

    def add(self, x, y: np.ndarray, w: np.ndarray) -> None:
        """Add rows ``x`` (dense (n, d), or CSR (indptr, indices, values) of d columns) labelled ``y``,
        weighted ``w`` (float64)."""
        y, w = self.plan.working(y, w)
        self.zz += float(w @ (y * y))
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
        return np.concatenate([self.a.ravel(), self.b, [self.zz]]).tobytes()


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
    """(A, b, sum w' z^2) added over the conversion's handle rows and their decoded ``info`` dicts, every
    non-empty partition having computed its own: its ``GramSums.to_bytes`` follow its moments
    (``statistics.PartitionStats.info``: 2 d moments, then a weight and a count per histogrammed label)."""
    p = d + 1
    a, b, zz = np.zeros((p, p)), np.zeros(p), 0.0
    for row, info in zip(rows, infos):
        if info["rows"]:
            m = np.frombuffer(row[3], dtype=np.float64)[2 * d + 2 * info.get("n_classes_hist", 0) :]
            a += m[: p * p].reshape(p, p)
            b += m[p * p : p * p + p]
            zz += float(m[p * p + p])
    return a, b, zz
