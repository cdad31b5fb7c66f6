"""Platt scaling of KernelSVC's decision values: P(class | x) = sigmoid(a m(x) + b) per problem.

Each problem's (a, b) minimizes the log loss of its training decision values m against Platt's smoothed targets
(N+ + 1) / (N+ + 2) for the positive rows and 1 / (N- + 2) for the others (N+ and N-: the weighted class counts),
from libsvm's start (a = 0, b = log((N+ + 1) / (N- + 1))), by the strategy's Newton passes
(``sparkml.gpu.PlattProblems``): the fit of scikit-learn's ``CalibratedClassifierCV(method="sigmoid")`` on those
values. A one-vs-one pair (a, b) is fitted on the rows of its two classes, with a as the positive class (libsvm's).
"""

from __future__ import annotations

import numpy as np

from sparkml.gpu import PlattProblems

MAX_ITER, TOL = 100, 1e-14


def fit_platt(strategy, theta, summary, classes, pairs, *, fit_intercept, last_pass, progress):
    """(k, 2): (a, b) per problem. ``theta`` (k, p): the problems' fitted coefficients; ``classes``: each
    one-vs-rest problem's positive class; ``pairs``: the one-vs-one pairs, or None; ``last_pass``: no later pass
    reads the feature blocks."""
    if pairs is not None:
        classes = [a for a, _ in pairs]
    pos = np.array([summary.class_weights[int(c)] for c in classes])
    if pairs is None:
        neg = summary.weight_sum - pos
    else:
        neg = np.array([summary.class_weights[int(b)] for _, b in pairs])
    targets = np.stack([(pos + 1) / (pos + 2), 1 / (neg + 2)], axis=1)
    theta0 = np.stack([np.zeros(len(classes)), np.log((pos + 1) / (neg + 1))], axis=1)  # the prior, as libsvm

    def problems(idx):
        chosen = None if pairs is None else [pairs[j] for j in idx]
        return PlattProblems(theta[idx], [classes[j] for j in idx], targets[idx], fit_intercept, chosen)

    ab, _ = strategy.newton(
        problems,
        theta0,
        reg=0.0,
        weight_sum=summary.weight_sum,
        fit_intercept=True,
        max_iter=MAX_ITER,
        tol=TOL,
        names=[f"Platt scaling, problem {j}" for j in range(len(classes))],
        last_pass=last_pass,
        progress=progress,
    )
    return ab
