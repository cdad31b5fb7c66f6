"""Scoring a saved model without Spark: pandas rows in, MLlib's output columns out.

A model saved by this library (``model.save(path)``: MLlib's layout, ``metadata/`` JSON and ``data/`` Parquet)
is read here with pyarrow alone into the ``ScoringSpec`` its model scores with (``sparkml.scoring.model_file``),
and scored by the code a Spark task runs (``sparkml.scoring.batch``: numpy and torch on the CPU), so the outputs
are ``transform``'s. This is MLflow's ``python_function`` flavor of the models (``sparkml.mlflow.log_model``):
MLflow loads it through ``_load_pyfunc``, the flavor's loader module, and no model object is pickled. pyspark is
not needed.

``load`` checks the files as ``Model.load`` does (``sparkml.saved.model_files``, the same checks and messages): a
damaged or foreign directory is a ``ModelFileError`` (a ValueError) naming the file and the problem, and
nothing in the files is imported, evaluated or unpickled.

The outputs of each model kind are those of ``sparkml.scoring.kinds`` (``LogisticRegressionModel``:
rawPrediction, probability, prediction; ``LinearSVCModel``: rawPrediction, prediction; ``LinearRegressionModel``
and ``GeneralizedLinearRegressionModel``: prediction; ``KernelSVCModel``: rawPrediction, probability when fitted
with Platt scaling, prediction). A GeneralizedLinearRegressionModel fitted with ``offsetCol`` takes each row's
offset from the input column of that name.

The input rows: an (n, d) array, or a pandas ``features`` column of lists or arrays of d numbers. A row of
another length, a null row or a value that is not a number is a ValueError naming the column and the row; no
rows give empty outputs of the model's columns and types.

A ``GeneralizedLinearMixedModelModel`` is read into a ``MixedScorer`` (``sparkml.scoring.mixed_file``): every
random effect's table in memory, each row's entity looked up in it (an entity the table lacks: the fixed effect
alone); its input rows carry the entity columns and the effects' feature columns beside ``featuresCol``, and its
output is ``prediction``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sparkml.saved.model_files import ModelFileError
from sparkml.scoring.batch import score_rows
from sparkml.scoring.input_rows import FEATURES, feature_rows, offset_values
from sparkml.scoring.kinds import OUTPUTS
from sparkml.scoring.mixed_file import MixedScorer, mixed_scorer
from sparkml.scoring.model_file import read_saved, spec_of
from sparkml.scoring.spec import ScoringSpec


@dataclass
class Scorer:
    """A model's ``ScoringSpec`` (``sparkml.scoring.spec``) and the class it was saved as: ``score`` runs
    ``sparkml.scoring.batch``, what a Spark task runs, on the CPU."""

    model_class: str
    spec: ScoringSpec

    @property
    def n_features(self) -> int:
        return self.spec.n_features

    @property
    def outputs(self) -> tuple[str, ...]:
        """The names of the model's output columns (MLlib's defaults), in column order."""
        return tuple(OUTPUTS[k].column for k in self.spec.outputs)

    def score(self, x, offset=None) -> dict[str, np.ndarray]:
        """{output name: array} for the rows of ``x`` ((n, d), or n rows of d numbers): ``prediction``
        (n,), ``rawPrediction`` and ``probability`` (n, k) where the model has them; n may be 0. ``offset`` (n
        numbers): each row's offset, for a GeneralizedLinearRegressionModel fitted with ``offsetCol`` (required
        there, refused elsewhere)."""
        x = feature_rows(x, self.n_features)
        column = self.spec.offset_col
        if (offset is None) != (column is None):
            raise ValueError(
                f"this model takes the offsets of column {column!r} with its rows"
                if column
                else "this model takes no offsets (it was fitted without offsetCol)"
            )
        if offset is not None:
            offset = offset_values(offset, len(x), column)
        if len(x) == 0:
            return {
                OUTPUTS[k].column: np.zeros((0, self.spec.num_classes or 0) if OUTPUTS[k].vector else 0)
                for k in self.spec.outputs
            }
        return {OUTPUTS[k].column: v for k, v in score_rows(x, self.spec, offset=offset).items()}


def load(path) -> Scorer | MixedScorer:
    """The ``Scorer`` of the model this library (or MLlib: LogisticRegression, LinearSVC, LinearRegression)
    saved at the local ``path``, after the checks ``Model.load`` makes: ``ModelFileError`` (a ValueError)
    naming the file and the problem when the directory is damaged or not such a model. A
    GeneralizedLinearMixedModelModel's is a ``MixedScorer`` (``sparkml.scoring.mixed_file``): its rows carry
    their entities and their features beside ``features``."""
    saved = read_saved(path)
    if saved.spec.name == "GeneralizedLinearMixedModelModel":
        return mixed_scorer(path, saved)
    return Scorer(saved.spec.name, spec_of(saved))


class PandasModel:
    """MLflow's ``python_function`` model: ``predict(df)`` of a pandas DataFrame whose ``features`` column holds
    each row's feature values (a list or array), returning a DataFrame of the model's output columns
    (``prediction``, float64; ``rawPrediction`` and ``probability``, lists, where the model has them), with
    the input's index. No rows: an empty DataFrame of those columns."""

    def __init__(self, scorer: Scorer | MixedScorer):
        self.scorer = scorer

    def example(self):
        """A one-row input: zero features (and a zero offset where the model takes one); a mixed model's row
        names an entity of each of its tables."""
        import pandas as pd

        if isinstance(self.scorer, MixedScorer):
            return self.scorer.example()
        example = pd.DataFrame({FEATURES: [[0.0] * self.scorer.n_features]})
        if self.scorer.spec.offset_col is not None:  # a GeneralizedLinearRegressionModel's offsets: 0 each
            example[self.scorer.spec.offset_col] = 0.0
        return example

    def predict(self, model_input, params=None):
        import pandas as pd

        if isinstance(self.scorer, MixedScorer):
            if not isinstance(model_input, pd.DataFrame):
                raise ValueError(f"the input must be a DataFrame with the columns {self.scorer.input_columns}")
            return pd.DataFrame({"prediction": self.scorer.predict_frame(model_input)}, index=model_input.index)
        if not isinstance(model_input, pd.DataFrame) or FEATURES not in model_input.columns:
            raise ValueError("the input must be a DataFrame with a 'features' column of feature value lists")
        column = self.scorer.spec.offset_col
        if column is not None and column not in model_input.columns:
            raise ValueError(f"the input must have this model's offset column {column!r} beside 'features'")
        offset = None if column is None else model_input[column]
        out = self.scorer.score(feature_rows(model_input[FEATURES], self.scorer.n_features), offset)
        columns = {
            k: pd.Series(list(v) if v.ndim == 2 else v, index=model_input.index, dtype=object if v.ndim == 2 else None)
            for k, v in out.items()
        }
        return pd.DataFrame(columns, index=model_input.index)


def _load_pyfunc(path):
    """MLflow's entry point for the ``python_function`` flavor logged by ``sparkml.mlflow.log_model``: the
    checks of ``load``, then a ``PandasModel``."""
    return PandasModel(load(path))


__all__ = ["MixedScorer", "ModelFileError", "PandasModel", "Scorer", "load"]
