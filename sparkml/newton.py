"""Newton's method for several independent problems at once over distributed sums (Chapelle 2007).

Problem j minimizes

    J_j(theta_j) = (1/W) sum_i w_i l_ij(theta_j) + lambda/2 ||theta_j * penalty||^2,   W = sum_i w_i

(the intercept, last, unpenalized when ``fit_intercept``). For the primal squared-hinge SVM,
l_ij = max(0, 1 - s_ij m_ij)^2 with m_ij = phi_i . theta_j: J is convex and piecewise quadratic,
its gradient and generalized Hessian are sums over the rows (the Hessian over the active rows,
s m < 1, only):

    g = lambda penalty * theta + (1/W) sum_i w_i (-2 s_i max(0, 1 - s_i m_i)) phi~_i
    H = lambda diag(penalty) + (2/W) sum_{active} w_i phi~_i phi~_i^T,         phi~_i = [phi_i, 1]

Platt scaling is the same loop with the log loss and lambda = 0. A round is ONE distributed pass
returning the three sums for every problem still running (``evaluate``), after which the driver
solves H_j delta_j = -g_j (Cholesky) for each. The full steps are tried first and that pass
already yields the next round's sums; the problems whose step fails Armijo's test halve it, one
loss-only pass (over those problems only) per halving. Problem j stops when its predicted
decrease -g.delta / 2 or its actual decrease falls below ``tol * J_j``, or after ``max_iter``
rounds; typically 5 to 10 rounds. A 1e-10 ridge keeps H positive definite when no row is active.
"""
import time

import numpy as np

from sparkml.training import TrainingSummary, logger

_ARMIJO = 1e-4
_RIDGE = 1e-10
_MIN_STEP = 1e-10


class _Problems:
    """The driver's state: theta, J, g, H and the history of every problem."""

    def __init__(self, theta0, reg, weight_sum, fit_intercept):
        self.theta = np.array(theta0, dtype=np.float64, ndmin=2)
        k, p = self.theta.shape
        self.penalty = np.ones(p)
        if fit_intercept:
            self.penalty[-1] = 0.0
        self.reg, self.weight_sum = reg, weight_sum
        self.f, self.g, self.h = np.zeros(k), np.zeros((k, p)), np.zeros((k, p, p))
        self.history, self.ends = [[] for _ in range(k)], [[] for _ in range(k)]
        self.rounds, self.converged, self.message = [0] * k, [False] * k, ["maxIter rounds reached"] * k

    def value(self, f_sums, theta):
        return f_sums / self.weight_sum + 0.5 * self.reg * np.sum(self.penalty * theta * theta, axis=-1)

    def accept(self, idx, theta, sums):
        f_sums, g_sums, h_sums = sums
        self.theta[idx] = theta
        self.f[idx] = self.value(f_sums, theta)
        self.g[idx] = g_sums / self.weight_sum + self.reg * self.penalty * theta
        self.h[idx] = h_sums / self.weight_sum + np.diag(self.reg * self.penalty + _RIDGE)

    def direction(self, j):
        try:
            return -np.linalg.solve(self.h[j], self.g[j])  # symmetric positive definite: one factorization
        except np.linalg.LinAlgError:
            return -np.linalg.lstsq(self.h[j], self.g[j], rcond=None)[0]


def newton(evaluate, theta0, *, reg, weight_sum, fit_intercept, max_iter, tol, names):
    """Minimize every J_j from ``theta0`` ((k, p) float64); returns (theta (k, p), [TrainingSummary] * k).

    ``evaluate(theta, idx, hessian)``: the sums over all rows for the problems ``idx`` at
    ``theta`` (len(idx), p): (sum w l (len,), sum w dl (len, p)) and, when ``hessian``, the
    Hessian sums (len, p, p) as a third element.
    """
    start = time.perf_counter()
    state = _Problems(theta0, reg, weight_sum, fit_intercept)
    running = list(range(state.theta.shape[0]))
    state.accept(running, state.theta[running], evaluate(state.theta[running], running, True))
    for j in running:
        state.history[j].append(float(state.f[j]))
    while running:
        deltas = {j: state.direction(j) for j in running}
        slopes = {j: float(state.g[j] @ deltas[j]) for j in running}
        for j in list(running):
            if -slopes[j] / 2 <= tol * max(abs(state.f[j]), 1e-300):
                state.converged[j], state.message[j] = True, "predicted decrease below tol"
                running.remove(j)
            elif state.rounds[j] >= max_iter:
                running.remove(j)
        if not running:
            break
        tic = time.perf_counter()
        steps = dict.fromkeys(running, 1.0)
        candidates = np.array([state.theta[j] + deltas[j] for j in running])
        full = evaluate(candidates, running, True)
        f_new = dict(zip(running, state.value(full[0], candidates)))

        def failing():
            return [j for j in running if steps[j] > _MIN_STEP
                    and f_new[j] > state.f[j] + _ARMIJO * steps[j] * slopes[j]]

        halved = set()
        while bad := failing():
            for j in bad:
                steps[j] /= 2
                halved.add(j)
            theta_bad = np.array([state.theta[j] + steps[j] * deltas[j] for j in bad])
            f_new.update(zip(bad, state.value(evaluate(theta_bad, bad, False)[0], theta_bad)))
        kept = [i for i, j in enumerate(running) if j not in halved]
        f_old = {j: state.f[j] for j in running}
        state.accept([running[i] for i in kept], candidates[kept], tuple(s[kept] for s in full))
        if halved:
            idx = sorted(halved)
            theta_h = np.array([state.theta[j] + steps[j] * deltas[j] for j in idx])
            state.accept(idx, theta_h, evaluate(theta_h, idx, True))
        seconds = time.perf_counter() - start
        for j in list(running):
            state.rounds[j] += 1
            state.history[j].append(float(state.f[j]))
            state.ends[j].append(seconds)
            logger.info("%s Newton round %d: objective %.10g, step %g", names[j], state.rounds[j], state.f[j],
                        steps[j])
            if f_old[j] - state.f[j] <= tol * max(abs(state.f[j]), 1e-300):
                state.converged[j], state.message[j] = True, "relative decrease below tol"
                running.remove(j)
        logger.info("Newton round over %d problem(s): %.3f s", len(steps), time.perf_counter() - tic)
    total = time.perf_counter() - start
    summaries = [TrainingSummary(state.history[j], state.rounds[j], state.converged[j], state.message[j], total,
                                 state.ends[j]) for j in range(len(names))]
    for j, s in enumerate(summaries):
        logger.info("%s finished: %d Newton rounds, objective %.10g (%s)", names[j], s.totalIterations,
                    state.f[j], s.message)
    return state.theta, summaries
