"""Random Fourier features (Rahimi & Recht 2007): explicit features whose inner products approximate a
shift-invariant kernel k(x, x') = k(x - x').

By Bochner's theorem k(x - x') = E_w[cos(w . (x - x'))] for w drawn from the kernel's spectral
density, so with D frequencies w_j (the columns of W, (d, D)) and phases b_j ~ U[0, 2 pi)

    z(x) = sqrt(2 / D) cos(x W + b)         and     z(x) . z(x') -> k(x, x')  as D grows.

* rbf, exp(-gamma ||x - x'||^2): w ~ N(0, 2 gamma I) (scikit-learn's ``RBFSampler``);
* laplacian, exp(-gamma ||x - x'||_1): each w_i ~ Cauchy(0, gamma) independently.

No other kernel here is shift-invariant. The frequencies are drawn once, in float64, from a seeded
generator; ``transform`` runs x W in the rows' dtype (float32 or float64) on the map's device.
"""

from __future__ import annotations

import math

import numpy as np
import torch

__all__ = ["RandomFourierMap", "FOURIER_KERNELS"]

FOURIER_KERNELS = ("rbf", "laplacian")


class RandomFourierMap:
    """z(x) = sqrt(2 / D) cos(x W + b); ``frequencies`` W (d, D) and ``offsets`` b (D,) given or drawn."""

    def __init__(self, kind, n_features=None, n_components=None, *, gamma=None, seed=0, frequencies=None, offsets=None):
        if frequencies is None:
            if kind not in FOURIER_KERNELS:
                raise ValueError(
                    f"random Fourier features need a shift-invariant kernel ({', '.join(FOURIER_KERNELS)}); "
                    f"got {kind!r}"
                )
            if not (gamma and gamma > 0) or not n_components or n_components < 1:
                raise ValueError("random Fourier features need gamma > 0 and n_components >= 1")
            rng = np.random.default_rng(seed)
            shape = (int(n_features), int(n_components))
            frequencies = (
                rng.normal(0.0, math.sqrt(2 * gamma), shape) if kind == "rbf" else gamma * rng.standard_cauchy(shape)
            )
            offsets = rng.uniform(0.0, 2 * math.pi, int(n_components))
        self.kind = kind
        self.frequencies = torch.as_tensor(frequencies, dtype=torch.float64)
        self.offsets = torch.as_tensor(offsets, dtype=torch.float64).to(self.frequencies.device)
        self._cast = {}

    @property
    def n_components(self):
        return int(self.frequencies.shape[1])

    def to(self, device):
        return RandomFourierMap(self.kind, frequencies=self.frequencies.to(device), offsets=self.offsets.to(device))

    def transform(self, x, budget_bytes=None):
        """z(X), (n, D), float64 for float64 X else float32, on the map's device."""
        x = torch.as_tensor(x).to(self.frequencies.device)
        dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        if dtype not in self._cast:
            self._cast[dtype] = (self.frequencies.to(dtype), self.offsets.to(dtype))
        w, b = self._cast[dtype]
        return torch.cos(torch.addmm(b, x.to(dtype), w)) * math.sqrt(2.0 / self.n_components)
