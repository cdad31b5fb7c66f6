"""``sparkml.gpu.entity_glm``: every entity's penalized GLM solved at once, against closed forms (gaussian) and
scipy's L-BFGS on each entity alone (binomial, poisson). No Spark."""

import numpy as np
import pytest
import torch
from scipy.optimize import minimize
from support.helpers import glm_response

from sparkml.gpu.entity_glm import entity_loss, solve_entities

M, P, LAM = 40, 2, 0.7


def _problem(family, seed=3, p=P):
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 30, M)  # entities with a single row too
    codes = np.repeat(np.arange(M), counts)
    rng.shuffle(codes)
    n = codes.size
    z = rng.normal(size=(n, p))
    truth = rng.normal(scale=0.8, size=(M, 1 + p))
    offset = rng.normal(scale=0.5, size=n)
    eta = offset + truth[codes, 0] + (z * truth[codes, 1:]).sum(axis=1)
    y = glm_response(rng, family, eta, 0.3)
    w = rng.uniform(0.5, 2.0, n)
    return codes, z, y, w, offset


def _solve(family, codes, z, y, w, offset, start=None, **kwargs):
    t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
    return solve_entities(
        family,
        torch.as_tensor(codes),
        t(z) if z is not None else None,
        t(y),
        t(w),
        t(offset),
        LAM,
        M,
        start=None if start is None else t(start),
        **kwargs,
    )


def _one_entity_objective(family, design, y, w, offset):
    def f(theta):
        eta = torch.as_tensor(offset + design @ theta)
        return (
            float((torch.as_tensor(w) * entity_loss(family, torch.as_tensor(y), eta)).sum()) + LAM / 2 * theta @ theta
        )

    return f


def test_gaussian_entities_are_their_ridge_normal_equations():
    codes, z, y, w, offset = _problem("gaussian")
    solution = _solve("gaussian", codes, z, y, w, offset)
    assert solution.converged and solution.iterations <= 3  # a quadratic: one Newton step, then the check
    for e in range(M):
        rows = codes == e
        design = np.column_stack([np.ones(rows.sum()), z[rows]])
        a = design.T @ (w[rows, None] * design) + LAM * np.eye(1 + P)
        expected = np.linalg.solve(a, design.T @ (w[rows] * (y[rows] - offset[rows])))
        np.testing.assert_allclose(solution.theta[e].numpy(), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("family", ["binomial", "poisson"])
def test_each_entity_is_its_own_minimum(family):
    codes, z, y, w, offset = _problem(family)
    solution = _solve(family, codes, z, y, w, offset)
    assert solution.converged
    for e in range(M):
        rows = codes == e
        design = np.column_stack([np.ones(rows.sum()), z[rows]])
        f = _one_entity_objective(family, design, y[rows], w[rows], offset[rows])
        ref = minimize(f, np.zeros(1 + P), method="L-BFGS-B", options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 2000})
        assert float(solution.objective[e]) <= ref.fun + 1e-9 * max(1.0, abs(ref.fun))
        np.testing.assert_allclose(solution.theta[e].numpy(), ref.x, atol=1e-5)
        assert float(solution.objective[e]) == pytest.approx(f(solution.theta[e].numpy()), rel=1e-12)


def test_an_intercept_only_effect_and_a_warm_start():
    codes, _, y, w, offset = _problem("poisson")
    cold = _solve("poisson", codes, None, y, w, offset)
    assert cold.theta.shape == (M, 1) and cold.converged
    warm = _solve("poisson", codes, None, y, w, offset, start=cold.theta.numpy())
    assert warm.iterations == 1  # the start is the optimum: the first step is already below tol
    np.testing.assert_allclose(warm.theta.numpy(), cold.theta.numpy(), rtol=0, atol=0)


def test_a_family_it_does_not_take_and_no_penalty_are_refused():
    codes, z, y, w, offset = _problem("gaussian")
    with pytest.raises(ValueError, match="family 'gamma'"):
        _solve("gamma", codes, z, y, w, offset)
    t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
    with pytest.raises(ValueError, match="reg_param must be > 0"):
        solve_entities("gaussian", torch.as_tensor(codes), t(z), t(y), t(w), t(offset), 0.0, M)
