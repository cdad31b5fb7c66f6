"""The dataset of a search converted once, for every fold and the final refit.

Without this, each fold's training rows are converted into blocks by the fold's ``fitMultiple`` (a pass from the
JVM into Python over (k - 1)/k of the rows, k times) and the refit of the best map converts the whole dataset
again. Here the validator converts the dataset once, storing each row's fold id beside it, exactly as pyspark
assigns it (``fold_ids``): fold i's training set is then a subset of those blocks, copied on the executors that
hold them (``TrainingData.subset``: no row crosses from the JVM again), with the statistics of its own rows, and
the refit trains on the whole conversion. Each fit borrows these blocks (``sparkml.data.lent_conversions``) and
trains on the same rows, in the same order, as on a conversion of its own DataFrame: the same models.

It applies where the estimator says every map's fit makes the same conversion (``SearchSupport.conversion``: the
linear estimators, without ``classWeight="balanced"``, which weighs each fold by its own label counts), and to
folds drawn by ``rand(seed)`` or read from an integer ``foldCol``; otherwise each fold converts its own rows. A
``foldCol`` value outside [0, k) also returns to that path, where pyspark's own error is raised.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql.types import ByteType, IntegerType, LongType, ShortType

from sparkml.data import lent_conversions
from sparkml.data.convert import INVALID_FOLD
from sparkml.data.training_data import TrainingData

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    from pyspark.sql import Column, DataFrame

logger = logging.getLogger("sparkml")
_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)


def draw_column(uid: str) -> str:
    """The name of the column of ``rand(seed)`` draws a validator of ``uid`` adds, as pyspark's validators name it."""
    return uid + "_rand"


def random_fold_ids(dataset: DataFrame, uid: str, seed: int, bounds: Sequence[tuple[float, float]]):
    """(``dataset`` with pyspark's ``rand(seed)`` column, each row's fold id): fold i holds the rows whose draw
    is in ``bounds[i]`` = [lower, upper), the comparisons pyspark's validators filter with; a row in no range is
    -1 (a training row of every fold)."""
    rand_col = draw_column(uid)
    df = dataset.select("*", F.rand(seed).alias(rand_col))
    r = F.col(rand_col)
    fold: Any = F
    for i, (lower, upper) in enumerate(bounds):
        fold = fold.when((r >= lower) & (r < upper), F.lit(i))
    return df, fold.otherwise(F.lit(-1))


def column_fold_ids(dataset: DataFrame, fold_col: str, n_folds: int):
    """(``dataset``, the fold id of ``fold_col``) where that column is of an integer type; ``INVALID_FOLD`` for a
    null or a number outside [0, ``n_folds``). None for another type (a fraction would compare as pyspark's
    filters compare it, not as a fold id)."""
    if not isinstance(dataset.schema[fold_col].dataType, _INTEGRAL):
        return None
    c = F.col(fold_col)
    return dataset, F.when(c.isNotNull() & (c >= 0) & (c < n_folds), c).otherwise(F.lit(INVALID_FOLD))


@dataclasses.dataclass(frozen=True)
class ValidationBlocks:
    """Fold ``fold``'s validation rows (``rows`` of them) in the search's conversion ``data``: the scoring pass
    reads them there (``map``) instead of from the JVM, when they hold what the evaluator reads (``serves``)."""

    data: TrainingData
    fold: int
    rows: int

    def serves(self, features: str, label: str, weight: str | None) -> bool:
        """Whether the stored rows are the evaluator's: the models' ``features`` the conversion's, the
        evaluator's ``label`` the conversion's, its ``weight`` the conversion's or none (each row then weighs 1).
        The features are as stored: rounded to the estimator's ``dtype`` (float32 by default, relative 6e-8)."""
        stored_features, stored_label, stored_weight = self.data.columns
        return (features, label) == (stored_features, stored_label) and weight in (None, stored_weight)

    def map(self, fn) -> list[Any]:
        """``fn(x, y, w)`` of each partition's validation rows, where they are stored (``TrainingData.map_folds``)."""
        return self.data.map_folds(self.fold, fn)


class ConvertedOnce:
    """The search's one conversion (``fold``: each row's fold id); ``training`` lends fold i's subset to the
    fits of that fold's ``train``, ``whole`` the conversion itself to the refit. ``release`` when done."""

    def __init__(self, data: TrainingData, arguments: dict):
        self.data, self.arguments = data, arguments

    @contextlib.contextmanager
    def training(self, fold: int, train: DataFrame) -> Iterator[ValidationBlocks]:
        """Lends fold ``fold``'s training rows to the fits of ``train``; yields the fold's validation rows as
        stored (the others)."""
        subset = self.data.subset(fold)
        subset.source = train
        try:
            with lent_conversions.lend(train, self.arguments, subset):
                yield ValidationBlocks(self.data, fold, self.data.summary.rows - subset.summary.rows)
        finally:
            subset.release()

    @contextlib.contextmanager
    def whole(self, dataset: DataFrame) -> Iterator[None]:
        self.data.source = dataset
        with lent_conversions.lend(dataset, self.arguments, self.data):
            yield

    def release(self) -> None:
        self.data.release()


def convert_once(arguments: Mapping[str, Any] | None, dataset: DataFrame, folds: tuple[DataFrame, Column] | None):
    """The search's ``ConvertedOnce``, or None where it does not apply (module docstring). ``arguments``: the
    conversion every map's fit shares (``SearchSupport.conversion``), or None; ``folds``: the dataset to convert
    and its fold id column (``random_fold_ids``, ``column_fold_ids``)."""
    if arguments is None or folds is None:
        return None
    df, fold = folds
    data = TrainingData.prepare(df, **arguments, fold=fold)
    if data.invalid_folds:
        logger.info("%d rows name no fold: each fold is converted on its own", data.invalid_folds)
        data.release()
        return None
    return ConvertedOnce(data, dict(arguments))


def fold_training(once: ConvertedOnce | None, fold: int, train: DataFrame):
    """The context in which fold ``fold``'s grid fits ``train``: lent its subset when the search converted once.
    It yields the fold's ``ValidationBlocks``, or None when the search did not convert once."""
    return contextlib.nullcontext() if once is None else once.training(fold, train)


def whole_dataset(once: ConvertedOnce | None, dataset: DataFrame):
    """The context in which the best map is refitted on ``dataset``: lent the search's conversion, if any."""
    return contextlib.nullcontext() if once is None else once.whole(dataset)
