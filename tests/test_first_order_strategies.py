"""``ssp`` (parameter server, bounded staleness) and ``gossip`` (decentralized gradient tracking).

The algorithms, in one process: every rank a thread, the exchanges queues, so rings of 5 and 8
ranks and stragglers can be tried without a cluster, against scipy's optimum. The strategies in the
shared Spark session against ``sync``'s optimum, and the Params they refuse before any job runs, are in
``tests/test_first_order_fits.py``.
"""

import functools
import queue
import threading
import time

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from sparkml.gpu import LogisticLoss, SquaredLoss, make_block
from sparkml.optim.linear_objective import LinearObjective
from sparkml.strategies.first_order import local_lipschitz, power_iteration
from sparkml.strategies.gossip import diameter, gossip_descent, mixing_weights, neighbours
from sparkml.strategies.ssp import ParameterServer, serve, worker_loop


@functools.cache
def _optimum(l1, lam, n, d, seed):
    """``_Problem(world, l1, lam, n, d, seed)``'s optimal objective, whatever ``world``."""
    return _Problem(1, l1=l1, lam=lam, n=n, d=d, seed=seed)._solve()


class _Problem:
    """Logistic regression with an elastic net over rows split among ``world`` ranks (plain numpy)."""

    def __init__(self, world, l1=0.0, lam=0.01, n=600, d=5, seed=1):
        rs = np.random.RandomState(seed)
        x = rs.standard_normal((n, d)) * np.linspace(0.5, 3.0, d)
        self.x = np.hstack([x, np.ones((n, 1))])
        self.y = (self.x @ rs.standard_normal(d + 1) + rs.standard_normal(n) > 0).astype(float)
        self.world, self.lam, self.n, self._seed = world, lam, n, seed
        self.l1 = np.r_[np.full(d, l1), 0.0]
        self.parts = np.array_split(np.arange(n), world)

    def _data(self, idx, theta):
        m = self.x[idx] @ theta
        loss = np.logaddexp(0, m) - self.y[idx] * m
        return loss.sum() / self.n, self.x[idx].T @ (1 / (1 + np.exp(-m)) - self.y[idx]) / self.n

    def _l2(self, theta):
        return 0.5 * self.lam * theta[:-1] @ theta[:-1], self.lam * np.r_[theta[:-1], 0.0]

    def local(self, rank, slow=0.0):
        def f_i(theta):
            time.sleep(slow)
            f, g = self._data(self.parts[rank], theta)
            r, dr = self._l2(theta)
            return self.world * f + r, self.world * g + dr

        return f_i

    def lipschitz(self, rank):
        part = self.x[self.parts[rank]]
        return self.world * 0.25 * np.linalg.eigvalsh(part.T @ part / self.n).max() + self.lam

    def prox(self, z, step):
        return np.sign(z) * np.maximum(np.abs(z) - step * self.l1, 0.0)

    def value(self, f, theta):
        return f + self.l1 @ np.abs(theta)

    def objective(self, theta):
        return self._data(np.arange(self.n), theta)[0] + self._l2(theta)[0] + self.l1 @ np.abs(theta)

    def optimum(self):
        """scipy's L-BFGS without L1; with it, 20000 centralized proximal gradient steps. The rows' split among
        the ranks does not enter it: computed once per problem (``_optimum``)."""
        return _optimum(self.l1[0], self.lam, self.n, self.x.shape[1] - 1, self._seed)

    def _solve(self):
        def fun(theta):
            f, g = self._data(np.arange(self.n), theta)
            r, dr = self._l2(theta)
            return f + r, g + dr

        if not self.l1.any():
            return minimize(
                fun,
                np.zeros(self.x.shape[1]),
                jac=True,
                method="L-BFGS-B",
                options=dict(ftol=1e-15, gtol=1e-12, maxiter=10000),
            ).fun
        step = 1 / (0.25 * np.linalg.eigvalsh(self.x.T @ self.x / self.n).max() + self.lam)
        theta = np.zeros(self.x.shape[1])
        for _ in range(20000):
            theta = self.prox(theta - step * fun(theta)[1], step)
        return self.objective(theta)


