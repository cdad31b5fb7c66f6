"""The fitted KernelSVC: decision values, Platt probabilities, and its files.

Prediction: rawPrediction [-m, m] for two classes (as LinearSVC; prediction 1 iff m > threshold),
one score per class otherwise (prediction the argmax): each class's decision value (one-vs-rest), or its
votes plus a confidence in (-1/3, 1/3) (one-vs-one, ``sparkml.gpu.prediction.one_vs_one_scores``); with
Platt scaling, P(class k | x) = sigmoid(a_k m_k(x) + b_k), normalized to sum to 1 for several classes
(one-vs-rest), or the pairs' sigmoids coupled (one-vs-one, ``sparkml.gpu.prediction.pairwise_coupling``).
Saved in MLlib's layout (``base.persistence``): one Parquet row with the feature map, the coefficients,
Platt's (a, b) and the one-vs-one pairs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from pyspark.ml.classification import ClassificationModel
from pyspark.ml.linalg import DenseMatrix, DenseVector, MatrixUDT, Vector, VectorUDT
from pyspark.sql.types import DoubleType, IntegerType, StringType, StructField, StructType

from sparkml.base.model import KeepsTrainingSummary, ModelIO
from sparkml.base.summary import jvm_classification_summary
from sparkml.gpu.feature_maps import FourierSpec, NystroemSpec
from sparkml.kernel.params import _KernelSVCParams
from sparkml.scoring.dataframe import ScoresWithSpec
from sparkml.scoring.kinds import KINDS
from sparkml.scoring.spec import ScoringSpec, kernel_spec

if TYPE_CHECKING:
    from pyspark.ml.wrapper import JavaWrapper
    from pyspark.sql import DataFrame
    from typing_extensions import Self


def _dense_matrix(x: np.ndarray) -> DenseMatrix:
    """The 2-D array ``x`` as a row-major DenseMatrix."""
    rows, cols = x.shape
    return DenseMatrix(rows, cols, x.ravel(), True)


class KernelSVCModel(ClassificationModel, _KernelSVCParams, ModelIO, KeepsTrainingSummary, ScoresWithSpec):
    """A fitted KernelSVC: the feature map (``featureMap``: a ``sparkml.gpu.feature_maps`` spec, the
    landmarks and the Nystroem projection, or the random Fourier frequencies and phases) and one
    coefficient row per problem."""

    _java_class = "sparkml.classification.KernelSVCModel"  # no Scala twin: MLlib has no kernel SVM
    _data_schema = StructType(
        [
            StructField("numClasses", IntegerType()),
            StructField("gamma", DoubleType()),
            StructField("degree", IntegerType()),
            StructField("coef0", DoubleType()),
            StructField("kernel", StringType()),
            StructField("method", StringType()),
            StructField("basis", MatrixUDT()),
            StructField("projection", MatrixUDT()),
            StructField("offsets", VectorUDT()),
            StructField("coefficientMatrix", MatrixUDT()),
            StructField("interceptVector", VectorUDT()),
            StructField("platt", MatrixUDT()),
            StructField("pairs", MatrixUDT()),  # one-vs-one: (problems, 2) class pairs; null for one-vs-rest
        ]
    )
    _optional_data_columns = ("pairs",)  # models saved before one-vs-one existed are one-vs-rest

    def __init__(
        self,
        featureMap=None,
        coefficients=None,
        intercepts=None,
        numClasses=2,
        gammaValue=1.0,
        platt=None,
        pairs=None,
    ) -> None:
        super().__init__()
        self._spec = featureMap
        self._coef = (
            None if coefficients is None else np.ascontiguousarray(np.atleast_2d(coefficients), dtype=np.float64)
        )
        self._intercepts = None if intercepts is None else np.atleast_1d(np.asarray(intercepts, dtype=np.float64))
        self._num_classes, self._gamma_value = int(numClasses), float(gammaValue)
        self._platt = None if platt is None else np.asarray(platt, dtype=np.float64).reshape(-1, 2)
        self._pairs = None if pairs is None else [(float(a), float(b)) for a, b in np.asarray(pairs).reshape(-1, 2)]

    def _fitted_coef(self) -> np.ndarray:
        """(problems, numKernelFeatures); AttributeError for a model made without them."""
        if self._coef is None:
            raise AttributeError(f"this {type(self).__name__} has no coefficients")
        return self._coef

    @property
    def numClasses(self) -> int:
        return self._num_classes

    @property
    def numFeatures(self) -> int:
        return self._spec.n_features_in

    @property
    def numLandmarksUsed(self) -> int:
        """Nystroem landmarks chosen, or random Fourier features drawn."""
        x = getattr(self._spec, "landmarks", None)
        return int(self._fitted_coef().shape[1] if x is None else x.shape[0])

    @property
    def numKernelFeatures(self) -> int:
        """The length of each coefficient row: the random Fourier features, or the Nystroem
        directions kept (K_LL's eigen-directions with lambda >= 1e-6 lambda_max; at most
        numLandmarksUsed, fewer when the landmarks' kernel matrix is numerically low-rank)."""
        return int(self._fitted_coef().shape[1])

    @property
    def gammaValue(self) -> float:
        """The kernel's gamma as a number ('scale' and 'auto' resolved on the training data)."""
        return self._gamma_value

    @property
    def landmarks(self) -> DenseMatrix | None:
        """(numLandmarksUsed, numFeatures) landmarks of a Nystroem model: k-means centres, or training rows
        with landmarkSelection='random' (None for method='rff')."""
        x = getattr(self._spec, "landmarks", None)
        return None if x is None else _dense_matrix(x)

    @property
    def coefficientMatrix(self) -> DenseMatrix:
        """(1 or numClasses, numKernelFeatures): the linear model on the kernel features."""
        return _dense_matrix(self._fitted_coef())

    @property
    def interceptVector(self) -> DenseVector:
        if self._intercepts is None:
            raise AttributeError(f"this {type(self).__name__} has no intercepts")
        return DenseVector(self._intercepts)

    @property
    def plattCoefficients(self) -> DenseMatrix | None:
        """(problems, 2): Platt's (a, b) per problem, P = sigmoid(a m + b) (one-vs-one pair (a, b): the
        probability of a given a or b); None without ``probability=True``."""
        return None if self._platt is None else _dense_matrix(self._platt)

    @property
    def summaries(self) -> list[Any]:
        """The Newton record of every problem (one-vs-rest class or one-vs-one pair) (``summary`` is the first's)."""
        return list(self._summaries or [])

    def setThreshold(self, value: float) -> Self:
        return self._set(threshold=value)

    def _margins(self, value):
        import torch

        x = torch.from_numpy(np.asarray(value.toArray(), dtype=np.float64)[None, :])
        phi = self._spec.make().transform(x).numpy()[0]
        return self._coef @ phi + self._intercepts

    def _class_scores(self, m):
        """The multi-class rawPrediction of the problems' margins: themselves (one-vs-rest), or the pairs'
        votes plus confidences (one-vs-one, ``sparkml.gpu.prediction.one_vs_one_scores``)."""
        if self._pairs is None:
            return m
        import torch

        from sparkml.gpu.prediction import one_vs_one_scores

        return one_vs_one_scores(torch.from_numpy(m[None, :]), self._pairs, self._num_classes).numpy()[0]

    def predictRaw(self, value: Vector) -> DenseVector:
        m = self._margins(value)
        return DenseVector([-m[0], m[0]] if len(m) == 1 else self._class_scores(m))

    def predict(self, value: Vector) -> float:
        m = self._margins(value)
        return float(m[0] > self.getThreshold()) if len(m) == 1 else float(np.argmax(self._class_scores(m)))

    def predictProbability(self, value: Vector) -> DenseVector:
        """The probability vector of one feature vector (needs a model fitted with probability=True)."""
        import torch

        from sparkml.gpu.prediction import platt_probability

        if self._platt is None:
            raise RuntimeError("this KernelSVCModel has no Platt scaling: fit it with probability=True")
        margins = torch.from_numpy(self._margins(value)[None, :])
        probability = platt_probability(margins, torch.from_numpy(self._platt), self._pairs, self._num_classes)
        return DenseVector(probability.numpy()[0])

    def evaluate(self, dataset: DataFrame) -> JavaWrapper:
        """pyspark.ml's classification summary of this model on ``dataset`` (``KernelSVCSummary`` or
        ``KernelSVCMulticlassSummary``), computed by MLlib's summary code. Classic sessions."""
        return jvm_classification_summary(self, dataset)

    def _training_summary(self, record, dataset):
        from sparkml.runtime.session_kind import is_connect

        if is_connect(dataset):  # a Connect server summarizes its own models only: the optimizer's record
            return record
        return jvm_classification_summary(self, dataset, record)

    def _build_scoring_spec(self) -> ScoringSpec:
        """The feature map, with a Nystroem projection folded into the coefficients (``kernel_spec``), the
        problems' coefficients and intercepts, the threshold, Platt's pairs and the one-vs-one pairs."""
        return kernel_spec(
            KINDS["svc" if self._pairs is None else "svc_one_vs_one"],
            self._spec,
            self._fitted_coef(),
            self._intercepts,
            raw_threshold=self.getThreshold(),
            platt=self._platt,
            pairs=self._pairs,
            num_classes=self._num_classes,
            device=self.getDevice(),
        )

    def _transform(self, dataset):
        return self._score_in_python(dataset)

    def _data_frame(self, spark):
        def matrix(x):
            return None if x is None else _dense_matrix(np.atleast_2d(x))

        spec = self._spec
        rff = isinstance(spec, FourierSpec)
        row = (
            self._num_classes,
            self._gamma_value,
            self.getDegree(),
            self.getCoef0(),
            spec.kernel,
            spec.method,
            matrix(spec.frequencies.T if rff else spec.landmarks),
            None if rff else matrix(spec.projection),
            DenseVector(spec.offsets) if rff else None,
            self.coefficientMatrix,
            self.interceptVector,
            self.plattCoefficients,
            None if self._pairs is None else matrix(np.asarray(self._pairs, dtype=np.float64)),
        )
        return spark.createDataFrame([row], self._data_schema)

    @classmethod
    def _from_data(cls, row):
        spec: FourierSpec | NystroemSpec
        if row.method == "rff":
            spec = FourierSpec(row.kernel, row.basis.toArray().T, row.offsets.toArray())
        else:
            spec = NystroemSpec(
                row.kernel, row.basis.toArray(), row.projection.toArray(), row.gamma, row.degree, row.coef0
            )
        return cls(
            spec,
            row.coefficientMatrix.toArray(),
            row.interceptVector.toArray(),
            int(row.numClasses),
            float(row.gamma),
            None if row.platt is None else row.platt.toArray(),
            None if row.asDict().get("pairs") is None else row.pairs.toArray(),
        )
