"""Several binary problems over the same rows, evaluated in one pass: one-vs-rest, one-vs-one and a grid's maps.

A kernel SVM on K classes solves K one-vs-rest problems on one set of features, and then fits one
Platt sigmoid per problem. Evaluating all the problems still being solved in one pass reads the
rows once instead of K times (and, on Spark, costs one job instead of K).

Both classes take coefficients Theta of shape (k, p), one row per problem, and return the sums

    f_j = sum_i w_i l_ij                               (k,)
    G_j = sum_i w_i dl_ij/dtheta_j                     (k, p)
    H_j = sum_i w_i d2l_ij/dtheta_j^2                  (k, p, p)   (``hessian_block``)

with no division by the weight total and no regularization (the driver adds both), float64.

``OneVsRestProblems(binary, classes)``: problem j is the binary loss of class c_j against the rest,
l_ij = l(x~_i . theta_j, 1[y_i = c_j]); the margins of all problems are one matmul X~ Theta^T and
the gradients one X^T R; each Hessian (the binary loss's generalized one, over the rows where
l'' != 0) is its own weighted Gram matrix.

``GridProblems(loss, k)``: one loss at k coefficient vectors on the same labels, l_ij = l(x~_i . theta_j, y_i)
(the maps of a parameter grid, solved side by side).

Platt scaling's problems over the same rows: ``platt_problems.PlattProblems``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from .losses import LinearLoss, _product_operand

__all__ = ["GridProblems", "OneVsOneProblems", "OneVsRestProblems"]

_F64 = torch.float64
# ``hessp_operator`` copies the active rows out when they are at most this share of the block. The
# copy costs about three reads of those rows, paid back within a few of a Newton round's ~30 CG
# products; the bound keeps the copy's memory below 3/4 of the block's.
_ACTIVE_COPY_FRACTION = 0.75
# a one-vs-one set reads rows in runs of one class where they come grouped: at most this many runs per class
# (each partition's rows in label order, several partitions stacked)
_RUNS_PER_CLASS = 4


def _inputs(coef, X, y, w, shape):
    """coef (k, p), y and w, float64 on X's device."""
    coef = torch.as_tensor(coef).to(device=X.device, dtype=_F64)
    if tuple(coef.shape) != shape:
        raise ValueError(f"coef has shape {tuple(coef.shape)}, expected {shape}")
    y = torch.as_tensor(y).to(device=X.device, dtype=_F64).reshape(-1)
    w = (
        torch.ones(X.n_rows, dtype=_F64, device=X.device)
        if w is None
        else torch.as_tensor(w).to(device=X.device, dtype=_F64).reshape(-1)
    )
    if y.numel() != X.n_rows or w.numel() != X.n_rows:
        raise ValueError(f"y and w need {X.n_rows} entries, got {y.numel()} and {w.numel()}")
    return coef, w, y


class _Run(NamedTuple):
    """Rows start..stop of a block and the problems they are in (``cols``: a (k',) index tensor, or None for all),
    with each row's label and weight in those problems: ``labels`` (n' or 1, k') and ``weights`` (n', k' or 1),
    broadcast against the run's (n', k') margins. One-vs-one over rows grouped by class: a run of class c holds its
    pairs only, labels 1[c = a] per pair and the rows' own weights, so no (n, k) array is ever formed."""

    start: int
    stop: int
    cols: torch.Tensor | None
    labels: torch.Tensor
    weights: torch.Tensor

    def every(self):
        return slice(None) if self.cols is None else self.cols

    def block(self, X):
        return X if self.cols is None else X.slice(self.start, self.stop)

    def problems(self, k):
        """The indices of the run's problems, in its columns' order (all k when ``cols`` is None)."""
        return range(k) if self.cols is None else self.cols.tolist()


def _part(t, start, stop):
    """Rows start..stop of a run's labels or weights (a single row broadcasts)."""
    return t if t.shape[0] == 1 else t[start:stop]


