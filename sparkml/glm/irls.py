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

Where MLlib's IRLS would step to coefficients at which some row's linear predictor leaves the link's domain or its
mean leaves the family's (a negative mean under the inverse or identity link, eta = 0 under the inverse or sqrt link)
or the deviance is not finite, this one halves the step back toward the last valid coefficients until it is valid
again, as R's ``glm.fit`` does (the first step's anchor is the intercept-only model of the start); without
regParam it also halves a step that raises the deviance (as R's ``glm2`` does: Fisher scoring's step is a descent
direction, so a short enough one lowers it), which stops the cycling of a non-canonical link. Each halving is one
more pass. Wherever MLlib's iterates stay valid, no step is halved and the iterates are MLlib's; where they do
not (Gamma with the inverse link, Poisson with the sqrt or identity link, on data whose truth is another link),
MLlib's IRLS cycles or runs off to coefficients of 1e30 and more, and this one converges or stops at valid
coefficients, whose deviance is far lower.

With regParam > 0 the model is therefore the fixed point of that iteration, at which the score equations
read X^T W (y - mu) g'(mu) = regParam (sum_i w'_i) beta: the penalty is scaled by the working weights' sum
at the solution, not a fixed multiple of a penalized deviance's. That is MLlib's model, which this solver
reproduces.

A fit that ends on maxIter without converging, or whose step halving reaches tol without finding valid
coefficients (the optimum is on the domain's edge), is reported (``IRLSResult.converged`` and ``stalled``; the
estimator warns), as R's ``glm.fit`` and statsmodels do; MLlib returns its model without a word.
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
    converged: bool = True  # False: maxIter ended the fit before a step below tol, or it stalled
    stalled: bool = False  # True: halving the step reached tol without valid coefficients (the last valid kept)
    halvings: int = 0  # the steps halved (each one pass)


MAX_HALVINGS = 30  # per iteration, as R's glm.fit bounds its inner loop (2^-30 of a step is below any tol)


RISE_TOL = 1e-8  # a relative rise of the deviance below this is rounding, not a step to halve


def _usable(sums, ceiling: float) -> bool:
    """Whether a pass's coefficients are valid (every row's eta and mean in range, the deviance finite) and its
    deviance is not above ``ceiling``."""
    _, deviance, invalid = (float(v) for v in sums[0])
    return invalid == 0 and np.isfinite(deviance) and deviance <= ceiling


def weighted_least_squares(sums, d, has_offset, *, fit_intercept, reg_param, initial):
    """(coefficients (d,), intercept, diag_inv_atwa or None): MLlib's WeightedLeastSquares of the working
    responses on [x, 1] from one pass's ``sums`` = ((sum w' zo^2, deviance), sum w' zo [x, o, 1],
    sum w' [x, o, 1][x, o, 1]^T), zo = z + o (``IRLSPass``); ``initial``: the standardized start."""
    (zz, *_), g, h = sums
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
        anchor = beta, b
    else:
        start = passes(coef_of(np.zeros(d), 0.0), True)
        beta, b, diag = weighted_least_squares(
            start, d, has_offset, fit_intercept=fit_intercept, reg_param=reg_param, initial=True
        )
        if identity_gaussian:
            return IRLSResult(beta, b, 1, diag)
        history, iteration = [], 0
        anchor = np.zeros(d), _start_intercept(start, d, has_offset) if fit_intercept else 0.0
    converged = stalled = False
    halvings = 0
    while iteration < max_iter:
        sums = passes(coef_of(beta, b), False)
        # with regParam > 0 MLlib's iteration does not minimize the deviance, so only a penalty-free fit halves a rise
        ceiling = history[-1] * (1.0 + RISE_TOL) if history and reg_param == 0 else np.inf
        if not history and reg_param == 0 and not _usable(sums, ceiling):
            # the first step left the domain: halve it toward the intercept-only anchor, no higher than its deviance
            ceiling = float(passes(coef_of(*anchor), False)[0][1]) * (1.0 + RISE_TOL)
            halvings += 1
        tried = 0
        while not _usable(sums, ceiling) and tried < MAX_HALVINGS:
            beta, b = (beta + anchor[0]) / 2.0, (b + anchor[1]) / 2.0
            tried += 1
            if max(float(np.max(np.abs(beta - anchor[0]), initial=0.0)), abs(b - anchor[1])) < tol:
                beta, b, stalled = anchor[0], anchor[1], True
                break
            sums = passes(coef_of(beta, b), False)
        halvings += tried
        if stalled or not _usable(sums, ceiling):
            beta, b, stalled = anchor[0], anchor[1], True  # no valid step from here: keep the last valid point
            break
        anchor = beta, b
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
    if not converged and not stalled and iteration > 0 and halvings:
        # maxIter ended a fit whose steps were halved: keep its last step only if that step is valid and no worse
        ceiling = history[-1] * (1.0 + RISE_TOL) if reg_param == 0 else np.inf
        if not _usable(passes(coef_of(beta, b), False), ceiling):
            beta, b = anchor
    converged = (converged or max_iter == 0) and not stalled
    return IRLSResult(beta, b, iteration, diag, history, converged, stalled, halvings)


def _start_intercept(sums, d, has_offset) -> float:
    """The weighted mean of g(mu_0(y)) - o from the start's pass: the intercept-only model that anchors the first
    step's halving."""
    _, g, h = sums
    z_sum = float(np.asarray(g, np.float64)[-1])
    h = np.asarray(h, np.float64)
    if has_offset:
        z_sum -= float(h[d, -1])
    return z_sum / float(h[-1, -1])
