"""Newton's method for the primal squared-hinge SVM (Chapelle 2007) over distributed sums.

With features phi_i (a kernel feature map), labels s_i = 2 y_i - 1, weights w_i, W = sum w_i:

    J(theta) = lambda/2 ||beta||^2 + (1/W) sum_i w_i max(0, 1 - s_i m_i)^2,   m_i = phi_i . beta + b

J is convex and piecewise quadratic: its gradient and generalized Hessian are sums over the rows
(the Hessian over the active rows, s_i m_i < 1, only)

    g = lambda [beta, 0] + (1/W) sum_i w_i (-2 s_i max(0, 1 - s_i m_i)) phi~_i
    H = lambda diag(1, .., 1, 0) + (2/W) sum_{active} w_i phi~_i phi~_i^T,     phi~_i = [phi_i, 1]

so a round is one distributed pass returning the three sums (``sums_fgh``), after which the driver
solves H delta = -g (p = m + 1 unknowns, Cholesky) and steps. The full step is tried first and
its pass already yields the next round's sums; when it fails Armijo's test the step is halved,
one loss-only pass (``sums_fg``) per halving. Stops when the predicted decrease -g.delta / 2 falls
below ``tol * J`` or after ``max_iter`` rounds; typically 5 to 10 rounds. The intercept is not
penalized (as in scikit-learn's SVC); a 1e-10 ridge keeps H positive definite when no row is active.
"""
import time

import numpy as np

from sparkml.training import TrainingSummary, logger

_ARMIJO = 1e-4
_RIDGE = 1e-10


def newton_squared_hinge(sums_fgh, sums_fg, theta0, *, reg, weight_sum, fit_intercept, max_iter, tol, name):
    """Minimize J from ``theta0`` ((m + fit_intercept,) float64); returns (theta, TrainingSummary).

    ``sums_fgh(theta)`` -> (sum w l, sum w dl/dtheta, sum w d2l/dtheta2) over all rows;
    ``sums_fg(theta)`` -> the first two.
    """
    start = time.perf_counter()
    p = len(theta0)
    penalty = np.ones(p)
    if fit_intercept:
        penalty[-1] = 0.0

    def value(f_sum, theta):
        return f_sum / weight_sum + 0.5 * reg * float(np.sum(penalty * theta * theta))

    def assemble(theta, sums):
        f_sum, g_sum, h_sum = sums
        g = g_sum / weight_sum + reg * penalty * theta
        h = h_sum / weight_sum + np.diag(reg * penalty + _RIDGE)
        return value(f_sum, theta), g, h

    theta = np.asarray(theta0, dtype=np.float64).copy()
    f, g, h = assemble(theta, sums_fgh(theta))
    history, ends, converged, message = [f], [], False, "maxIter rounds reached"
    rounds = 0
    while rounds < max_iter:
        try:
            delta = -np.linalg.solve(h, g)  # h is symmetric positive definite: one factorization
        except np.linalg.LinAlgError:
            delta = -np.linalg.lstsq(h, g, rcond=None)[0]
        slope = float(g @ delta)
        if -slope / 2 <= tol * max(abs(f), 1e-300):
            converged, message = True, "predicted decrease below tol"
            break
        tic = time.perf_counter()
        step, candidate = 1.0, theta + delta
        sums = sums_fgh(candidate)
        f_new = value(sums[0], candidate)
        while f_new > f + _ARMIJO * step * slope and step > 1e-10:
            step /= 2
            candidate = theta + step * delta
            f_new = value(sums_fg(candidate)[0], candidate)
            sums = None
        if sums is None:
            sums = sums_fgh(candidate)
        theta = candidate
        f_old = f
        f, g, h = assemble(theta, sums)
        rounds += 1
        history.append(f)
        ends.append(time.perf_counter() - start)
        logger.info("%s Newton round %d: objective %.10g, step %g, %.3f s", name, rounds, f, step,
                    time.perf_counter() - tic)
        if f_old - f <= tol * max(abs(f), 1e-300):
            converged, message = True, "relative decrease below tol"
            break
    logger.info("%s finished: %d Newton rounds, objective %.10g, %.2f s (%s)", name, rounds, f,
                time.perf_counter() - start, message)
    return theta, TrainingSummary(history, rounds, converged, message, time.perf_counter() - start, ends)
