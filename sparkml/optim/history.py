"""Limited-memory inverse-Hessian approximation (L-BFGS two-loop recursion)."""

from __future__ import annotations

import math

import numpy as np


class CurvatureError(Exception):
    """The stored pairs no longer define a positive-definite approximation (Breeze's
    ``NaNHistory``); the optimizer resets the memory."""


class InverseHessian:
    """Holds the last ``m`` pairs ``s_k = x_{k+1} - x_k``, ``y_k = g_{k+1} - g_k``, newest first.

    ``y`` always uses the gradient of the smooth part, also under OWL-QN.
    """

    def __init__(self, m: int):
        if m < 1:
            raise ValueError("m must be >= 1")
        self.m = m
        self._s: list[np.ndarray] = []
        self._y: list[np.ndarray] = []
        self._rho: list[np.float64] = []  # s_i'y_i, computed once per pair
        self._scratch: np.ndarray | None = None  # the two-loop's a * v, reused

    def __len__(self) -> int:
        return len(self._s)

    def reset(self) -> None:
        self._s.clear()
        self._y.clear()
        self._rho.clear()

    def update(self, s: np.ndarray, y: np.ndarray) -> None:
        self._s.insert(0, s)
        self._y.insert(0, y)
        self._rho.insert(0, np.dot(s, y))
        del self._s[self.m :], self._y[self.m :], self._rho[self.m :]

    def pairs(self, size: int):
        """The pairs as two (len, size) arrays, newest first (a checkpoint's ``s`` and ``y``)."""
        if not self._s:
            return np.zeros((0, size)), np.zeros((0, size))
        return np.stack(self._s), np.stack(self._y)

    def restore(self, s: np.ndarray, y: np.ndarray) -> None:
        """Hold the pairs ``pairs`` returned."""
        self._s = [np.array(v, dtype=np.float64) for v in s][: self.m]
        self._y = [np.array(v, dtype=np.float64) for v in y][: self.m]
        self._rho = [np.dot(a, b) for a, b in zip(self._s, self._y)]

    def direction(self, g: np.ndarray) -> np.ndarray:
        """``-H g`` by the two-loop recursion, with ``H_0 = (s'y / y'y) I`` from the newest pair.

        Raises :class:`CurvatureError` exactly where Breeze throws ``NaNHistory``: the newest
        pair has ``s'y < 0`` or NaN, or a two-loop coefficient is NaN.  Anything else is
        computed as Breeze does, so a degenerate memory (e.g. ``s'y == 0`` after a null step)
        can give a non-finite direction; the caller deals with that as Breeze's line search /
        OWL-QN direction correction would.
        """
        n = len(self._s)
        q = np.array(g, dtype=np.float64, copy=True)
        if n == 0:
            return -q
        sy0 = np.float64(self._rho[0])
        if sy0 < 0 or math.isnan(sy0):
            raise CurvatureError(f"non-positive curvature s'y = {sy0:.3g}")
        rho = np.asarray(self._rho, dtype=np.float64)
        alpha = np.empty(n)
        if self._scratch is None or self._scratch.shape != q.shape:
            self._scratch = np.empty_like(q)
        tmp = self._scratch
        # Each a * v lands in one reused buffer: with a million coefficients a fresh temporary per
        # update (allocation and page faults included) cost as much as the arithmetic.
        with np.errstate(all="ignore"):
            diag = sy0 / np.float64(np.dot(self._y[0], self._y[0]))
            for i in range(n):  # newest to oldest
                alpha[i] = np.float64(np.dot(self._s[i], q)) / rho[i]
                if math.isnan(alpha[i]):
                    raise CurvatureError("NaN two-loop coefficient")
                q -= np.multiply(alpha[i], self._y[i], out=tmp)
            q *= diag
            for i in range(n - 1, -1, -1):  # oldest to newest
                beta = np.float64(np.dot(self._y[i], q)) / rho[i]
                q += np.multiply(alpha[i] - beta, self._s[i], out=tmp)
        return np.negative(q, out=q)
