"""KernelSVC's Params (pyspark.ml's shared mixins plus the kernel's) and the resolution of gamma."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from pyspark.ml.classification import _ClassifierParams
from pyspark.ml.param import Param, Params, TypeConverters
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

from sparkml.base.params import HasClassWeight, HasTrainingParams, one_of, with_getters
from sparkml.gpu import KERNELS
from sparkml.saved.classes import KERNEL_BLOCK_MODES, LANDMARK_SELECTIONS, MULTI_CLASS
from sparkml.saved.classes import KERNEL_LOSSES as LOSSES
from sparkml.saved.classes import KERNEL_METHODS as METHODS
from sparkml.saved.param_converters import to_gamma as _gamma
from sparkml.saved.param_converters import to_memory_size as _memory_size

# the choices and gamma's converter live with the saved classes' Param rules (``sparkml.saved.classes``), which
# sparkml.serving checks saved models' Params with, without pyspark
RFF_DEFAULT_FEATURES = 1000  # random Fourier features when numLandmarks is unset


@with_getters(
    "kernel",
    "gamma",
    "degree",
    "coef0",
    "method",
    "numLandmarks",
    "maxLandmarks",
    "kernelBlocks",
    "kernelBlockMemory",
    "landmarkTol",
    "landmarkSelection",
    "loss",
    "multiClass",
    "probability",
)
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
    kernel = Param(
        Params._dummy(),
        "kernel",
        "Kernel: " + ", ".join(KERNELS) + " (formulas in sparkml.gpu.kernels).",
        typeConverter=one_of("kernel", KERNELS),
    )
    gamma = Param(
        Params._dummy(),
        "gamma",
        "Kernel coefficient of rbf, polynomial, sigmoid and laplacian: 'scale' (1 / (d Var(X)), "
        "scikit-learn's default), 'auto' (1 / d) or a number > 0.",
        typeConverter=_gamma,
    )
    degree = Param(
        Params._dummy(), "degree", "Degree of the polynomial kernel (>= 1).", typeConverter=TypeConverters.toInt
    )
    coef0 = Param(
        Params._dummy(),
        "coef0",
        "Independent term of the polynomial and sigmoid kernels.",
        typeConverter=TypeConverters.toFloat,
    )
    method = Param(
        Params._dummy(),
        "method",
        "Kernel approximation: 'nystroem' (landmarks chosen from the data; any kernel) or 'rff' "
        "(random Fourier features; rbf and laplacian only).",
        typeConverter=one_of("method", METHODS),
    )
    numLandmarks = Param(
        Params._dummy(),
        "numLandmarks",
        "Feature count m: Nystroem landmarks, stratified by class (landmarkSelection; all rows when "
        "there are fewer), or random Fourier features. More: closer to the exact "
        "kernel machine, m^2 per active row per Newton round. Unset (the default): every row up to 2000 "
        "rows (the exact kernel machine); beyond, Nystroem grows m from 250 by doubling until the "
        "landmarks miss at most landmarkTol of the kernel's trace on held-out sampled rows or m reaches "
        "1.5 sqrt(n) ln(n) for n rows (at least 2000, at most maxLandmarks; "
        "model.numLandmarksUsed says what it chose); random Fourier features use 1000.",
        typeConverter=TypeConverters.toInt,
    )
    maxLandmarks = Param(
        Params._dummy(),
        "maxLandmarks",
        "The most landmarks chosen when numLandmarks is unset (>= 1). Memory does not bound them: the kernel "
        "blocks beyond an executor's kernelBlockMemory are computed by every pass.",
        typeConverter=TypeConverters.toInt,
    )
    kernelBlocks = Param(
        Params._dummy(),
        "kernelBlocks",
        "Nystroem kernel blocks K(X, L) (rows x m x dtype's bytes): 'auto' (on a CPU stored up to each "
        "executor's kernelBlockMemory and computed by every pass beyond it; on a GPU computed by every pass, "
        "which costs less there than moving stored blocks), 'stored' (all stored, whatever the memory) or "
        "'per_pass' (all computed by every pass: memory flat in the rows). The same model either way.",
        typeConverter=one_of("kernelBlocks", KERNEL_BLOCK_MODES),
    )
    kernelBlockMemory = Param(
        Params._dummy(),
        "kernelBlockMemory",
        "The memory of stored kernel blocks per executor (kernelBlocks='auto'), shared by its partitions in "
        "proportion to their rows: 'auto' (half of spark.executor.pyspark.memory when set, else of "
        "spark.executor.memory, or of spark.driver.memory under a local master; on a GPU half the device's "
        "memory) or a size as Spark writes one ('512m', '8g').",
        typeConverter=_memory_size,
    )
    landmarkTol = Param(
        Params._dummy(),
        "landmarkTol",
        "When numLandmarks is unset: the relative residual trace of the Nystroem approximation, "
        "trace(K - K_nL K_LL^+ K_Ln) / trace(K) on held-out sampled rows, at which m stops growing "
        "(0 < landmarkTol < 1).",
        typeConverter=TypeConverters.toFloat,
    )
    landmarkSelection = Param(
        Params._dummy(),
        "landmarkSelection",
        "Nystroem landmarks: 'kmeans' (per class, the centres of Lloyd's k-means over a "
        "sample of about 10 rows per landmark: a closer kernel approximation for the same m) "
        "or 'random' (the sampled rows themselves).",
        typeConverter=one_of("landmarkSelection", LANDMARK_SELECTIONS),
    )
    multiClass = Param(
        Params._dummy(),
        "multiClass",
        "Several classes: 'ovo' (one problem per pair of classes over their rows, then a vote, as "
        "scikit-learn's SVC), 'ovr' (one per class against all the rest) or 'auto' (the default: 'ovo' up to "
        "10 classes, 'ovr' beyond, where the K(K-1)/2 pairs would cost (K-1)/2 times as much per pass).",
        typeConverter=one_of("multiClass", MULTI_CLASS),
    )
    loss = Param(
        Params._dummy(),
        "loss",
        "The SVM's loss: 'hinge' (scikit-learn's SVC and MLlib's LinearSVC; smoothed over a band of "
        "half-width 0.1 at the kink so Newton's method applies; tracks SVC's accuracy) or 'squared_hinge' "
        "(fewer Newton rounds; its accuracy can differ from SVC's either way).",
        typeConverter=one_of("loss", LOSSES),
    )
    probability = Param(
        Params._dummy(),
        "probability",
        "Fit Platt scaling (one sigmoid per problem, on the training decision values) and output the "
        "probability column; one-vs-one: the pairs' sigmoids coupled into class probabilities as "
        "scikit-learn's SVC (Wu, Lin and Weng 2004); one-vs-rest: the sigmoids normalized to sum to 1.",
        typeConverter=TypeConverters.toBoolean,
    )

    if TYPE_CHECKING:  # made by with_getters

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

        def getLandmarkSelection(self) -> str: ...

        def getLoss(self) -> str: ...

        def getMultiClass(self) -> str: ...

        def getProbability(self) -> bool: ...

    def __init__(self, *args):
        super().__init__(*args)
        self._setDefault(
            maxIter=100,
            tol=1e-4,  # the objective to 1e-4 relative: the accuracy of 1e-6 with about 40% fewer passes
            regParam=1e-4,
            fitIntercept=True,
            threshold=0.0,
            kernel="rbf",
            gamma="scale",
            degree=3,
            coef0=0.0,
            method="nystroem",
            maxLandmarks=4000,
            kernelBlocks="auto",
            kernelBlockMemory="auto",
            landmarkTol=0.05,
            landmarkSelection="kmeans",
            loss="hinge",
            multiClass="auto",
            probability=False,
            seed=0,
        )


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