def _run_passes(X, runs, beta, b, rows):
    """(k, d) float64: X^T R over the ``runs`` of rows (``OneVsRestProblems._views``), one ``margin_pass`` a run.
    ``rows(i, run, start, stop, m)`` returns R's rows start..stop of run i (positions in the run) for the run's
    problems, from their margins m = x~ . theta (float64, the intercepts b added), in X's dtype."""
    g_beta = torch.zeros(beta.shape, dtype=_F64, device=X.device)
    for i, run in enumerate(runs):
        every = run.every()
        run_b = None if b is None else b[every]

        def fn(start, stop, m, i=i, run=run, run_b=run_b):
            m = m.to(_F64) if run_b is None else m.to(_F64) + run_b
            return rows(i, run, start, stop, m)

        g_beta[every] += run.block(X).margin_pass(_product_operand(beta[every], X), fn).to(_F64).T
    return g_beta


def _indicators(y, classes):
    """(n, k): 1[y_i == c_j], float64."""
    return (y[:, None] == torch.tensor(classes, dtype=_F64, device=y.device)[None, :]).to(_F64)


def _row_weights(w, y, count, pairs=None):
    """(n, count): w_i in every problem; with one-vs-one ``pairs``, w_i on the rows of pair j's two classes
    and 0 elsewhere."""
    if pairs is None:
        return w[:, None].expand(-1, count)
    pairs = torch.tensor(pairs, dtype=_F64, device=y.device)  # (k, 2)
    member = (y[:, None] == pairs[None, :, 0]) | (y[:, None] == pairs[None, :, 1])
    return w[:, None] * member.to(_F64)


def _scatter(runs, values, count, device):
    """(count,) float64: the sums over the runs of each run's per-problem ``values`` (k',), at its problems."""
    out = torch.zeros(count, dtype=_F64, device=device)
    for run, v in zip(runs, values):
        out[run.every()] += v
    return out


