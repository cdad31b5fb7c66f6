"""Driver-side quasi-Newton optimisers reproducing Spark MLlib (Breeze ``LBFGS`` / ``OWLQN``).

Each iteration needs the objective value and gradient, computed by one Spark job; everything
else happens here in numpy float64.  The loop mirrors Breeze step for step (same directions,
initial steps, line searches, trial order and stopping rule) so iteration counts and
``objectiveHistory`` match MLlib.

L-BFGS two-loop recursion
    The inverse Hessian is never formed.  From the last ``m`` pairs ``s_k = x_{k+1} - x_k``,
    ``y_k = g_{k+1} - g_k`` the product ``H g`` is obtained in O(m n): a first loop (newest to
    oldest) computes ``a_k = s_k.q / s_k.y_k`` and removes ``a_k y_k`` from ``q = g``; ``q`` is
    scaled by ``s'y / y'y`` of the newest pair (the initial Hessian guess); a second loop
    (oldest to newest) adds back ``(a_k - y_k.q / s_k.y_k) s_k``.  The step is ``-H g``,
    followed by a strong-Wolfe line search (first step ``1/||g||``, then 1).

OWL-QN (L1 term ``sum_i l1_i |x_i|``)
    ``|x|`` has no gradient at 0, so the method uses the *pseudo-gradient*: ``g_i + l1_i
    sign(x_i)`` off zero and, at ``x_i = 0``, the one-sided derivative that descends (``g_i -
    l1_i`` if positive, ``g_i + l1_i`` if negative, else 0, meaning zero is optimal there).
    The two-loop direction is computed from the pseudo-gradient (curvature pairs still use the
    smooth gradient), components that would not descend are zeroed, and each trial point is
    *projected onto the orthant* of the current point (``sign(x_i)``, or ``sign(-pg_i)`` at
    zero): coordinates that would cross zero are set exactly to 0, which is how exact
    sparsity appears.  Steps come from a backtracking line search.

Stopping follows Breeze's ``defaultConvergenceCheck`` (see :mod:`.convergence`).

Bound constraints (a box l <= x <= u) run scipy's L-BFGS-B with Breeze's stopping rules instead
(:mod:`.bounded`, :func:`minimize_bounded`).

Public names: :class:`OptimResult`, :func:`minimize_lbfgs`, :func:`minimize_bounded`, :class:`LineSearchError`.
"""

from .bounded import minimize_bounded
from .lbfgs import minimize_lbfgs
from .line_search import LineSearchError
from .result import OptimResult

__all__ = ["OptimResult", "minimize_lbfgs", "minimize_bounded", "LineSearchError"]
