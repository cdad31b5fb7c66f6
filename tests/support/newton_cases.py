"""Local Newton cases shared by the optimizer tests: a small linear classification problem, and the
``evaluate`` of ``sparkml.optim.newton`` over one local block (what a Spark pass returns)."""

import numpy as np
import torch

from sparkml.gpu import DenseBlock


def linear_problem(seed=0, n=300, d=4, classes=2):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    scores = x @ rng.normal(size=(d, classes)) + 0.5 * rng.normal(size=(n, classes))
    y = (scores[:, 0] > 0).astype(float) if classes == 2 else np.argmax(scores, axis=1).astype(float)
    return x, y


def local_evaluate(make_problems, x, y, w):
    """``evaluate`` for newton() over one local block: what a Spark pass returns."""
    block, yt, wt = DenseBlock(torch.from_numpy(x)), torch.from_numpy(y), torch.from_numpy(w)
    calls = []

    def evaluate(theta, idx, kind):
        calls.append((tuple(idx), kind))
        problems, t = make_problems(idx), torch.from_numpy(theta)
        if kind == "hessp":
            return (problems.hessp(t[0], block, yt, wt, t[1]).numpy(),)
        if kind == "hessian_block":
            return (problems.hessian_block(t, block, yt, wt).numpy(),)
        if kind in ("loss_gradient_diagonal", "loss_gradient_curvature"):
            return tuple(a.numpy() for a in getattr(problems, kind)(t, block, yt, wt))
        f, g = problems.loss_gradient(t, block, yt, wt)
        out = (f.numpy(), g.numpy())
        return out + (problems.hessian_block(t, block, yt, wt).numpy(),) if kind == "loss_gradient_hessian" else out

    return evaluate, calls