def _run_gossip(problem, topology):
    world = problem.world
    pipes = {(i, j): queue.Queue() for i in range(world) for j in range(world)}
    step = 1 / max(problem.lipschitz(i) for i in range(world))
    out = [None] * world

    def rank(i):
        peers = neighbours(topology, i, world)

        def exchange(vector):
            for j in peers:
                pipes[i, j].put(vector.copy())
            return {j: pipes[j, i].get(timeout=60) for j in peers}

        out[i] = gossip_descent(
            problem.local(i),
            problem.prox,
            problem.value,
            np.zeros(problem.x.shape[1]),
            exchange,
            mixing_weights(topology, i, world),
            rank=i,
            world=world,
            lag=diameter(topology, world),
            step=step,
            max_iter=20000,
            tol=1e-12,
            name="test",
        )

    threads = [threading.Thread(target=rank, args=(i,)) for i in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


@pytest.mark.parametrize(
    "world,topology,l1", [(5, "ring", 0.0), (8, "ring", 0.0), (4, "complete", 0.0), (5, "ring", 0.02)]
)
def test_gossip_reaches_the_optimum_on_any_graph(world, topology, l1):
    """Gradient tracking: every rank ends at the optimum itself (scipy's, or the centralized proximal
    gradient's with L1), not near it, and all ranks agree; the ranks stop at the same iteration."""
    problem = _Problem(world, l1=l1)
    out = _run_gossip(problem, topology)
    best = problem.optimum()
    for theta, summary in out:
        assert summary.converged
        assert abs(problem.objective(theta) - best) <= 1e-10 * abs(best)
    assert len({summary.totalIterations for _, summary in out}) == 1
    assert abs(out[0][1].objectiveHistory[-1] - best) <= 1e-10 * abs(best)


def test_mixing_weights_are_doubly_stochastic():
    for topology, world in [("ring", 2), ("ring", 3), ("ring", 7), ("complete", 4)]:
        w = np.array([[mixing_weights(topology, i, world).get(j, 0.0) for j in range(world)] for i in range(world)])
        np.testing.assert_allclose(w, w.T)
        np.testing.assert_allclose(w.sum(axis=1), 1.0)
        assert (w >= 0).all() and diameter(topology, world) == (world // 2 if topology == "ring" else 1)


def _run_ssp(problem, staleness, slow_rank=None):
    world = problem.world
    lipschitz = np.mean([problem.lipschitz(i) for i in range(world)])
    server = ParameterServer(
        np.zeros(problem.x.shape[1]),
        world,
        lipschitz,
        problem.prox,
        problem.value,
        staleness=staleness,
        max_iter=20000,
        tol=1e-12,
        name="test",
    )
    inbox, boxes = queue.Queue(), [queue.Queue() for _ in range(world)]
    clocks = [0] * world

    def worker(i):
        local = problem.local(i, slow=0.003 if i == slow_rank else 0.001)

        def push_pull(message):
            clocks[i] = int(message[0])
            inbox.put((i, message))
            return boxes[i].get(timeout=60)

        worker_loop(local, np.zeros(problem.x.shape[1]), push_pull)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(world)]
    for t in threads:
        t.start()
    serve(server, inbox, lambda j, reply: boxes[j].put(reply))
    for t in threads:
        t.join()
    return server, clocks


@pytest.mark.parametrize("staleness,slow_rank", [(0, None), (3, None), (3, 0)])
def test_ssp_reaches_the_optimum_under_bounded_staleness(staleness, slow_rank):
    """PIAG with delay-adaptive steps: exact under staleness 0 and 3, a slow worker included, and the
    clocks never further apart than the bound allows (a worker waits for the slowest)."""
    problem = _Problem(4, l1=0.01)
    server, clocks = _run_ssp(problem, staleness, slow_rank)
    best = problem.optimum()
    assert server.summary().converged
    assert abs(problem.objective(server.theta) - best) <= 1e-9 * abs(best)
    assert max(clocks) - min(clocks) <= staleness + 1
    if slow_rank is not None:  # the others ran ahead of it while it computed
        assert max(clocks) > clocks[slow_rank]


class _Sums:
    """A rank's ``PartitionSums`` stand-in over numpy rows: the loss sums from the ``sparkml.gpu`` losses."""

    def __init__(self, x, y):
        self.x, self.y = make_block(torch.from_numpy(x)), torch.from_numpy(y)
        self.w = torch.ones(len(y), dtype=torch.float64)

    def __bool__(self):
        return True

    def loss_gradient(self, coef, loss):
        f, g = loss.loss_gradient(torch.from_numpy(coef), self.x, self.y, self.w)
        return float(f), g.numpy()

    def loss_gradient_hessian(self, coef, loss):
        f, g = self.loss_gradient(coef, loss)
        return f, g, loss.hessian_block(torch.from_numpy(coef), self.x, self.y, self.w).numpy()


def _curvature(objective, sums, world):
    """The largest eigenvalue of f_i's Hessian in MLlib's scaled parametrization (squared loss), by central
    differences of the objective's own gradient."""
    local = objective.with_data_sum(
        lambda coef: sums.loss_gradient(coef, SquaredLoss()), weight_sum=objective.weight_sum / world
    )
    hessian = np.stack(
        [(local.fun_grad(e * 1e-3)[1] - local.fun_grad(-e * 1e-3)[1]) / 2e-3 for e in np.eye(objective.size)]
    )
    return np.linalg.eigvalsh((hessian + hessian.T) / 2).max()


@pytest.mark.parametrize("gram", [True, False])
def test_local_lipschitz_bounds_the_curvature_of_f_i(monkeypatch, gram):
    """Without L2 the bound of the squared loss is exact (the Gram matrix, or passes when the coefficients
    exceed the Gram's limit); with it, the data term's and the L2 term's largest eigenvalues are added, an
    upper bound within the L2 strength; the logistic loss's is a quarter of the data term."""
    if not gram:
        monkeypatch.setattr("sparkml.strategies.first_order.GRAM_LIMIT", 0)
    rs = np.random.RandomState(4)
    x = rs.standard_normal((300, 4)) * [0.5, 1.0, 2.0, 4.0] + [1.0, -2.0, 0.0, 3.0]
    y = x @ [1.0, 2.0, -1.0, 0.5] + rs.standard_normal(300)
    sums, world = _Sums(x[:120], y[:120]), 3

    def objective(reg_l2):
        return LinearObjective(
            None,
            n_features=4,
            n_outputs=1,
            fit_intercept=True,
            mean=x.mean(0),
            std=x.std(0),
            weight_sum=300.0,
            reg_l2=reg_l2,
            reg_l1=0.0,
            standardization=False,
            label_scale=float(y.std()),
        )

    exact = _curvature(objective(0.0), sums, world)
    assert abs(local_lipschitz(objective(0.0), sums, world, SquaredLoss()) - exact) <= 1e-7 * exact
    assert abs(local_lipschitz(objective(0.0), sums, world, LogisticLoss()) - exact / 4) <= 1e-7 * exact
    with_l2 = _curvature(objective(0.1), sums, world)
    l2_max = 0.1 / x.std(0).min() ** 2  # standardization off: r_j = 1 / sigma_j^2
    assert with_l2 - 1e-7 <= local_lipschitz(objective(0.1), sums, world, SquaredLoss()) <= with_l2 + l2_max


def test_power_iteration():
    a = np.random.RandomState(2).standard_normal((6, 6))
    a = a @ a.T
    assert abs(power_iteration(lambda v: a @ v, 6) - np.linalg.eigvalsh(a).max()) <= 1e-7 * np.linalg.eigvalsh(a).max()
