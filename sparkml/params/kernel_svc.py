"""KernelSVC's Params: its own (the kernel, its approximation, the SVM's loss, the classes, the probabilities),
declared once, and the whole list in the order its signature shows them, with its defaults for MLlib's Params
(a kernel machine's: ``tol`` 1e-4, ``regParam`` 1e-4, ``threshold`` 0 on the decision value) and its rules.
"""

from __future__ import annotations

from sparkml.params import converters as c
from sparkml.params import training as t
from sparkml.params.declared import Declared
from sparkml.params.rules import Rule, at_least, choice_of

# the kernels (``sparkml.gpu.kernels`` computes each; a test checks they match) and the choices of the Params
KERNELS = ("linear", "polynomial", "sigmoid", "rbf", "laplacian")
METHODS = ("nystroem", "rff")
LOSSES = ("hinge", "squared_hinge")
MULTI_CLASS_MODES = ("auto", "ovo", "ovr")
LANDMARK_SELECTIONS = ("kmeans", "random")
KERNEL_BLOCK_MODES = ("auto", "stored", "per_pass")
# the strategies whose passes are exact sums (Newton's method): a test checks them against the strategy table
NEWTON_STRATEGIES = ("auto", "sync", "allreduce")


KERNEL = Declared(
    "kernel",
    c.OneOf("kernel", KERNELS),
    "str",
    "Kernel: " + ", ".join(KERNELS) + " (formulas in sparkml.gpu.kernels).",
    default="rbf",
)

GAMMA = Declared(
    "gamma",
    c.to_gamma,
    "str | float",
    "Kernel coefficient of rbf, polynomial, sigmoid and laplacian: 'scale' (1 / (d Var(X)), "
    "scikit-learn's default), 'auto' (1 / d) or a number > 0.",
    default="scale",
)

DEGREE = Declared(
    "degree",
    c.to_int,
    "int",
    "Degree of the polynomial kernel (>= 1).",
    default=3,
    rule=at_least(1),
)

COEF0 = Declared(
    "coef0",
    c.to_float,
    "float",
    "Independent term of the polynomial and sigmoid kernels.",
    default=0.0,
)

METHOD = Declared(
    "method",
    c.OneOf("method", METHODS),
    "str",
    "Kernel approximation: 'nystroem' (landmarks chosen from the data; any kernel) or 'rff' "
    "(random Fourier features; rbf and laplacian only).",
    default="nystroem",
)

NUM_LANDMARKS = Declared(
    "numLandmarks",
    c.to_int,
    "int",
    "Feature count m: Nystroem landmarks, stratified by class (landmarkSelection; all rows when "
    "there are fewer), or random Fourier features. More: closer to the exact "
    "kernel machine, m^2 per active row per Newton round. Unset (the default): every row up to 2000 "
    "rows (the exact kernel machine); beyond, Nystroem grows m from 250 by doubling until doubling it "
    "lowers a stand-in classifier's held-out hinge by at most landmarkGainTol, the landmarks miss at most "
    "landmarkTol of the kernel's trace on held-out sampled rows, or m reaches "
    "1.5 sqrt(n) ln(n) for n rows (at least 2000, at most maxLandmarks; "
    "model.numLandmarksUsed says what it chose); random Fourier features use 1000.",
    rule=at_least(1),
)

MAX_LANDMARKS = Declared(
    "maxLandmarks",
    c.to_int,
    "int",
    "The most landmarks chosen when numLandmarks is unset (>= 1). Memory does not bound them: the kernel "
    "blocks beyond an executor's kernelBlockMemory are computed by every pass.",
    default=4000,
    rule=at_least(1),
)

KERNEL_BLOCKS = Declared(
    "kernelBlocks",
    c.OneOf("kernelBlocks", KERNEL_BLOCK_MODES),
    "str",
    "Nystroem kernel blocks K(X, L) (rows x m x dtype's bytes): 'auto' (on a CPU stored up to each "
    "executor's kernelBlockMemory and computed by every pass beyond it; on a GPU computed by every pass, "
    "which costs less there than moving stored blocks), 'stored' (all stored, whatever the memory) or "
    "'per_pass' (all computed by every pass: memory flat in the rows). The same model either way.",
    default="auto",
)

KERNEL_BLOCK_MEMORY = Declared(
    "kernelBlockMemory",
    c.to_memory_size,
    "str",
    "The memory of stored kernel blocks per executor (kernelBlocks='auto'), shared by its partitions in "
    "proportion to their rows: 'auto' (half of spark.executor.pyspark.memory when set, else of "
    "spark.executor.memory, or of spark.driver.memory under a local master; on a GPU half the device's "
    "memory) or a size as Spark writes one ('512m', '8g').",
    default="auto",
)

