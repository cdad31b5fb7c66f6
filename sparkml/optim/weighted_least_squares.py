"""MLlib's WeightedLeastSquares from one Gram-matrix pass: LinearRegression's ``normal`` solver and each step of
GeneralizedLinearRegression's IRLS.

With population stds sigma_j (features) and delta (label), MLlib works in the scaled space
a~_j = a_j / sigma_j, b~ = b / delta, on the *uncentered* second moments (W = sum of weights):

    aa = E_w[a~ a~^T] + diag(l2_j),  ab = E_w[a~ b~],  plus the intercept row/column (E_w[a~], 1)

and minimizes  0.5 E_w[b~^2] - ab.x + 0.5 x^T aa x  +  sum_j l1_j |x_j|  with

    l2_j = lambda (1 - alpha) / delta  (/ sigma_j^2 without standardization)
    l1_j = lambda alpha / delta        (/ sigma_j   without standardization), 0 for the intercept.

Solver choice is MLlib's: Cholesky when alpha == 0 or lambda == 0 (falling back to L-BFGS when the
matrix is singular), otherwise OWL-QN with the user's maxIter and tol. That OWL-QN run is what MLlib
returns for a mixed elastic net, stopped at ``tol``; reproducing it step by step (the intercept is
overwritten in place by its closed form at every evaluation, as MLlib's cost function does) is what
makes the result a drop-in rather than a different point near the optimum.
"""

from dataclasses import dataclass

import numpy as np

from sparkml.optim import minimize_lbfgs


@dataclass
class NormalSolution:
    coefficients: np.ndarray  # original space
    intercept: float
    objective_history: list[float]
    iterations: int
    # diag((A^T W A)^-1) in the user's units (coefficients, then the intercept), as MLlib's
    # WeightedLeastSquares reports it for the summary's standard errors: Cholesky solves only
    diag_inv_atwa: np.ndarray | None = None


def solve_normal_equations(
    gram,
    xty,
    *,
    weight_sum,
    mean,
    var,
    label_mean,
    label_var,
    fit_intercept,
    reg_param,
    elastic_net,
    standardization,
    max_iter,
    tol,
    standardize_label=True,
):
    """Solve MLlib's weighted least squares from ``gram = X^T W X`` and ``xty = X^T W y`` (sums).

    ``mean``/``var`` are the weighted feature means and population variances, ``label_mean``/
    ``label_var`` the label's. The label must not be constant (the caller handles that case).
    ``standardize_label=False`` (what GeneralizedLinearRegression's IRLS steps ask of MLlib's solver): the
    L2 term is not divided by the label's std delta, lambda (1 - alpha)/2 ||x||^2 in the label's own units.
    """
    d = len(mean)
    W = float(weight_sum)
    sigma = np.sqrt(np.maximum(var, 0.0))
    inv = np.divide(1.0, sigma, out=np.zeros(d), where=sigma > 0)
    delta = float(np.sqrt(label_var)) if label_var > 0 else abs(label_mean)

    aa = (np.asarray(gram)[:d, :d] / W) * np.outer(inv, inv)
    a_bar = mean * inv
    ab = np.asarray(xty)[:d] / W * inv / delta
    b_bar, bb_bar = label_mean / delta, (label_var + label_mean**2) / delta**2

    eff = reg_param / delta
    l2 = np.full(d, (1.0 - elastic_net) * eff * (1.0 if standardize_label else delta))
    l1 = np.full(d, elastic_net * eff)
    if not standardization:
        l2 = np.divide(l2, sigma**2, out=np.zeros(d), where=sigma > 0)
        l1 = np.divide(l1, sigma, out=np.zeros(d), where=sigma > 0)
    aa[np.diag_indices(d)] += l2
    if fit_intercept:
        aa = np.block([[aa, a_bar[:, None]], [a_bar[None, :], np.ones((1, 1))]])
        ab = np.append(ab, b_bar)
        l1 = np.append(l1, 0.0)

    def cost(x):
        if fit_intercept:
            x[-1] = b_bar - x[:d] @ a_bar  # in place, as MLlib's NormalEquationCostFun
        aax = aa @ x
        return 0.5 * bb_bar - ab @ x + 0.5 * x @ aax, aax - ab

    x0 = np.zeros(d + fit_intercept)
    if fit_intercept:
        x0[-1] = b_bar
    history, iterations, diag_inv = [0.0], 0, None
    if elastic_net != 0 and reg_param != 0:
        res = minimize_lbfgs(cost, x0, max_iter=max_iter, tol=tol, l1=l1, method="owlqn")
        x, history, iterations = res.x, list(res.objective_history), res.n_iter
    else:
        try:
            chol = np.linalg.cholesky(aa)
            x = np.linalg.solve(chol.T, np.linalg.solve(chol, ab))
            inv_chol = np.linalg.inv(chol)
            diag_inv = np.sum(inv_chol**2, axis=0)  # diag(aa^-1) = column sums of L^-T L^-1
        except np.linalg.LinAlgError:  # MLlib: singular A^T W A -> Quasi-Newton without L1
            res = minimize_lbfgs(cost, x0, max_iter=max_iter, tol=tol)
            x, history, iterations = res.x, list(res.objective_history), res.n_iter

    coefficients = x[:d] * delta * inv
    intercept = float(x[-1] * delta) if fit_intercept else 0.0
    diag_inv_atwa = None
    if diag_inv is not None:  # back from the scaled space: a~_j = a_j / sigma_j, aa = A~^T W A~ / W
        unit = np.append(sigma**2, 1.0) if fit_intercept else sigma**2
        diag_inv_atwa = diag_inv / (W * unit)
    return NormalSolution(coefficients, intercept, history, iterations, diag_inv_atwa)
