"""Preconditioners of Newton-CG's systems H_j delta_j = -g_j (``optim.newton_state``).

Jacobi: M_j = diag(H_j), the diagonal the round's pass returned.

A better preconditioner when the features' second moment has a known shape (``preconditioner=(V, s)``):
if the rows' average phi_i phi_i^T is about V diag(s) V^T (V orthonormal) over the first q
coordinates, CG is preconditioned there by

    M_j = (lambda + 1e-10) I + c_j V diag(s) V^T,   c_j = (1/W) sum_i w_i l''_ij,

(H_j's data part is (1/W) sum_i w_i l''_ij phi_i phi_i^T: M_j is it with phi_i phi_i^T replaced by
its average) and by the diagonal on the rest (the intercept, whose Hessian entry is c_j). The pass
at an accepted point then returns only those curvature sums ('loss_gradient_curvature'), not the
Hessians' diagonals (one more read of the rows per problem). M_j^-1 r is two q x q products, none
when V is None (a diagonal shape). For Nystroem features the landmarks' own features give the
shape: with the landmarks sampled from the rows, the average phi phi^T is about (1/m) Phi_L^T Phi_L
over the m landmarks, which is FALKON's preconditioner (Rudi, Carratino and Rosasco 2017); on the
active rows of a squared hinge it is an approximation. In K_LL's eigenbasis (``sparkml.gpu.nystroem`` with
``rcond``) Phi_L^T Phi_L = diag(lambda): V is None. (k-means centres as landmarks sit closer together
than rows: KernelSVC then takes diag(s) from the features of a sample of rows.) Against Jacobi it
takes fewer CG iterations per round (measured with ``benchmarks/bench_kernel_svc.py``).
"""

import numpy as np


def check_shape(preconditioner, penalized):
    """The (V or None, s >= 0) of ``preconditioner=(V, s)`` as float64, or None (Jacobi); ValueError
    unless V is (q, q) and s (q,) with q <= ``penalized`` coordinates."""
    if preconditioner is None:
        return None
    v, s = preconditioner
    s = np.asarray(s, dtype=np.float64).reshape(-1)
    v = None if v is None else np.asarray(v, dtype=np.float64)  # None: the identity (diagonal shape)
    if (v is not None and v.shape != (len(s), len(s))) or len(s) > penalized:
        raise ValueError(
            f"preconditioner (V, s) needs V (q, q) and s (q,) with q <= {penalized} "
            f"penalized coordinates; got V {None if v is None else v.shape} and s {s.shape}"
        )
    return v, np.maximum(s, 0.0)


def precondition(r, diagonal, spectrum, curvature, shift):
    """M_j^-1 r_j for the rows r (problems, p): r / ``diagonal`` (Jacobi), and on the first q
    coordinates (shift I + c_j V diag(s) V^T)^-1 r_j when ``spectrum`` = (V, s) is given
    (``curvature``: c_j per problem; ``shift``: lambda plus the ridge)."""
    z = r / diagonal
    if spectrum is not None:
        v, s = spectrum
        q = len(s)
        scale = shift + curvature[:, None] * s
        z[:, :q] = r[:, :q] / scale if v is None else ((r[:, :q] @ v) / scale) @ v.T
    return z