class OneVsRestProblems:
    """The binary loss of each class in ``classes`` against the rest, all in one pass."""

    pairs: tuple[tuple[float, float], ...] | None = None  # one-vs-one: the (a, b) of each problem

    def __init__(self, binary: LinearLoss, classes):
        if binary.n_outputs != 1:
            raise ValueError(f"one-vs-rest needs a binary loss, got {binary!r}")
        self.binary, self.classes = binary, tuple(float(c) for c in classes)
        self.fit_intercept = binary.fit_intercept

    def __repr__(self) -> str:
        return f"OneVsRestProblems({self.binary!r}, classes={self.classes})"

    def coef_shape(self, n_features: int) -> tuple[int, int]:
        return (len(self.classes), int(n_features) + int(self.fit_intercept))

    def _labels(self, y):
        """(n, k): each problem's label of each row, the indicators 1[y_i == c_j]."""
        return _indicators(y, self.classes)

    def _runs(self, y):
        """[(start, stop, the problems the rows start..stop are in: a (k',) index tensor, or None for all)]: one run
        of every row in every problem (a one-vs-one set gives each class's run of rows its pairs only)."""
        return [(0, len(y), None)]

    def _views(self, y, w):
        """[``_Run``]: the rows in runs with their labels and weights (one run of every row in every problem)."""
        return [_Run(0, len(y), None, self._labels(y), w[:, None])]

    def _read(self, X, y):
        """X as this set's passes read it: ``for_products`` of the columns a pass multiplies across its runs of rows
        (a Nystroem block of few rows against them is formed once, ``factored.FactoredBlock``)."""
        y = torch.as_tensor(y).to(device=X.device, dtype=_F64).reshape(-1)
        return X.for_products(sum(len(self.classes) if cols is None else len(cols) for _, _, cols in self._runs(y)))

    def loss_gradient(self, coef, X, y, w=None):
        """(f (k,), G (k, p)) as in the module docstring."""
        X = self._read(X, y)
        return self._pass(coef, X, y, w)[:2]

    def _pass(self, coef, X, y, w, hessian=False):
        """(f, G, the runs (``_views``), each run's Hessian weights w_i l''_ij (n', k'); None unless ``hessian``) in
        one ``margin_pass`` over X per run of rows: the margins and X^T R from one read of each run of rows (one
        computation of each chunk of a kernel block)."""
        coef, w, y = _inputs(coef, X, y, w, self.coef_shape(X.n_features))
        runs, binary = self._views(y, w), self.binary
        beta, b = binary._split(coef)
        f = torch.zeros(len(self.classes), dtype=_F64, device=X.device)
        r_sum = torch.zeros_like(f)
        hw = [
            torch.empty((r.stop - r.start, len(f) if r.cols is None else len(r.cols)), dtype=_F64, device=X.device)
            for r in runs
        ]

        def residuals(i, run, start, stop, m):
            labels, weights = _part(run.labels, start, stop).expand(m.shape), _part(run.weights, start, stop)
            loss, g = binary._pointwise(m, labels)
            r = weights * g
            f[run.every()] += (weights * loss).sum(0)
            r_sum[run.every()] += r.sum(0)
            if hessian:
                hw[i][start:stop] = weights * binary._pointwise_hessian(m, labels)
            return r.to(X.dtype)

        g_beta = _run_passes(X, runs, beta, b, residuals)
        return f, binary._join(g_beta, r_sum if self.fit_intercept else None), runs, hw if hessian else None

    def _hess_weights(self, coef, X, y, w):
        """(the runs, each run's w_i l''_ij (n', k')) from the margins alone (one product per run)."""
        coef, w, y = _inputs(coef, X, y, w, self.coef_shape(X.n_features))
        runs = self._views(y, w)
        hw = []
        for run in runs:
            m = self.binary._margins(coef[run.every()], run.block(X))
            hw.append(run.weights * self.binary._pointwise_hessian(m, run.labels.expand(m.shape)))
        return runs, hw

    def hessian_block(self, coef, X, y, w=None):
        """(k, p, p): each problem's sum_i w_i l''_ij x~_i x~_i^T."""
        X = self._read(X, y)
        return self._hessians(X, *self._hess_weights(coef, X, y, w))

    def loss_gradient_hessian(self, coef, X, y, w=None):
        """(f, G, H): ``loss_gradient``'s sums and ``hessian_block``'s from one computation of the margins."""
        X = self._read(X, y)
        f, g, runs, hw = self._pass(coef, X, y, w, hessian=True)
        return f, g, self._hessians(X, runs, hw)

    def _hessians(self, X, runs, hw):
        """(k, p, p) from each run's Hessian weights hw (n', k'): each problem's Hessian over its own rows with
        l'' != 0, copied out when they are at most 3/4 of the block (a one-vs-one pair's or a smoothed hinge's band:
        n_j p^2 flops, and the intercept's sums over those rows only, not a pass over the block per problem)."""
        k = len(self.classes)
        rows: list[list[torch.Tensor]] = [[] for _ in range(k)]
        values: list[list[torch.Tensor]] = [[] for _ in range(k)]
        for run, h in zip(runs, hw):
            for jj, j in enumerate(run.problems(k)):
                nonzero = torch.nonzero(h[:, jj], as_tuple=True)[0]
                rows[j].append(nonzero + run.start)
                values[j].append(h[:, jj].index_select(0, nonzero))
        out = []
        for j in range(k):
            index = torch.cat(rows[j]) if rows[j] else torch.zeros(0, dtype=torch.long, device=X.device)
            h = torch.cat(values[j]) if values[j] else torch.zeros(0, dtype=_F64, device=X.device)
            if len(index) > X.n_rows * _ACTIVE_COPY_FRACTION:
                full = torch.zeros(X.n_rows, dtype=_F64, device=X.device)
                full[index] = h
                out.append(self.binary._hessian_from_weights(X, full))
            else:
                out.append(self.binary._hessian_from_weights(X.take(index), h))
        return torch.stack(out)

    def loss_gradient_diagonal(self, coef, X, y, w=None):
        """(f, G, D, n): the sums above, the Hessians' diagonals D_j = sum_i w_i l''_ij x~_i^2, (k, p) (a Jacobi
        preconditioner for ``hessp``-based solvers) and each problem's count of rows with l''_ij != 0, (k,)."""
        X = self._read(X, y)
        f, g, runs, hw = self._pass(coef, X, y, w, hessian=True)  # the margins once for both
        k = len(self.classes)
        diag = torch.zeros((k, X.n_features), dtype=_F64, device=X.device)
        for run, h in zip(runs, hw):
            block = run.block(X)
            for jj, j in enumerate(run.problems(k)):
                diag[j] += block.weighted_moments(h[:, jj])[1]
        if self.fit_intercept:
            diag = torch.cat([diag, _scatter(runs, [h.sum(0) for h in hw], k, X.device)[:, None]], dim=1)
        return f, g, diag, self._active_counts(runs, hw, X.device)

    def _active_counts(self, runs, hw, device):
        """(k,) float64: each problem's rows with a non-zero Hessian weight (what Newton-CG prices a direct step by)."""
        return _scatter(runs, [h.ne(0).sum(0).to(_F64) for h in hw], len(self.classes), device)

    def loss_gradient_curvature(self, coef, X, y, w=None):
        """(f, G, c, n): the sums above, each problem's curvature weight c_j = sum_i w_i l''_ij, (k,) (the
        intercept's Hessian diagonal; what a spectral preconditioner scales with), and its count of rows with
        l''_ij != 0, (k,), from one pass."""
        X = self._read(X, y)
        f, g, runs, hw = self._pass(coef, X, y, w, hessian=True)
        curvature = _scatter(runs, [h.sum(0) for h in hw], len(self.classes), X.device)
        return f, g, curvature, self._active_counts(runs, hw, X.device)

    def hessp(self, coef, X, y, w, v):
        """(k, p): each problem's Hessian times v_j, sum_i w_i l''_ij x~_i (x~_i . v_j), without forming it."""
        return self.hessp_operator(coef, X, y, w)(v)

    def hessp_operator(self, coef, X, y, w=None):
        """v -> ``hessp(coef, X, y, w, v)`` for many v at one coef (the CG iterations of a Newton round).

        Only the rows with l''_ij != 0 for some problem enter a product (a squared hinge's active
        set). When they are at most 3/4 of the block they are copied out once here, so each product
        reads those rows only: two passes over the active rows per v instead of three over all. A block
        computed per pass copies them whatever their share: its rows are narrow, and the copy keeps their kernel
        where its budget allows (``kernel_block.KernelBlock.take``).
        """
        X = self._read(X, y)
        runs, hw = self._hess_weights(coef, X, y, w)
        active = [torch.nonzero(h.ne(0).any(1), as_tuple=True)[0] for h in hw]
        if sum(len(a) for a in active) <= X.n_rows * _ACTIVE_COPY_FRACTION or X.computed_per_pass:
            X = X.take(torch.cat([a + run.start for a, run in zip(active, runs)]))
            taken, offset = [], 0
            for run, h, a in zip(runs, hw, active):
                if len(a):  # the run's active rows, at their places in the taken block (the products read hw only,
                    # not the run's labels and weights)
                    taken.append((run._replace(start=offset, stop=offset + len(a)), h.index_select(0, a)))
                    offset += len(a)
            runs, hw = [run for run, _ in taken], [h for _, h in taken]
        binary = self.binary

        def times(v):
            beta, b = binary._split(torch.as_tensor(v).to(device=X.device, dtype=_F64))
            r_sum = torch.zeros(beta.shape[0], dtype=_F64, device=X.device)

            def rows(i, run, start, stop, m):  # hw_i (x~_i . v): one read of the rows (a kernel chunk), both products
                r = hw[i][start:stop] * m
                r_sum[run.every()] += r.sum(0)
                return r.to(X.dtype)

            g_beta = _run_passes(X, runs, beta, b, rows)
            return binary._join(g_beta, r_sum if binary.fit_intercept else None)

        return times


