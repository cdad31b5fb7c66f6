"""The ``sync`` strategy: broadcast -> mapPartitions -> treeAggregate, one Spark job per evaluation.

Each evaluation broadcasts the coefficients (original feature space, the ``sparkml.gpu`` loss layout);
every partition opens its resident block (``block_store``) and returns the weighted SUMS of its
loss and gradient (or its Hessian block) computed by the ``sparkml.gpu`` loss on the requested device;
``treeAggregate`` adds the parts (in a Spark Connect session: ``transport``). The driver divides by the total
weight and adds regularization (``sparkml.linear.objective``). Lost tasks are recomputed by Spark; the sums do
not depend on which executor or worker computes them.
"""

import numpy as np

from sparkml.optim.newton import newton_warm_started
from sparkml.optim.progress import run_optimizer
from sparkml.strategies.partition_sums import PartitionSums
from sparkml.strategies.transport import Transport


def _partition_sums(rows, dataset_id, loss, coef_bc, device, dtype, kind):
    sums = PartitionSums(rows, dataset_id, loss, device, dtype)
    if sums:
        out = getattr(sums, kind)(np.asarray(coef_bc.value))
        yield out[:2] + (_pack_symmetric(out[2]),) if kind == "loss_gradient_hessian" else out


def _pack_symmetric(h):
    """The upper triangles (..., p (p + 1) / 2) of symmetric (..., p, p) Hessians: half the bytes to
    ship and add (ten one-vs-rest Hessians of 601 features are 29 MB per partition and pass)."""
    rows, cols = np.triu_indices(h.shape[-1])
    return np.ascontiguousarray(h[..., rows, cols])


def _unpack_symmetric(packed, p):
    rows, cols = np.triu_indices(p)
    h = np.empty(packed.shape[:-1] + (p, p))
    h[..., rows, cols] = packed
    h[..., cols, rows] = packed
    return h


class SyncStrategy:
    """Distributed sums of a ``sparkml.gpu`` loss over ``TrainingData``, one Spark job per call."""

    name = "sync"

    def __init__(self, data, loss, options):
        self.data, self.loss, self.device = data, loss, options.device
        self.transport = Transport(data, options.aggregation_depth)
        self.evaluations = 0

    def _run(self, coef, kind, loss=None):
        coef_bc = self.transport.share(np.ascontiguousarray(coef, dtype=np.float64))
        dataset_id, device, dtype = self.data.dataset_id, self.device, self.data.compute_dtype
        loss = loss or self.loss
        try:
            total = self.transport.sum(
                lambda rows: _partition_sums(rows, dataset_id, loss, coef_bc, device, dtype, kind)
            )
        finally:
            coef_bc.unpersist(blocking=False)
        self.evaluations += 1
        if total is None:
            raise RuntimeError("no partition returned a result: the training blocks are missing")
        return total

    def loss_gradient(self, coef):
        """(sum_i w_i l_i, sum_i w_i dl_i/dcoef) at ``coef`` (float64 ndarray in the loss's layout)."""
        return self._run(coef, "loss_gradient")

    def loss_gradient_hessian(self, coef):
        """The sums above plus the Hessian block sum_i w_i h_i x~_i x~_i^T (one pass)."""
        return self._hessian_sums(coef)

    def _hessian_sums(self, coef, loss=None):
        f, g, packed = self._run(coef, "loss_gradient_hessian", loss)
        return f, g, _unpack_symmetric(packed, np.shape(g)[-1])

    def newton(self, make_problems, theta0, *, last_pass=False, progress=None, **options):
        """``optim.newton.newton`` over the problems ``make_problems(idx)`` (a ``sparkml.gpu.problems``
        loss for the problem indices idx), one Spark job per pass; ``warm_start`` as
        ``optim.newton.newton_warm_started``."""

        def evaluate_for(problems):
            def evaluate(theta, idx, kind):
                if kind == "loss_gradient_hessian":
                    return self._hessian_sums(theta, problems(idx))
                return self._run(theta, kind, problems(idx))

            return evaluate

        return newton_warm_started(evaluate_for, make_problems, theta0, progress=progress, **options)

    def minimize(
        self,
        objective,
        theta0,
        *,
        max_iter,
        tol,
        name,
        owlqn=False,
        last_pass=False,
        progress=None,
        bounds=None,
        checkpoint=None,
    ):
        """Driver-side L-BFGS / OWL-QN over ``objective`` (whose data sum is ``self.loss_gradient``), or
        L-BFGS-B over the box ``bounds = (lower, upper)`` (arrays over theta, or None), each iteration
        reported to ``progress``, its state saved to and resumed from ``checkpoint`` (``optim.checkpoint``)
        on the driver. ``last_pass`` (no later pass reads the blocks) matters only to ``allreduce``."""
        return run_optimizer(
            objective,
            theta0,
            max_iter=max_iter,
            tol=tol,
            name=name,
            owlqn=owlqn,
            bounds=bounds,
            progress=progress,
            checkpoint=checkpoint,
        )
