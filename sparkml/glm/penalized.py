"""GeneralizedLinearRegression beyond MLlib's IRLS: the penalized deviance, minimized by L-BFGS or OWL-QN.

With an L1 term (``elasticNetParam`` > 0 and ``regParam`` > 0), or more features than IRLS's Gram matrix should
hold (``estimator.IRLS_MAX_FEATURES``), the fit minimizes

    f(beta, b) = (1 / W) sum_i w_i d(y_i, mu_i) / 2 + regParam [alpha ||beta||_1 + (1 - alpha) / 2 ||beta||_2^2]

(W = sum_i w_i, d the family's unit deviance, mu_i = g^-1(x_i . beta + b + o_i), alpha = ``elasticNetParam``, the
intercept unpenalized, the features not standardized): glum's objective for its ``alpha`` = regParam and
``l1_ratio`` = elasticNetParam, and, with regParam = 0, the maximum likelihood estimate IRLS also finds. With
regParam > 0 and no L1 term, MLlib's IRLS model (the fixed point its docstring describes) is not this minimum;
IRLS runs then, up to ``IRLS_MAX_FEATURES`` features. The solvers are the linear models' (``sparkml.optim``,
through the estimator's strategy), over features scaled by their standard deviations and centered for
conditioning (``optim.linear_objective``): the penalty is the one above, in the user's units.
"""

from __future__ import annotations

import numpy as np
import torch

from sparkml.optim.linear_objective import LinearObjective

DEFAULT_MAX_ITER = 100  # when maxIter is not set (its default, 25, counts IRLS's costlier iterations)


def objective(summary, d, fit_intercept, reg_param, elastic_net):
    """The ``LinearObjective`` of the module docstring over the first ``d`` features of ``summary`` (the last is
    the offset, when there is one)."""
    return LinearObjective(
        n_features=d,
        n_outputs=1,
        fit_intercept=fit_intercept,
        mean=summary.mean[:d],
        std=np.sqrt(summary.var_unbiased[:d]),
        weight_sum=summary.weight_sum,
        reg_l2=reg_param * (1.0 - elastic_net),
        reg_l1=reg_param * elastic_net,
        standardization=False,
    )


def start_intercept(summary, d, family, link, has_offset):
    """The intercept the solver starts from (beta = 0): the link of the weighted label mean (kept in the family's
    range), less the mean offset."""
    mu = family.project(torch.tensor([summary.label_mean], dtype=torch.float64))
    if family.name in ("poisson", "gamma", "tweedie"):
        mu = torch.clamp(mu, min=0.1)  # a mean label of 0 would start at the link's pole
    b = float(link.link(mu)[0])
    if has_offset:
        b -= float(summary.mean[d])
    return b if np.isfinite(b) else 0.0