LANDMARK_TOL = Declared(
    "landmarkTol",
    c.to_float,
    "float",
    "When numLandmarks is unset: the relative residual trace of the Nystroem approximation, "
    "trace(K - K_nL K_LL^+ K_Ln) / trace(K) on held-out sampled rows, at which m stops growing "
    "(0 < landmarkTol < 1).",
    default=0.05,
    rule=Rule(lambda v: 0 < v < 1, "must be in (0, 1)"),
)

LANDMARK_GAIN_TOL = Declared(
    "landmarkGainTol",
    c.to_float,
    "float",
    "When numLandmarks is unset: m also stops growing when doubling it lowers the held-out mean hinge of a "
    "stand-in classifier by at most this much plus 1.5 standard errors of that fall, and the smaller m is kept "
    "(the stand-in: a squared-hinge SVM on the landmarks' Nystroem features, trained on 4000 sampled rows and "
    "scored on 4000 others, up to 1000 landmarks; the mean hinge bounds the error rate, so 0.002 is about 0.2 "
    "points of accuracy). Easy data "
    "stops early, where the kernel's residual alone would grow m to the target. 0 turns the check off "
    "(0 <= landmarkGainTol < 1).",
    default=0.002,
    rule=Rule(lambda v: 0 <= v < 1, "must be in [0, 1)"),
)

LANDMARK_SELECTION = Declared(
    "landmarkSelection",
    c.OneOf("landmarkSelection", LANDMARK_SELECTIONS),
    "str",
    "Nystroem landmarks: 'kmeans' (per class, the centres of Lloyd's k-means over a "
    "sample of about 10 rows per landmark: a closer kernel approximation for the same m) "
    "or 'random' (the sampled rows themselves).",
    default="kmeans",
)

LOSS = Declared(
    "loss",
    c.OneOf("loss", LOSSES),
    "str",
    "The SVM's loss: 'hinge' (scikit-learn's SVC and MLlib's LinearSVC; smoothed over a band of "
    "half-width 0.1 at the kink so Newton's method applies; tracks SVC's accuracy) or 'squared_hinge' "
    "(fewer Newton rounds; its accuracy can differ from SVC's either way).",
    default="hinge",
)

MULTI_CLASS = Declared(
    "multiClass",
    c.OneOf("multiClass", MULTI_CLASS_MODES),
    "str",
    "Several classes: 'ovo' (one problem per pair of classes over their rows, then a vote, as "
    "scikit-learn's SVC), 'ovr' (one per class against all the rest) or 'auto' (the default: 'ovo' up to "
    "10 classes, 'ovr' beyond, where the K(K-1)/2 pairs would cost (K-1)/2 times as much per pass).",
    default="auto",
)

PROBABILITY = Declared(
    "probability",
    c.to_boolean,
    "bool",
    "Fit Platt scaling (one sigmoid per problem, on the training decision values) and output the "
    "probability column; one-vs-one: the pairs' sigmoids coupled into class probabilities as "
    "scikit-learn's SVC (Wu, Lin and Weng 2004); one-vs-rest: the sigmoids normalized to sum to 1.",
    default=False,
)


KERNEL_SVC = (
    t.FEATURES_COL,
    t.LABEL_COL,
    t.PREDICTION_COL,
    t.RAW_PREDICTION_COL,
    t.PROBABILITY_COL,
    KERNEL,
    GAMMA,
    DEGREE,
    COEF0,
    t.REG_PARAM.with_default(1e-4).with_rule(
        Rule(lambda v: 0 < v < float("inf"), "must be a finite number > 0 for KernelSVC (1 / (n C))")
    ),
    METHOD,
    NUM_LANDMARKS,
    MAX_LANDMARKS,
    KERNEL_BLOCKS,
    KERNEL_BLOCK_MEMORY,
    LANDMARK_TOL,
    LANDMARK_GAIN_TOL,
    LANDMARK_SELECTION,
    LOSS,
    MULTI_CLASS,
    PROBABILITY,
    t.MAX_ITER.with_default(100),
    t.TOL.with_default(1e-4),  # the objective to 1e-4 relative: the accuracy of 1e-6 with about 40% fewer passes
    t.SEED.with_default(0),
    t.FIT_INTERCEPT.with_default(True),
    t.THRESHOLD.with_default(0.0),  # on the decision value
    t.WEIGHT_COL,
    t.AGGREGATION_DEPTH,
    t.STRATEGY.with_rule(
        choice_of(
            NEWTON_STRATEGIES,
            " (KernelSVC solves by Newton's method, whose passes are exact sums: no model averaging, parameter "
            "server or gossip)",
        )
    ),
    *t.TRAINING[1:],
    t.CLASS_WEIGHT,
)
