"""Scoring k linear models at once: one matrix product for all of them, each model's outputs from its slice.

Model selection scores every model of a param grid on the same rows. With model j's coefficients W_j (K_j, d)
and intercepts b_j (K_j,) stacked into W = [W_1; ...; W_k] (sum K_j, d) and b, one product

    M = X W^T + b    (n, sum K_j)

gives every model's margins, M_j the columns of model j, which its own kind (``sparkml.scoring.kinds``) turns
into its outputs, exactly as it scores alone: the rows are read once and the product runs as one large GEMM
instead of k thin ones. (A sum's rounding depends on the order BLAS adds in, which depends on the shapes, so the
margins agree with separate scorings to the last bits, and exactly where the arithmetic is exact.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sparkml.scoring.batch import outputs_of
from sparkml.scoring.spec import ScoringSpec


@dataclass(frozen=True, eq=False)
class ModelStack:
    """k linear models' specs and their coefficients stacked once (module docstring): ``coefficients``
    (sum K_j, d), ``intercepts`` (sum K_j,), ``bounds`` the column range of each model's margins."""

    specs: tuple[ScoringSpec, ...]
    coefficients: np.ndarray = field(init=False, repr=False)
    intercepts: np.ndarray = field(init=False, repr=False)
    bounds: tuple[tuple[int, int], ...] = field(init=False)

    def __post_init__(self):
        specs = tuple(self.specs)
        if not specs:
            raise ValueError("a model stack needs at least one model")
        if any(s.feature_map is not None for s in specs):
            raise ValueError("a model stack holds linear models only (no kernel feature map)")
        sizes = {s.n_features for s in specs}
        if len(sizes) != 1:
            raise ValueError(f"the stacked models take vectors of different sizes: {sorted(sizes)}")
        ends = np.cumsum([len(s.intercepts) for s in specs])
        object.__setattr__(self, "specs", specs)
        object.__setattr__(self, "coefficients", np.concatenate([s.coefficients for s in specs]))
        object.__setattr__(self, "intercepts", np.concatenate([s.intercepts for s in specs]))
        object.__setattr__(self, "bounds", tuple(zip([0, *ends[:-1].tolist()], ends.tolist())))

    def margins(self, x):
        """(n, sum K_j) float64 margins of the (n, d) rows ``x`` (an array or a tensor): one product."""
        import torch

        from sparkml.gpu.prediction import linear_margins

        x = torch.as_tensor(np.ascontiguousarray(x, dtype=np.float64) if isinstance(x, np.ndarray) else x)
        return linear_margins(x, torch.from_numpy(self.coefficients), torch.from_numpy(self.intercepts))

    def score(self, x, keys=None) -> list[dict[str, np.ndarray]]:
        """Each model's {key: array} for the rows ``x`` (the output ``keys``, default each model's all), in the
        order of ``specs``: the margins of all models in one product, then each model's kind on its columns."""
        m = self.margins(x)
        return [
            {k: v.numpy() for k, v in outputs_of(m[:, a:b].contiguous(), spec, keys).items()}
            for spec, (a, b) in zip(self.specs, self.bounds)
        ]


def score_models(x, specs, keys=None) -> list[dict[str, np.ndarray]]:
    """``ModelStack(specs).score(x, keys)``: k linear models' outputs for the rows ``x`` in one product."""
    return ModelStack(tuple(specs)).score(x, keys)
