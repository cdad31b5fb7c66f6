"""The ``gossip`` solver (strategy ``gossip``): decentralized proximal gradient descent with gradient tracking,
in one barrier stage.

No rank holds the model and nothing is reduced over all ranks while it iterates: each rank i keeps its own
iterate x_i and a tracker y_i of the average gradient, and exchanges them with its neighbours on a graph
(``topology``: a ring, or the complete graph) through mixing weights W (Metropolis-Hastings: W_ij =
1 / (1 + max(deg_i, deg_j)) on an edge, W_ii the rest, so W is symmetric and doubly stochastic). With
f_i, R and the step alpha of ``strategies.first_order``, one iteration is

    v_i     = prox_{alpha R}(x_i - alpha y_i)                         (local)
    x_i'    = sum_j W_ij v_j                                          (one exchange with the neighbours)
    y_i'    = sum_j W_ij y_j + grad f_i(x_i') - grad f_i(x_i)         (the same exchange; y_i^0 = grad f_i(x^0))

the adapt-then-combine form of DIGing (Nedic, Olshevsky & Shi, "Achieving geometric convergence for
distributed optimization over time-varying graphs", SIAM J. Optim. 2017) with the proximal step taken
before the combination as in NEXT / SONATA (Di Lorenzo & Scutari 2016; Sun, Scutari & Daneshmand 2022).
W doubly stochastic keeps sum_i y_i = sum_i grad f_i(x_i), so at a fixed point every x_i is the same x and
x = prox_{alpha R}(x - alpha grad f(x)): the optimum of F itself, the one ``sync`` reaches, not a point
near it (which plain decentralized gradient descent, without the tracker, would end at). The step is
alpha = 1 / max_i L_i (``first_order.local_lipschitz``; its maximum over the ranks is the stage's one
all-reduce, before the first iteration).

Stopping without a global reduce: each exchange also floods a small table of every rank's objective
value f_i(x_i) + R(x_i) and relative change ||x_i' - x_i|| / max(||x_i'||, 1) over the last D iterations
(D the graph's diameter), so after exchange k every rank holds the complete row of iteration k - D,
identical on every rank. The objective history records the mean of that row (at consensus, F at the common
iterate), and all ranks stop together at the first iteration whose largest relative change is at most
``tol``, or after ``maxIter`` iterations. Rank 0's iterate is the model.
"""

import time

import numpy as np

from sparkml.optim.iterations import Iteration, Progress, TrainingSummary
from sparkml.strategies.first_order import (
    composite_value,
    local_lipschitz,
    local_objective,
    proximal_operator,
)

TOPOLOGIES = ("ring", "complete")


def neighbours(topology, rank, world):
    """The ranks ``rank`` exchanges with."""
    if topology == "ring":
        return sorted({(rank - 1) % world, (rank + 1) % world} - {rank})
    if topology == "complete":
        return [r for r in range(world) if r != rank]
    raise ValueError(f"topology must be one of {', '.join(TOPOLOGIES)}; got {topology!r}")


def mixing_weights(topology, rank, world):
    """{rank j: W_ij} over ``rank``'s neighbours and itself (Metropolis-Hastings weights)."""
    degree = {r: len(neighbours(topology, r, world)) for r in range(world)}
    weights = {j: 1.0 / (1 + max(degree[rank], degree[j])) for j in neighbours(topology, rank, world)}
    weights[rank] = 1.0 - sum(weights.values())
    return weights


def diameter(topology, world):
    if world == 1:
        return 0
    return world // 2 if topology == "ring" else 1


def gossip_descent(
    local, prox, value, theta0, exchange, weights, *, rank, world, lag, step, max_iter, tol, name, progress=None
):
    """The iterations of the module docstring on this rank; returns (x_i, TrainingSummary).

    ``local(x) -> (f_i, grad f_i)``; ``prox(z, step)``; ``value(f, x)``: F's value from f_i at x;
    ``exchange(vector) -> {neighbour: its vector}``, the same length; ``weights``: ``mixing_weights``;
    ``lag``: the graph's diameter (0 for one rank)."""
    progress = progress or Progress()
    start = time.perf_counter()
    x = np.asarray(theta0, dtype=np.float64).copy()
    n = x.size
    f, g = local(x)
    y = g.copy()
    # table[t % (lag + 1)]: (world, 2) objective and change of every rank at iteration t, NaN where unknown
    table = np.full((lag + 1, world, 2), np.nan)
    table[0, rank] = value(f, x), 0.0
    history, ends, k, converged, tic = [], [], 0, False, time.perf_counter()
    while True:
        complete = table[(k - lag) % (lag + 1)] if k >= lag else None
        if complete is not None:
            history.append(float(np.mean(complete[:, 0])))
            if k - lag >= 1:
                ends.append(time.perf_counter() - start)
                change = float(np.max(complete[:, 1]))
                progress(
                    Iteration(
                        name,
                        "gossip iteration",
                        k - lag,
                        history[-1],
                        x,
                        time.perf_counter() - tic,
                        f"largest relative change {change:.3e}",
                    )
                )
                tic = time.perf_counter()
                if change <= tol:
                    converged = True
                    break
        if k >= max_iter + lag:
            break
        k += 1
        v = prox(x - step * y, step)
        got = exchange(np.concatenate([v, y, table.ravel()]))
        new_x, mixed_y = weights[rank] * v, weights[rank] * y
        for j, message in got.items():
            new_x = new_x + weights[j] * message[:n]
            mixed_y = mixed_y + weights[j] * message[n : 2 * n]
            theirs = message[2 * n :].reshape(table.shape)
            table = np.where(np.isnan(table), theirs, table)
        f, g_new = local(new_x)
        y = mixed_y + g_new - g
        change = np.linalg.norm(new_x - x) / max(np.linalg.norm(new_x), 1.0)
        x, g = new_x, g_new
        table[k % (lag + 1)] = np.nan  # the slot of iteration k - lag - 1, already used
        table[k % (lag + 1), rank] = value(f, x), change
        if not np.isfinite(table[k % (lag + 1), rank, 0]):
            raise FloatingPointError(
                f"{name}: strategy 'gossip' diverged at iteration {k} (objective "
                f"{table[k % (lag + 1), rank, 0]}) with step {step:.3e}"
            )
    message = "largest relative change of the ranks' iterates below tol" if converged else "maxIter iterations reached"
    iterations = max(len(history) - 1, 0)
    return x, TrainingSummary(history, iterations, converged, message, time.perf_counter() - start, ends)


def gossip(task, objective, theta0, *, options, max_iter, tol, name, owlqn, bounds, progress, checkpoint):
    """The solver on one barrier task (``task``: its ``BarrierTask``): the step from the ranks' Lipschitz
    constants (one all-reduce of their maximum), then ``gossip_descent`` over the neighbours' P2P exchange
    on ``options.topology``. ``owlqn`` is moot; ``checkpoint`` is refused by the estimator."""
    rank, world = task.rank, task.world
    task.group.point_to_point()
    local = local_objective(objective, task.sums, world)
    lipschitz = task.group.maximum(local_lipschitz(objective, task.sums, world, task.loss))
    peers = neighbours(options.topology, rank, world)
    return gossip_descent(
        local.fun_grad,
        proximal_operator(objective, bounds),
        lambda f, x: composite_value(objective, f, x),
        theta0,
        lambda vector: task.group.exchange(vector, peers),
        mixing_weights(options.topology, rank, world),
        rank=rank,
        world=world,
        lag=diameter(options.topology, world),
        step=1.0 / max(lipschitz, 1e-300),
        max_iter=max_iter,
        tol=tol,
        name=name,
        progress=progress,
    )
