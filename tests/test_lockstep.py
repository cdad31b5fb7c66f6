"""``sparkml.optim.lockstep``: optimizer runs side by side, their evaluations batched one pass per round."""

import threading

import numpy as np
import pytest

from sparkml.optim import lockstep, minimize_lbfgs


def _quadratic(scale, center):
    """f(x) = 1/2 sum_j scale_j (x_j - center_j)^2, ill-conditioned to taste: runs of different lengths."""

    def fun_grad(x):
        r = x - center
        return 0.5 * float(np.sum(scale * r * r)), scale * r

    return fun_grad


PROBLEMS = [
    _quadratic(np.array([1.0, 2.0, 3.0]), np.array([1.0, -1.0, 0.5])),
    _quadratic(np.array([1.0, 50.0, 900.0]), np.array([0.3, 0.2, -2.0])),
    _quadratic(np.array([1.0, 1.0, 1.0]), np.array([0.0, 0.0, 4.0])),
]


def test_each_run_is_its_own_run_and_a_round_is_one_batch():
    alone = [minimize_lbfgs(f, np.zeros(3), tol=1e-10, l1=[0.0, 0.01, 0.0]) for f in PROBLEMS]
    rounds = []

    def batch(points):
        rounds.append([p.copy() for p in points])
        return [PROBLEMS[i](p) for i, p in zip(active(len(points)), points)]

    finished = []

    def active(count):  # the runs still going, in order (a run leaves the batch when it returns)
        return [i for i in range(len(PROBLEMS)) if i not in finished][:count]

    def run(i):
        def fn(evaluate):
            result = minimize_lbfgs(evaluate, np.zeros(3), tol=1e-10, l1=[0.0, 0.01, 0.0])
            finished.append(i)
            return result

        return fn

    together = lockstep.run([run(i) for i in range(len(PROBLEMS))], batch)
    for one, other in zip(together, alone):
        np.testing.assert_array_equal(one.x, other.x)
        assert one.objective_history == other.objective_history
        assert one.n_evals == other.n_evals
    counts = [r.n_evals for r in alone]
    assert len(set(counts)) > 1  # runs of different lengths
    assert len(rounds) == max(counts)  # one batch per round, not one per evaluation
    assert [len(r) for r in rounds] == [sum(c > k for c in counts) for k in range(max(counts))]
    assert not [t for t in threading.enumerate() if t.name.startswith("lockstep-")]


def test_a_failing_batch_ends_every_run_and_is_raised():
    calls = []

    def batch(points):
        calls.append(len(points))
        if len(calls) == 3:
            raise RuntimeError("executor lost")
        return [PROBLEMS[0](p) for p in points]

    fns = [lambda evaluate: minimize_lbfgs(evaluate, np.zeros(3), tol=1e-12) for _ in range(2)]
    with pytest.raises(RuntimeError, match="executor lost"):
        lockstep.run(fns, batch)
    assert calls == [2, 2, 2]
    assert not [t for t in threading.enumerate() if t.name.startswith("lockstep-")]


def test_a_failing_run_ends_the_others_and_is_raised():
    def bad(evaluate):
        evaluate(np.zeros(3))
        raise ValueError("objective is not finite")

    aborted = []

    def good(evaluate):
        try:
            return minimize_lbfgs(evaluate, np.zeros(3), tol=1e-12)
        except lockstep.Aborted:
            aborted.append(True)
            raise

    with pytest.raises(ValueError, match="not finite"):
        lockstep.run([good, bad], lambda points: [PROBLEMS[0](p) for p in points])
    assert aborted == [True]
    assert not [t for t in threading.enumerate() if t.name.startswith("lockstep-")]


def test_no_runs_and_runs_that_never_evaluate():
    assert lockstep.run([], lambda points: []) == []
    assert lockstep.run([lambda evaluate: 1, lambda evaluate: 2], lambda points: 1 / 0) == [1, 2]
