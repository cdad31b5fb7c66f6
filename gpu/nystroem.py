"""Nystroem feature map: explicit features whose inner products approximate a kernel.

With landmarks L (p rows) and K_LL = K(L, L), the map is

    phi(x) = K(x, L) K_LL^{-1/2}        so that  phi(x) . phi(x') = K(x, L) K_LL^+ K(L, x') ~ K(x, x')

(exact on the span of the landmarks). K_LL^{-1/2} comes from the SVD K_LL = U diag(s) V^T as
(U diag(1 / sqrt(max(s, eps))) V^T)^T, singular values below ``eps`` clipped, exactly as
scikit-learn's ``Nystroem`` (the SVD also keeps the non-PSD sigmoid kernel finite); computed through
the symmetric eigendecomposition, which gives the same matrix.
The projection is computed in float64 on the landmarks' device, from an eigendecomposition in float64 or,
with ``eigh_dtype=torch.float32``, in float32 (half the time; see ``_eigh``); ``transform`` runs the kernel in
tiles (``sparkml.gpu.kernels``) and multiplies each tile by the projection, so only the (n, p) features
are ever held, never a larger kernel matrix.

With ``rcond`` the map is written in K_LL's eigenbasis and truncated to its well-conditioned part:
K_LL = V diag(lambda) V^T, keep the r directions with |lambda| >= rcond max |lambda| and

    phi(x) = K(x, L) V_r diag(|lambda_r|^{-1/2})            (r features, not p)

the same inner products as above up to the dropped directions (a rotation of the same features when
none is dropped). The projection's entries are then bounded by (rcond max |lambda|)^{-1/2}, so
K(x, L) and the projection can be kept apart and multiplied per product in float32
(``sparkml.gpu.factored``) without the catastrophic cancellation that K_LL's near-zero eigenvalues (up to
1e6 in the projection) cause; and the landmarks' own features have the diagonal Gram matrix
diag(|lambda_r|).
"""

from __future__ import annotations

import torch

from .kernels import DEFAULT_BUDGET_BYTES, kernel_diagonal, kernel_matmul, kernel_matrix

__all__ = ["NystroemMap", "jittered_cholesky", "residual_fraction"]

_F64 = torch.float64


def _eigh(a, dtype=None):
    """(lambda ascending, V) of a symmetric matrix, as ``torch.linalg.eigh``, float64, computed in ``dtype``
    (None: a's). On CPU through scipy's LAPACK divide and conquer (``driver="evd"``), which was faster than
    torch's on the AMD CPUs measured (``benchmarks/bench_kernel_torch.py``): the m x m eigendecomposition is a
    large share of a mid-sized KernelSVC fit. In float32 it takes half the time of float64 (4000 x 4000: 2.4 s
    against 5.8 s on 2 cores); its eigenvalues are off by about 2e-7 lambda_max, so the directions kept with
    ``rcond`` = 1e-6 are the same up to a few at the cut, and the Nystroem residual is float64's."""
    work = a if dtype is None else a.to(dtype)
    if work.device.type == "cpu":
        import scipy.linalg

        lam, v = scipy.linalg.eigh(work.numpy(), driver="evd", check_finite=False)
        lam, v = torch.from_numpy(lam), torch.from_numpy(v)
    else:
        lam, v = torch.linalg.eigh(work)
    return lam.to(_F64), v.to(_F64)


