"""What every linear estimator's ``fit`` shares: Param checks, the optimizer loop, progress, summary.

A fit is: convert the data once (``TrainingData``), build the objective in MLlib's parametrization
(``LinearObjective``) over a strategy's distributed sums, run L-BFGS (OWL-QN with an L1 term),
log one line per iteration, map the solution back, release the blocks.
"""
import logging
import time

from sparkml.optim import minimize_lbfgs

logger = logging.getLogger("sparkml")


class TrainingSummary:
    """The optimizer's record of a fit, as MLlib's training summaries expose it."""

    def __init__(self, objective_history, total_iterations, converged=True, message="", seconds=0.0,
                 iteration_seconds=()):
        self.objectiveHistory = list(objective_history)
        # seconds from the optimizer's start to the end of each iteration (objectiveHistory[1:])
        self.iterationSeconds = list(iteration_seconds)
        self.totalIterations = int(total_iterations)
        self.converged = converged
        self.message = message
        self.seconds = seconds

    def __call__(self):
        """pyspark's ``LinearSVCModel.summary`` is a method, the other models' a property: both work."""
        return self

    def __repr__(self):
        return (f"TrainingSummary(totalIterations={self.totalIterations}, "
                f"objective={self.objectiveHistory[-1] if self.objectiveHistory else None})")


def check_common_params(est):
    """Raise ValueError for Param values MLlib would reject, before any data is touched."""
    checks = [("maxIter", lambda v: v >= 0, "must be >= 0"), ("tol", lambda v: v >= 0, "must be >= 0"),
              ("regParam", lambda v: v >= 0, "must be >= 0"),
              ("elasticNetParam", lambda v: 0 <= v <= 1, "must be in [0, 1]"),
              ("aggregationDepth", lambda v: v >= 2, "must be >= 2")]
    for name, ok, why in checks:
        if est.hasParam(name) and not ok(est.getOrDefault(name)):
            raise ValueError(f"{name} {why}; got {est.getOrDefault(name)}")


def run_optimizer(objective, theta0, *, max_iter, tol, name, owlqn=False):
    """Minimize ``objective`` from ``theta0``; one INFO log line per iteration. Returns (x, summary)."""
    start = time.perf_counter()
    last = [start]

    elapsed = []

    def progress(iteration, f, grad_norm, seconds):
        now = time.perf_counter()
        elapsed.append(now - start)
        logger.info("%s iteration %d: objective %.10g, gradient norm %.3e, %.3f s",
                    name, iteration, f, grad_norm, now - last[0])
        last[0] = now

    result = minimize_lbfgs(objective.fun_grad, theta0, max_iter=max_iter, tol=tol, l1=objective.l1_weights(),
                            callback=progress, method="owlqn" if owlqn else "auto")
    seconds = time.perf_counter() - start
    logger.info("%s finished: %d iterations, objective %.10g, %.2f s (%s)",
                name, result.n_iter, result.fun, seconds, result.message)
    summary = TrainingSummary(result.objective_history, result.n_iter, result.converged, result.message, seconds,
                              elapsed)
    return result.x, summary
