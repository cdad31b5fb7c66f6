"""The driver's quasi-Newton run of a linear model's objective: L-BFGS, OWL-QN (an L1 term) or L-BFGS-B (a box),
each iteration reported to the fit's ``Progress`` (``optim.iterations``) and its state to the checkpoint."""

import time

from sparkml.optim import minimize_lbfgs
from sparkml.optim.bounded import minimize_bounded, require_smooth
from sparkml.optim.iterations import Iteration, Progress, TrainingSummary


def run_optimizer(
    objective,
    theta0,
    *,
    max_iter,
    tol,
    name,
    owlqn=False,
    bounds=None,
    progress=None,
    checkpoint=None,
    warm_start=False,
):
    """Minimize ``objective`` from ``theta0`` by L-BFGS (OWL-QN when ``owlqn`` or the objective has an
    L1 term), or by L-BFGS-B over the box ``bounds = (lower, upper)`` (``optim.bounded``; a smooth
    objective only), reporting each iteration to ``progress``. ``checkpoint``: an ``optim.checkpoint.Checkpoint``
    that saves the L-BFGS / OWL-QN state every interval, and whose loaded state (``resume``) the run continues
    from. Returns (x, TrainingSummary).

    ``warm_start``: ``theta0`` is the solution of a nearby objective (a regularization path's previous
    map). Breeze's gradient rule ``||g|| <= tol |f|`` may already hold there, and would end the run at
    iteration 0 at a point a fit from the usual start passes and improves on (that fit stops only after
    its last step, whose gradient is usually well under the bound). So a warm start takes at least one
    step (``min_iter=1``) unless its gradient norm is at Breeze's floor 1e-8: its result is then a point
    one quasi-Newton step past a point that already met the fit's own stopping rule."""
    progress = progress or Progress()
    resume = checkpoint.resume if checkpoint is not None else None
    elapsed = list(resume["iteration_seconds"]) if resume is not None else []
    start = time.perf_counter() - (elapsed[-1] if elapsed else 0.0)  # a resumed run's clock goes on
    last = [time.perf_counter()]
    measure = "gradient norm" if bounds is None else "projected gradient norm"
    min_iter = 1 if warm_start else 0

    def on_iteration(iteration, x, f, grad_norm):
        now = time.perf_counter()
        elapsed.append(now - start)
        progress(Iteration(name, "iteration", iteration, f, x, now - last[0], f"{measure} {grad_norm:.3e}"))
        last[0] = now

    require_smooth(name, objective, owlqn, bounds)
    if bounds is not None:
        if checkpoint is not None:
            raise ValueError(f"{name}: bound-constrained fits (L-BFGS-B) write no checkpoints: unset checkpointDir")
        result = minimize_bounded(
            objective.fun_grad, theta0, bounds, max_iter=max_iter, tol=tol, callback=on_iteration, min_iter=min_iter
        )
    else:

        def snapshot(iteration, export):
            checkpoint.snapshot(iteration, lambda: {**export(), "iteration_seconds": list(elapsed)})

        result = minimize_lbfgs(
            objective.fun_grad,
            theta0,
            max_iter=max_iter,
            tol=tol,
            l1=objective.l1_weights(),
            callback=on_iteration,
            method="owlqn" if owlqn else "auto",
            snapshot=snapshot if checkpoint is not None else None,
            resume=resume,
            min_iter=min_iter,
        )
    seconds = time.perf_counter() - start
    message = result.message
    if resume is not None:
        message += f" (resumed from the checkpoint of iteration {resume['iteration']})"
    progress.note(
        f"{name} finished: {result.n_iter} iterations, objective {result.fun:.10g}, {seconds:.2f} s ({message})"
    )
    summary = TrainingSummary(result.objective_history, result.n_iter, result.converged, message, seconds, elapsed)
    return result.x, summary
