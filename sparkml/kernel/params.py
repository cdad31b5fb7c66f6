"""KernelSVC's Params (pyspark.ml's shared mixins plus the kernel's, declared in ``sparkml.params.kernel_svc``)
and the resolution of gamma."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from pyspark.ml.classification import _ClassifierParams
from pyspark.ml.param.shared import (
    HasAggregationDepth,
    HasFitIntercept,
    HasMaxIter,
    HasProbabilityCol,
    HasRegParam,
    HasSeed,
    HasThreshold,
    HasTol,
    HasWeightCol,
)

from sparkml.base.params import HasClassWeight, HasTrainingParams, declares
from sparkml.params.kernel_svc import KERNEL_SVC

RFF_DEFAULT_FEATURES = 1000  # random Fourier features when numLandmarks is unset


@declares(*KERNEL_SVC)
class _KernelSVCParams(
    _ClassifierParams,
    HasMaxIter,
    HasTol,
    HasRegParam,
    HasFitIntercept,
    HasWeightCol,
    HasThreshold,
    HasSeed,
    HasProbabilityCol,
    HasAggregationDepth,
    HasTrainingParams,
    HasClassWeight,
):
    """KernelSVC's and KernelSVCModel's Params: pyspark.ml's shared mixins and KernelSVC's own
    (``sparkml.params.kernel_svc``)."""

    # <param-stubs>
    if TYPE_CHECKING:  # made from the Params' declarations (tools/write_param_stubs.py)

        def getKernel(self) -> str: ...

        def getGamma(self) -> str | float: ...

        def getDegree(self) -> int: ...

        def getCoef0(self) -> float: ...

        def getMethod(self) -> str: ...

        def getNumLandmarks(self) -> int: ...

        def getMaxLandmarks(self) -> int: ...

        def getKernelBlocks(self) -> str: ...

        def getKernelBlockMemory(self) -> str: ...

        def getLandmarkTol(self) -> float: ...

        def getLandmarkGainTol(self) -> float: ...

        def getLandmarkSelection(self) -> str: ...

        def getLoss(self) -> str: ...

        def getMultiClass(self) -> str: ...

        def getProbability(self) -> bool: ...

    # </param-stubs>


def resolve_gamma(gamma, summary):
    """A number: as given, 1 / d ('auto'), or 1 / (d Var(X)) over all entries of X ('scale')."""
    d = summary.n_features
    if gamma == "auto":
        return 1.0 / d
    if gamma != "scale":
        return float(gamma)
    second = float(np.mean(summary.var_population + summary.mean**2))
    var = second - float(np.mean(summary.mean)) ** 2
    return 1.0 / (d * var) if var > 0 else 1.0
