"""The ``piag`` solver (strategy ``ssp``): a parameter server with bounded staleness, in one barrier stage.

Rank 0 holds the model (the server, a thread beside its own worker); every rank is a worker that
pulls the model, computes the gradient of its f_i (``strategies.first_order``) there and pushes it,
without waiting for the others (Li et al., "Scaling distributed machine learning with the parameter
server", OSDI 2014). A worker that has pushed c gradients (its clock) may start its next only while
c - min_j c_j <= ``staleness`` (Ho et al., "More effective distributed ML via a stale synchronous
parallel parameter server", NIPS 2013): 0 is bulk synchronous, and a larger bound lets fast workers
run ahead of a slow one.

The server runs the proximal incremental aggregated gradient method (PIAG; Aytekin, Feyzmahdavian &
Johansson, "Analysis and implementation of an asynchronous optimization algorithm for the parameter
server", 2016): it keeps every worker's latest gradient g_j and, on each push, steps

    theta_{k+1} = prox_{gamma_k R}(theta_k - gamma_k (1/m) sum_j g_j)

with the delay-adaptive step of Wu, Magnusson, Feyzmahdavian & Johansson ("Delay-adaptive step-sizes
for asynchronous learning", ICML 2022): with tau_k = k minus the oldest model version in the sum,
gamma_k = max(0, h/L - sum_{t=k-tau_k}^{k-1} gamma_t), so the steps taken within any delay window add up
to at most h/L (h = 0.99, L the mean of the workers' Lipschitz constants, a bound for grad f). As the
aggregate holds a gradient of every f_i, the fixed point is the optimum of F itself; the elastic-net
penalty (and a bound box) is exact through the proximal step. The first round is synchronous (the
aggregate needs every worker's gradient once).

A round is complete when every worker has pushed once more (the slowest worker's clock); ``maxIter``
caps the rounds, and the server stops at the end of a round where a full step h/L on the aggregate would
change the model by at most ``tol`` relative to its norm (the proximal gradient mapping, zero only at the
optimum; the change over a round is no stopping rule, as the steps are 0 while a delay window is spent).
The objective history is, per round, the mean of the workers' latest f_i (each at the model it pulled)
plus R at the server's model. Transport: point-to-point ``torch.distributed`` sends over gloo (rank 0
receives from any worker; its own worker talks to the server through a queue).
"""

import queue
import threading
import time

import numpy as np

from sparkml.optim.iterations import Iteration, Progress, TrainingSummary
from sparkml.strategies.first_order import (
    composite_value,
    local_lipschitz,
    local_objective,
    proximal_operator,
)

H = 0.99  # the steps within a delay window add up to at most H / L


class ParameterServer:
    """The server's state and rule (module docstring): ``push`` takes a worker's gradient and returns the
    replies now due, [(worker, (stop, version, theta))]."""

    def __init__(self, theta0, world, lipschitz, prox, value, *, staleness, max_iter, tol, name, progress=None):
        self.theta = np.asarray(theta0, dtype=np.float64).copy()
        self.world, self.step_cap, self.prox, self.value = world, H / max(lipschitz, 1e-300), prox, value
        self.staleness, self.max_iter, self.tol, self.name = staleness, max_iter, tol, name
        self.progress = progress or Progress()
        self.grads: list[np.ndarray | None] = [None] * world
        self.versions = [0] * world
        self.losses, self.clocks = [0.0] * world, [0] * world
        self.waiting, self.stopped = set(), set()
        self.steps, self.version = [], 0
        self.rounds, self.converged, self.stop = 0, False, False
        self.start = self.tic = time.perf_counter()
        self.history, self.ends = [], []

    def push(self, worker, clock, version, loss, grad):
        self.clocks[worker], self.versions[worker] = clock, version
        self.losses[worker], self.grads[worker] = loss, grad
        self.waiting.add(worker)
        if not self.stop and all(g is not None for g in self.grads):
            if not self.history:  # the first complete aggregate: F at theta0
                self.history.append(self.value(float(np.mean(self.losses)), self.theta))
            self._step()
            self._round()
        replies = []
        for j in sorted(self.waiting):
            if self.stop:
                replies.append((j, (1.0, self.version, self.theta)))
                self.stopped.add(j)
            elif all(g is not None for g in self.grads) and self.clocks[j] - min(self.clocks) <= self.staleness:
                replies.append((j, (0.0, self.version, self.theta)))
        self.waiting.difference_update(j for j, _ in replies)
        return replies

    @property
    def finished(self):
        return len(self.stopped) == self.world

    def _aggregate(self):
        """(1/m) sum_j g_j over every worker's latest gradient (all pushed once: the steps start after)."""
        return np.mean([g for g in self.grads if g is not None], axis=0)

    def _step(self):
        tau = self.version - min(self.versions)
        gamma = max(0.0, self.step_cap - sum(self.steps[len(self.steps) - tau :]))  # tau = 0: an empty window
        if gamma > 0:
            self.theta = self.prox(self.theta - gamma * self._aggregate(), gamma)
        self.steps.append(gamma)
        self.version += 1

    def _round(self):
        """A round ends when the slowest worker's clock moves: record it, and decide whether to stop."""
        if min(self.clocks) <= self.rounds + 1:
            return
        self.rounds += 1
        # the change a full step would make (the steps themselves can be 0 while a delay window is spent)
        full = self.prox(self.theta - self.step_cap * self._aggregate(), self.step_cap)
        change = np.linalg.norm(full - self.theta) / max(np.linalg.norm(self.theta), 1.0)
        self.history.append(self.value(float(np.mean(self.losses)), self.theta))
        self.ends.append(time.perf_counter() - self.start)
        self.progress(
            Iteration(
                self.name,
                "ssp round",
                self.rounds,
                self.history[-1],
                self.theta,
                time.perf_counter() - self.tic,
                f"relative change {change:.3e}",
            )
        )
        self.tic = time.perf_counter()
        self.converged = bool(change <= self.tol)
        self.stop = self.converged or self.rounds >= self.max_iter

    def summary(self):
        message = "relative change of a full proximal step below tol" if self.converged else "maxIter rounds reached"
        return TrainingSummary(
            self.history, self.rounds, self.converged, message, time.perf_counter() - self.start, self.ends
        )


