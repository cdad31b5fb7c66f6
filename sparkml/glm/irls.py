"""GeneralizedLinearRegression's solver on the driver: MLlib's IRLS from one distributed pass per iteration.

Each iteration is one pass over the resident blocks (``sparkml.gpu.glm.IRLSPass``: the weighted Gram matrix
of the rows and the working responses at the current coefficients) and one weighted least-squares solve on
the driver, as MLlib's ``IterativelyReweightedLeastSquares`` runs ``WeightedLeastSquares`` on its reweighted
instances (``optim.weighted_least_squares``):

* the start regresses g(mu_0(y)) - o on [x, 1] with the weights w, features and label standardized (for the
  gaussian family with the identity link this one solve is the model, as in MLlib);
* each iteration regresses z on [x, 1] with the weights w' and an L2 term regParam / 2 ||beta||^2, neither
  standardized, so the solve minimizes (1 / (2 sum w')) sum_i w'_i (z_i - x_i . beta - b)^2
  + regParam / 2 ||beta||^2;
* it stops when no coefficient (intercept included) moved by tol or more, or after maxIter iterations.

With regParam > 0 the model is therefore the fixed point of that iteration, at which the score equations
read X^T W (y - mu) g'(mu) = regParam (sum_i w'_i) beta: the penalty is scaled by the working weights' sum
at the solution, not a fixed multiple of a penalized deviance's. That is MLlib's model, which this solver
reproduces.

A fit that ends on maxIter without converging is reported (``IRLSResult.converged``; the estimator warns), as R's
``glm.fit`` and statsmodels do: IRLS on a non-canonical link (Poisson with the sqrt link, Gamma with the inverse
link) can cycle or run off, as MLlib's does, and MLlib returns that model without a word.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sparkml.optim.weighted_least_squares import solve_normal_equations


class ConvergenceWarning(UserWarning):
    """IRLS ended on ``maxIter`` before its convergence test held (``warnings.filterwarnings`` can silence it)."""


@dataclass
class IRLSResult:
    coefficients: np.ndarray
    intercept: float
    iterations: int
    # diag((A^T W A)^-1) of the last weighted least-squares solve, in the user's units (coefficients, then the
    # intercept): the summary's standard errors. None when that solve had none (a constant working label).
    diag_inv_atwa: np.ndarray | None
    deviance_history: list[float] = field(default_factory=list)
    converged: bool = True  # False: maxIter ended the fit before a step below tol


def weighted_least_squares(sums, d, has_offset, *, fit_intercept, reg_param, initial):
    """(coefficients (d,), intercept, diag_inv_atwa or None): MLlib's WeightedLeastSquares of the working
    responses on [x, 1] from one pass's ``sums`` = ((sum w' zo^2, deviance), sum w' zo [x, o, 1],
    sum w' [x, o, 1][x, o, 1]^T), zo = z + o (``IRLSPass``); ``initial``: the standardized start."""
    (zz, _), g, h = sums
    h, g = np.asarray(h, np.float64), np.asarray(g, np.float64)
    weight_sum = float(h[-1, -1])
    if weight_sum <= 0:
        raise ValueError("the sum of the working weights is zero: no row carries weight")
    xx, x_sum, xz, z_sum = h[:d, :d], h[:d, -1], g[:d].copy(), float(g[-1])
    if has_offset:  # z = zo - o: take the offset's terms out (its column is d)
        o = d
        xz -= h[:d, o]
        zz, z_sum = zz - 2.0 * g[o] + h[o, o], z_sum - h[o, -1]
    mean = x_sum / weight_sum
    var = np.maximum(np.diag(xx) / weight_sum - mean**2, 0.0)
    label_mean = z_sum / weight_sum
    label_var = max(float(zz) / weight_sum - label_mean**2, 0.0)
    if label_var == 0.0 and (fit_intercept or label_mean == 0.0):
        # MLlib: a constant label is the intercept alone (and zeros), without a solve
        return np.zeros(d), float(label_mean) if fit_intercept else 0.0, None
    solution = solve_normal_equations(
        xx,
        xz,
        weight_sum=weight_sum,
        mean=mean,
        var=var,
        label_mean=label_mean,
        label_var=label_var,
        fit_intercept=fit_intercept,
        reg_param=reg_param,
        elastic_net=0.0,
        standardization=initial,
        max_iter=100,
        tol=1e-6,
        standardize_label=initial,
    )
    return solution.coefficients, solution.intercept, solution.diag_inv_atwa


def irls(
    passes,
    d,
    has_offset,
    *,
    fit_intercept,
    reg_param,
    max_iter,
    tol,
    identity_gaussian,
    progress=None,
    checkpoint=None,
):
    """``IRLSResult``: MLlib's IRLS (module docstring). ``passes(coef, initial)``: one distributed pass's sums at
    coef = [beta, (1 for the offset column), b]; ``progress(iteration, deviance, step)``: called per iteration.
    ``checkpoint``: an ``optim.checkpoint.Checkpoint`` (or None): every ``checkpointInterval`` iterations that did
    not converge write the coefficients, the iteration count and the deviance history; a fit that finds one
    resumes from it, with the iterates and history an uninterrupted fit has."""

    def coef_of(beta, b):
        return np.concatenate([beta, [1.0] if has_offset else [], [b]])

    resume = checkpoint.resume if checkpoint is not None else None
    if resume is not None and not identity_gaussian:
        beta, b, diag = resume["beta"], float(resume["intercept"]), resume.get("diag")
        if beta.shape != (d,):
            raise ValueError(
                f"cannot resume from the checkpoint in {checkpoint.directory}: it holds {beta.size} coefficients, "
                f"this fit has {d} features. Remove it or set another checkpointDir to start afresh"
            )
        history: list[float] = list(resume["history"])
        iteration = int(resume["iteration"])
    else:
        beta, b, diag = weighted_least_squares(
            passes(coef_of(np.zeros(d), 0.0), True),
            d,
            has_offset,
            fit_intercept=fit_intercept,
            reg_param=reg_param,
            initial=True,
        )
        if identity_gaussian:
            return IRLSResult(beta, b, 1, diag)
        history, iteration = [], 0
    converged = False
    while iteration < max_iter:
        sums = passes(coef_of(beta, b), False)
        history.append(float(sums[0][1]))  # the deviance at the coefficients this step starts from
        new_beta, new_b, diag = weighted_least_squares(
            sums, d, has_offset, fit_intercept=fit_intercept, reg_param=reg_param, initial=False
        )
        step = max(float(np.max(np.abs(new_beta - beta), initial=0.0)), abs(new_b - b))
        beta, b = new_beta, new_b
        iteration += 1
        if progress is not None:
            progress(iteration, history[-1], step)
        if step < tol:
            converged = True
            break
        if checkpoint is not None:
            state = {"beta": beta, "intercept": b, "iteration": iteration, "history": list(history)}
            if diag is not None:
                state["diag"] = diag
            checkpoint.snapshot(iteration, lambda state=state: state)
    return IRLSResult(beta, b, iteration, diag, history, converged or max_iter == 0)