class OneVsOneProblems(OneVsRestProblems):
    """The binary loss of class a against class b for each pair (a, b) in ``pairs``, all in one pass.

    Problem j = (a, b) is ``OneVsRestProblems``' problem for class a with the rows of every other class
    than a and b weighted 0: l_ij = l(x~_i . theta_j, 1[y_i = a]) over the rows of a and b only. Its sums
    are libsvm's one-vs-one subproblem (``SVC``): the same C for every pair, the other classes absent.
    """

    def __init__(self, binary: LinearLoss, pairs):
        pairs = tuple((float(a), float(b)) for a, b in pairs)
        if any(a == b for a, b in pairs):
            raise ValueError(f"one-vs-one pairs need two different classes; got {pairs}")
        super().__init__(binary, [a for a, _ in pairs])
        self.pairs = pairs

    def __repr__(self) -> str:
        return f"OneVsOneProblems({self.binary!r}, pairs={self.pairs})"

    def _runs(self, y):
        """Rows grouped by class (``TrainingData.derive`` writes each partition's rows in label order): each run
        of one class's rows is evaluated for that class's pairs only, and a class in no pair is skipped, so a
        pass over K classes' rows costs about 2/K of one over every pair (ten classes: 9 of 45 products a row).
        Rows in another order (more than ``_RUNS_PER_CLASS`` runs a class) are read whole, as one-vs-rest."""
        pairs = self.pairs or ()
        if len(y) == 0:
            return super()._runs(y)
        values, counts = torch.unique_consecutive(y, return_counts=True)
        if len(values) > _RUNS_PER_CLASS * len({c for pair in pairs for c in pair}):
            return super()._runs(y)
        runs, start = [], 0
        for c, n in zip(values.tolist(), counts.tolist()):
            cols = [j for j, pair in enumerate(pairs) if c in pair]
            if cols:
                runs.append((start, start + n, torch.tensor(cols, device=y.device)))
            start += n
        return runs

    def _views(self, y, w):
        """A run of class c's rows: its pairs' labels 1[c = a] (one row, broadcast) and the rows' weights; rows read
        whole: the indicators and the weights masked to each pair's two classes, (n, k)."""
        runs = self._runs(y)
        if len(runs) == 1 and runs[0][2] is None:
            return [_Run(0, len(y), None, self._labels(y), _row_weights(w, y, len(self.classes), self.pairs))]
        firsts = torch.tensor(self.classes, dtype=_F64, device=y.device)  # each pair's class a
        return [
            _Run(start, stop, cols, (firsts.index_select(0, cols) == y[start]).to(_F64)[None, :], w[start:stop, None])
            for start, stop, cols in runs
        ]


class GridProblems(OneVsRestProblems):
    """One loss at ``count`` coefficient vectors over the same rows and labels, in one pass: the maps of a
    parameter grid solved side by side (``sparkml.optim.lockstep``), l_ij = l(x~_i . theta_j, y_i).

    The margins of all maps are one (n, p) x (p, k) product and the gradients one X^T R, so a pass for k maps
    reads each row once: a (4096, 100) float64 chunk times 12 columns costs a few times one column's product
    on a CPU, where the pass of one map is bound by reading the rows."""

    def __init__(self, loss: LinearLoss, count: int):
        if not self.accepts(loss):
            raise ValueError(f"GridProblems needs a single-output loss of coefficients (d + intercept,), got {loss!r}")
        super().__init__(loss, [0.0] * int(count))

    @staticmethod
    def accepts(loss) -> bool:
        """Whether ``loss`` is one output of plain coefficients (not a softmax's (K, p), nor Huber's scale)."""
        return isinstance(loss, LinearLoss) and loss.coef_shape(1) == (1 + int(loss.fit_intercept),)

    def __repr__(self) -> str:
        return f"GridProblems({self.binary!r}, count={len(self.classes)})"

    def _labels(self, y):
        return y[:, None].expand(-1, len(self.classes))