def worker_loop(local, theta0, push_pull):
    """Pull, compute, push until the server says stop: ``push_pull(message) -> reply``, with message
    [clock, version, f_i, grad f_i...] and reply [stop, version, theta...]."""
    theta, version, clock = np.asarray(theta0, dtype=np.float64), 0, 0
    while True:
        f, g = local(theta)
        clock += 1
        reply = push_pull(np.concatenate([[clock, version, f], np.ravel(g)]))
        if reply[0]:
            return
        version, theta = int(reply[1]), reply[2:].reshape(theta.shape)


def serve(server, inbox, send):
    """Rank 0's server loop: ``inbox`` yields (worker, message) (or an exception to raise), ``send(worker,
    reply)`` answers; returns when every worker has been told to stop."""
    while not server.finished:
        worker, message = inbox.get()
        if isinstance(message, BaseException):
            raise message
        for j, (stop, version, theta) in server.push(
            worker, int(message[0]), int(message[1]), float(message[2]), message[3:].copy()
        ):
            send(j, np.concatenate([[stop, version], theta]))


def piag(task, objective, theta0, *, options, max_iter, tol, name, owlqn, bounds, progress, checkpoint):
    """The solver on one barrier task (``task``: its ``BarrierTask``): the Lipschitz constant (one all-reduce),
    then rank 0 serves and every rank works, over point-to-point messages (``_ProcessGroup.send`` / ``recv``).
    Rank 0 returns (theta, TrainingSummary). ``owlqn`` is moot (R takes its proximal step); ``checkpoint`` is
    refused by the estimator (the server's state lives in the tasks)."""
    rank, world, group = task.rank, task.world, task.group
    group.point_to_point()
    local = local_objective(objective, task.sums, world)
    lipschitz = group.add((local_lipschitz(objective, task.sums, world, task.loss),), 1)[0] / world
    size = theta0.size
    if rank != 0:
        reply = np.zeros(size + 2)
        worker_loop(local.fun_grad, theta0, lambda message: group.send_recv(message, 0, reply))
        group.send(np.concatenate([[-1.0], np.zeros(size + 2)]), 0)  # goodbye: rank 0 stops listening
        return theta0, None
    server = ParameterServer(
        theta0,
        world,
        lipschitz,
        proximal_operator(objective, bounds),
        lambda f, x: composite_value(objective, f, x),
        staleness=int(options.staleness),
        max_iter=max_iter,
        tol=tol,
        name=name,
        progress=progress,
    )
    inbox: queue.Queue = queue.Queue()
    mine: queue.Queue = queue.Queue()

    def own(message):  # rank 0's worker pushes to and pulls from its own server
        inbox.put((0, message))
        return mine.get()

    threads = [
        threading.Thread(target=_guarded, args=(inbox, lambda: _listen(inbox, group, world, size + 3)), daemon=True),
        threading.Thread(target=_guarded, args=(inbox, lambda: worker_loop(local.fun_grad, theta0, own)), daemon=True),
    ]
    for t in threads:
        t.start()
    pending = []
    serve(server, inbox, lambda j, reply: mine.put(reply) if j == 0 else pending.append(group.isend(reply, j)))
    for work in pending:
        work.wait()
    for t in threads:
        t.join()
    return server.theta, server.summary()


def _listen(inbox, group, world, size):
    """Rank 0's listener: every worker's pushes into ``inbox`` until each has said goodbye."""
    goodbyes = 0
    while goodbyes < world - 1:
        source, message = group.recv_any(size)
        if message[0] < 0:
            goodbyes += 1
        else:
            inbox.put((source, message))


def _guarded(inbox, fn):
    try:
        fn()
    except BaseException as e:
        inbox.put((None, e))
