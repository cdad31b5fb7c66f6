"""What an estimator and its models tell a model search: the protocol ``sparkml.tuning`` plans a search from.

pyspark's validators know one thing about an estimator: ``fitMultiple(dataset, paramMaps)``. This library's
validators (``sparkml.tuning.plan``) can do more when the estimator and its models say they allow it:

* ``SearchableEstimator.searchSupport(dataset, paramMaps)`` returns a ``SearchSupport``: whether the grid's
  models can be scored together in one pass over a validation split (each is a linear score of the features),
  and the conversion of ``dataset`` that every map's fit shares, when they all make the same one (the search
  may then convert the dataset once, with each row's fold id, for every split and the refit);
* ``ScoredTogether.scoringSpec()``, on a fitted model: the ``sparkml.scoring.ScoringSpec`` it scores with (its
  coefficients, outputs and feature map), from which the pass scores k models in one product per batch.

An estimator without ``searchSupport`` (pyspark.ml's, a third party's) or one that answers
``scored_together=False`` (``KernelSVC``, whose models are scored one by one) is searched by pyspark's own code.
Every fit still goes through ``fitMultiple``, which shares conversions and solves regularization paths
(``sparkml.base.fit_multiple``) whichever way the search runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class SearchSupport:
    """What an estimator allows a search of ``paramMaps`` on a dataset.

    ``scored_together``: the grid's models are scored in one pass (``ScoredTogether`` with no feature map), so
    the validator fits a split's grid, then scores all of it at once.
    ``conversion``: the arguments of the one conversion every map's fit of the dataset makes, or None where the
    maps convert differently or a fit's conversion depends on its own rows (``classWeight="balanced"`` weighs
    each split by its own label counts): each split's fits then convert their own rows.
    """

    scored_together: bool = False
    conversion: Mapping[str, Any] | None = None


NOT_SUPPORTED = SearchSupport()


@runtime_checkable
class SearchableEstimator(Protocol):
    """An estimator that tells a search what it allows (module docstring)."""

    def searchSupport(self, dataset: DataFrame, paramMaps: Sequence[dict]) -> SearchSupport: ...


@runtime_checkable
class ScoredTogether(Protocol):
    """A fitted model whose scoring a pass can share with other models of its grid (module docstring)."""

    def scoringSpec(self) -> Any:  # a sparkml.scoring.spec.ScoringSpec (a sibling package base does not import)
        ...


def search_support(estimator: Any, dataset: DataFrame, param_maps: Sequence[dict]) -> SearchSupport:
    """``estimator.searchSupport(dataset, param_maps)``, or ``NOT_SUPPORTED`` for an estimator without it."""
    if not isinstance(estimator, SearchableEstimator):
        return NOT_SUPPORTED
    return estimator.searchSupport(dataset, param_maps)
