"""The driver's state of several Newton problems (``optim.newton``) and each round's directions.

For every problem j: theta_j, J_j, g_j, and H_j (``solver="cholesky"``: the round's pass returns it) or its
diagonal (``"cg"``). The direction solves H_j delta_j = -g_j; a 1e-10 ridge keeps H positive definite when no
row is active.

``solver="cg"`` (truncated Newton, for many features): H is never formed. A round's pass returns
the Hessians' diagonals instead, and H_j delta_j = -g_j is solved by Jacobi-preconditioned
conjugate gradients, each CG iteration one pass returning H_j v_j for every problem still
iterating (2 n p flops against n_active p^2 for H), stopped when ||r_j|| <= eta_j ||g_j|| with
eta_j = min(0.1, sqrt(||g_j|| / ||g_j at the start||)) (Eisenstat and Walker's forcing term: loose
far from the optimum, tight near it) or after ``_CG_MAX_ITER`` iterations. Every CG pass asks for
all the problems CG started with (those already done get a product they ignore), so the executors
can keep what they derived from theta (the active rows) for the whole round. The round's pass also
counts each problem's active rows n_j (l'' != 0); a problem with at most ``_DIRECT_ROWS_PER_COEF`` p of
them (and p at most ``_DIRECT_MAX_COEF``) takes a direct step instead: one more pass forms its H_j over
those rows (about 2 n_j p^2 flops), solved as with Cholesky. Near the optimum of a hinge the active rows
are the band's few, H_j's data part has rank n_j, and CG took 50 to 150 passes per round where this
takes one (ten-class digits, one-vs-one: 1,445 passes against about 200).

A better preconditioner when the features' second moment has a known shape
(``preconditioner=(V, s)``): ``optim.preconditioner``.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from sparkml.optim.preconditioner import check_shape, precondition

_RIDGE = 1e-10
_CG_MAX_ITER = 250
# Newton-CG takes a direct step (H_j formed over its active rows, then solved) for a problem with at most this many
# active rows per coefficient and at most _DIRECT_MAX_COEF coefficients, the Hessians of one round's direct steps
# within _DIRECT_BYTES (float64)
_DIRECT_ROWS_PER_COEF = 8
_DIRECT_MAX_COEF = 1025
_DIRECT_BYTES = 256 << 20


class NewtonProblems:
    """The driver's state: theta, J, g, and H (cholesky) or its diagonal (cg), for every problem."""

    g0_norm: np.ndarray | None  # ||g_j|| at the first accepted point (the CG forcing terms' reference)
    history: list[list[float]]
    ends: list[list[float]]

    def __init__(self, theta0, reg, weight_sum, fit_intercept, solver, preconditioner=None):
        self.theta = np.array(theta0, dtype=np.float64, ndmin=2)
        k, p = self.theta.shape
        self.spectrum = check_shape(preconditioner, p - fit_intercept)
        self.penalty = np.ones(p)
        if fit_intercept:
            self.penalty[-1] = 0.0
        self.reg, self.weight_sum, self.solver = reg, weight_sum, solver
        self.f, self.g = np.zeros(k), np.zeros((k, p))
        self.h = np.zeros((k, p, p)) if solver == "cholesky" else np.zeros((k, p))  # H, or its diagonal
        self.curvature = np.zeros(k)  # (1/W) sum_i w_i l''_ij, with the spectral preconditioner
        self.active = np.zeros(k)  # rows with l''_ij != 0 (cg: what a direct step costs)
        self.g0_norm, self.cg_passes, self.direct_steps = None, 0, 0
        self.history, self.ends = [[] for _ in range(k)], [[] for _ in range(k)]
        self.rounds, self.converged, self.message = [0] * k, [False] * k, ["maxIter rounds reached"] * k

    @property
    def kind(self):
        """What a pass at an accepted point returns (``PartitionSums`` method name)."""
        if self.solver == "cholesky":
            return "loss_gradient_hessian"
        return "loss_gradient_diagonal" if self.spectrum is None else "loss_gradient_curvature"

    def value(self, f_sums, theta):
        return f_sums / self.weight_sum + 0.5 * self.reg * np.sum(self.penalty * theta * theta, axis=-1)

    def accept(self, idx, theta, sums):
        f_sums, g_sums, h_sums = sums[:3]
        if len(sums) > 3:  # Newton-CG's passes count each problem's active rows
            self.active[idx] = sums[3]
        self.theta[idx] = theta
        self.f[idx] = self.value(f_sums, theta)
        self.g[idx] = g_sums / self.weight_sum + self.reg * self.penalty * theta
        shift = self.reg * self.penalty + _RIDGE
        if self.kind == "loss_gradient_curvature":
            # of the diagonal only the intercept's entry is used (``_precondition``), and it is the curvature
            self.curvature[idx] = h_sums / self.weight_sum
            h_sums = np.outer(h_sums, self.penalty == 0)
        self.h[idx] = h_sums / self.weight_sum + (np.diag(shift) if self.solver == "cholesky" else shift)
        if self.g0_norm is None:
            self.g0_norm = np.linalg.norm(self.g, axis=1)

    def export(self):
        """The state a checkpoint keeps between rounds (``newton_warm_started``): theta and the per-problem
        bookkeeping; f, g and H are recomputed from theta by the resumed fit's first pass."""
        state = {
            "theta": self.theta.copy(),
            "f": self.f.copy(),
            "rounds": list(self.rounds),
            "history": [list(h) for h in self.history],
            "ends": [list(e) for e in self.ends],
            "converged": list(self.converged),
            "message": list(self.message),
        }
        if self.g0_norm is not None:
            state["g0_norm"] = np.array(self.g0_norm)
        return state

    def restore(self, state):
        """Take up ``export()``'s state; ValueError when it holds other problems than this solve's."""
        theta = np.asarray(state["theta"], dtype=np.float64)
        if theta.shape != self.theta.shape:
            raise ValueError(
                f"the checkpoint holds {theta.shape[0]} problem(s) of {theta.shape[1]} coefficients, "
                f"this fit solves {self.theta.shape[0]} of {self.theta.shape[1]}"
            )
        self.theta, self.f = theta.copy(), np.asarray(state["f"], dtype=np.float64).copy()
        self.rounds, self.converged, self.message = (
            list(state["rounds"]),
            list(state["converged"]),
            list(state["message"]),
        )
        self.history, self.ends = [list(h) for h in state["history"]], [list(e) for e in state["ends"]]
        self.g0_norm = np.asarray(state["g0_norm"]) if "g0_norm" in state else None

    def directions(self, running, evaluate):
        """{j: delta_j} solving H_j delta_j = -g_j for every running problem: by Cholesky, or by CG except for
        the problems with few active rows (``_direct``), whose H_j one more pass forms."""
        if self.solver == "cholesky":
            return {j: _solve(self.h[j], self.g[j]) for j in running}
        direct = self._direct(running)
        steps = {}
        if direct:
            shift = np.diag(self.reg * self.penalty + _RIDGE)
            h = evaluate(self.theta[direct], direct, "hessian_block")[0] / self.weight_sum
            steps = {j: _solve(h[i] + shift, self.g[j]) for i, j in enumerate(direct)}
            self.direct_steps += len(direct)
        rest = [j for j in running if j not in steps]
        return {**steps, **self._cg(rest, evaluate)} if rest else steps

    def _direct(self, running):
        """The running problems whose Newton step is solved directly: at most ``_DIRECT_ROWS_PER_COEF`` active rows
        per coefficient, the fewest first, their Hessians within ``_DIRECT_BYTES``. With n_j active rows H_j costs
        about 2 n_j p^2 flops, a CG product 2 n_j p (twice, over the rows it reads); but with n_j near p or
        below, H_j's data part has rank n_j and CG takes up to n_j products, each a pass (a Spark job or an
        all-reduce): a pair's few rows in a smoothed hinge's band took 50 to 150 per round. Beyond
        ``_DIRECT_MAX_COEF`` coefficients H_j's p^2 per row costs more than those passes (4000 landmarks: 16
        million per row), and every step is CG's."""
        p = self.theta.shape[1]
        if p > _DIRECT_MAX_COEF:
            return []
        few = sorted((j for j in running if self.active[j] <= _DIRECT_ROWS_PER_COEF * p), key=lambda j: self.active[j])
        return sorted(few[: max(0, _DIRECT_BYTES // (8 * p * p))])

    def _precondition(self, r, ids):
        """M_j^-1 r_j for the rows r of the problems ``ids`` (``optim.preconditioner``)."""
        return precondition(r, self.h[ids], self.spectrum, self.curvature[ids], self.reg + _RIDGE)

    def _cg(self, running, evaluate):
        """Preconditioned CG for all running problems at once, one Hessian-vector pass per iteration."""
        g = self.g[running]
        x, r = np.zeros_like(g), -g
        z = self._precondition(r, running)
        d, rz = z.copy(), np.sum(r * z, axis=1)
        g_norm = np.linalg.norm(g, axis=1)
        g0_norm = self.g0_norm
        assert g0_norm is not None  # set by the first accept(), before any direction
        eta = np.minimum(0.1, np.sqrt(g_norm / np.maximum(g0_norm[running], 1e-300)))
        live = list(range(len(running)))
        while self.cg_passes < _CG_MAX_ITER:
            live = [i for i in live if np.linalg.norm(r[i]) > eta[i] * g_norm[i]]
            if not live:
                break
            self.cg_passes += 1
            ids = [running[i] for i in live]
            # all of ``running``, so the pass's theta stays the round's (module docstring)
            hd = (
                evaluate(np.stack([self.theta[running], d]), running, "hessp")[0][live] / self.weight_sum
                + (self.reg * self.penalty + _RIDGE) * d[live]
            )
            alpha = rz[live] / np.maximum(np.sum(d[live] * hd, axis=1), 1e-300)
            x[live] += alpha[:, None] * d[live]
            r[live] -= alpha[:, None] * hd
            z_new = self._precondition(r[live], ids)
            rz_new = np.sum(r[live] * z_new, axis=1)
            d[live] = z_new + (rz_new / np.maximum(rz[live], 1e-300))[:, None] * d[live]
            rz[live] = rz_new
        return dict(zip(running, x))


def _solve(h, g):
    """-H^-1 g by Cholesky (H is positive definite: the ridge; a third of an LU solve's flops, 45 one-vs-one
    directions of 501 coefficients in 0.05 s instead of 0.14 s), by least squares where rounding made it not."""
    try:
        return -scipy.linalg.cho_solve(scipy.linalg.cho_factor(h, check_finite=False), g, check_finite=False)
    except np.linalg.LinAlgError:
        return -np.linalg.lstsq(h, g, rcond=None)[0]