class NystroemMap:
    """phi(x) = K(x, L) K_LL^{-1/2} for one kernel and one set of landmarks (tensors or numpy arrays)."""

    _gram_spectrum: tuple[torch.Tensor | None, torch.Tensor] | None  # (V or None, s): ``gram_spectrum``

    def __init__(
        self,
        kind,
        landmarks,
        *,
        gamma=None,
        degree=3,
        coef0=1.0,
        eps=1e-12,
        rcond=None,
        projection=None,
        eigh_dtype=None,
    ):
        self.kind, self.gamma, self.degree, self.coef0 = kind, gamma, degree, coef0
        self.landmarks = torch.as_tensor(landmarks)
        if self.landmarks.dim() != 2 or self.landmarks.shape[0] == 0:
            raise ValueError(
                f"landmarks must be a non-empty 2-D (rows, features) array; got {tuple(self.landmarks.shape)}"
            )
        if projection is None:
            k_ll = kernel_matrix(kind, self.landmarks.to(_F64), gamma=gamma, degree=degree, coef0=coef0)
            lam, v = _eigh(k_ll, eigh_dtype)
            if rcond is not None:
                keep = lam.abs() >= rcond * lam.abs().max()
                v, lam = v[:, keep], lam[keep].abs()
                projection = v / torch.sqrt(lam)
                # Phi_L = V diag(lam) V^T V_r diag(lam_r^-1/2): Phi_L^T Phi_L = diag(lam_r)
                self._gram_spectrum = (None, lam)
            else:
                # K_LL is symmetric: its SVD is U = V sign(lambda), s = |lambda| of its eigendecomposition, so
                # U diag(s^-1/2) V^T = V diag(sign(lambda) |lambda|^-1/2) V^T, 3x cheaper by eigh than by svd
                scale = torch.where(lam < 0, -1.0, 1.0) / torch.sqrt(torch.clamp(lam.abs(), min=eps))
                projection = ((v * scale) @ v.T).T
                # Phi_L = K_LL projection = V diag(lam scale) V^T: Phi_L^T Phi_L = V diag((lam scale)^2) V^T
                self._gram_spectrum = (v, (lam * scale) ** 2)
        else:
            self._gram_spectrum = None
        self.projection = torch.as_tensor(projection, dtype=_F64, device=self.landmarks.device)
        self._cast = {}  # dtype -> (landmarks, projection) in it: transform runs once per row chunk

    def gram_spectrum(self) -> tuple[torch.Tensor | None, torch.Tensor]:
        """(V (r, r), s (r,)), float64: the landmarks' own features' Gram matrix Phi_L^T Phi_L = V diag(s) V^T
        (V None, the identity, for a map built with ``rcond``).

        With landmarks sampled from the rows, sum_i phi(x_i) phi(x_i)^T over n rows is about
        (n / p) Phi_L^T Phi_L: the shape ``sparkml.optim.newton`` preconditions Newton-CG with. Comes
        with the eigendecomposition that made the projection (for a map built from a given
        projection, one more eigendecomposition).
        """
        if self._gram_spectrum is None:
            phi = self.transform(self.landmarks.to(_F64))
            s, v = _eigh(phi.T @ phi)
            self._gram_spectrum = (v, s.clamp(min=0))
        return self._gram_spectrum

    @property
    def n_components(self):
        """r, the number of features: the landmarks' count, or fewer with ``rcond``."""
        return int(self.projection.shape[1])

    def to(self, device):
        return NystroemMap(
            self.kind,
            self.landmarks.to(device),
            gamma=self.gamma,
            degree=self.degree,
            coef0=self.coef0,
            projection=self.projection.to(device),
        )

    def transform(self, x, budget_bytes=DEFAULT_BUDGET_BYTES):
        """phi(X), (n, r), float64 for float64 X else float32, on the map's device."""
        return self._tiles(x, budget_bytes, project=True)

    def kernel_block(self, x, budget_bytes=DEFAULT_BUDGET_BYTES):
        """K(X, L), (n, p), dtype as ``transform``: phi(X) = kernel_block(X) @ projection, the left
        factor of ``sparkml.gpu.factored.FactoredBlock``."""
        return self._tiles(x, budget_bytes, project=False)

    def kernel_product(self, x, c, budget_bytes=DEFAULT_BUDGET_BYTES):
        """K(X, L) @ c, (n, k) for c (p, k), dtype as ``transform``, without holding K(X, L)
        (``kernel_matmul``): scoring, where c = P theta^T folds the projection into the coefficients."""
        x = torch.as_tensor(x).to(self.landmarks.device)
        dtype = _F64 if x.dtype == _F64 else torch.float32
        return kernel_matmul(
            self.kind,
            x.to(dtype),
            self.landmarks,
            c,
            gamma=self.gamma,
            degree=self.degree,
            coef0=self.coef0,
            budget_bytes=budget_bytes,
        )

    def _tiles(self, x, budget_bytes, project):
        x = torch.as_tensor(x).to(self.landmarks.device)
        dtype = _F64 if x.dtype == _F64 else torch.float32
        if dtype not in self._cast:
            self._cast[dtype] = (self.landmarks.to(dtype), self.projection.to(dtype))
        landmarks, projection = self._cast[dtype]
        p = int(self.landmarks.shape[0])
        rows = max(1, budget_bytes // max(1, 8 * 4 * p))  # the kernel tile and its product, with headroom
        out = torch.empty((x.shape[0], self.n_components if project else p), dtype=dtype, device=x.device)
        for i in range(0, x.shape[0], rows):
            k = kernel_matrix(
                self.kind,
                x[i : i + rows].to(dtype),
                landmarks,
                gamma=self.gamma,
                degree=self.degree,
                coef0=self.coef0,
                budget_bytes=budget_bytes,
            )
            out[i : i + rows] = k @ projection if project else k
        return out


def residual_fraction(kind, landmarks, rows, *, gamma=None, degree=3, coef0=1.0):
    """How much of the kernel on ``rows`` the landmarks miss: the Nystroem approximation's relative residual

        sum_i (k(x_i, x_i) - K(x_i, L) K_LL^+ K(L, x_i)) / sum_i k(x_i, x_i)

    the trace of K - K_nL K_LL^+ K_Ln over the trace of K on these rows, in [0, 1] for a positive
    semi-definite kernel (0: exact on them). K_LL^+ through K_LL's Cholesky factor with a jitter of
    1e-10 trace(K_LL) / m (raised a hundredfold until it factors: duplicated landmarks), a sixth of an
    eigendecomposition's cost; a kernel that still does not factor (the sigmoid kernel is not positive
    semi-definite) goes through the eigendecomposition of ``NystroemMap``. float64, on the landmarks' device.
    """
    lm = torch.as_tensor(landmarks).to(_F64)
    x = torch.as_tensor(rows).to(lm.device, _F64)
    args = {"gamma": gamma, "degree": degree, "coef0": coef0}
    diag = kernel_diagonal(kind, x, **args)
    total = float(diag.sum())
    if total <= 0:
        return 0.0
    factor = jittered_cholesky(kernel_matrix(kind, lm, **args))
    if factor is not None:
        captured = torch.linalg.solve_triangular(factor, kernel_matrix(kind, lm, x, **args), upper=False)
    else:
        captured = NystroemMap(kind, lm, rcond=1e-6, **args).transform(x).T
    return float(min(1.0, max(0.0, (total - float((captured**2).sum())) / total)))


def jittered_cholesky(k_ll):
    """The lower Cholesky factor of K_LL plus a jitter of 1e-10 trace(K_LL) / m on its diagonal, the jitter raised
    a hundredfold until it factors (duplicated landmarks), at most four times; None when it still does not (the
    sigmoid kernel is not positive semi-definite)."""
    eye = torch.eye(len(k_ll), dtype=k_ll.dtype, device=k_ll.device)
    jitter = 1e-10 * float(torch.diagonal(k_ll).abs().sum()) / len(k_ll)
    for _ in range(5):
        factor, info = torch.linalg.cholesky_ex(k_ll + jitter * eye)
        if int(info) == 0:
            return factor
        jitter *= 100
    return None
