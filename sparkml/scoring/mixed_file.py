"""Scoring a saved GeneralizedLinearMixedModelModel without Spark (``sparkml.serving``): pandas rows in, the mean
out, each row's entity looked up in its random effect's table.

The model directory is checked as ``Model.load`` checks it (``sparkml.saved.model_files`` for the metadata and the
data row, ``sparkml.saved.entity_tables`` for each table, read with pyarrow into memory: serving holds every
entity's coefficients, so a table of millions of entities needs that much memory). A row's linear predictor is

    eta = b + x . beta + o + sum_r (a_{r,e} + z_r . g_{r,e})

with the random effect r's term 0 where the row's entity is not in its table (an entity unseen in training, or a
null id): the fixed effect alone, as ``transform``. The prediction is the mean under the family's canonical link.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sparkml.saved.entity_tables import read_local, table_path
from sparkml.scoring.input_rows import feature_rows, offset_values


def mean_of(family: str, eta: np.ndarray) -> np.ndarray:
    """g^-1(eta) of the family's canonical link."""
    if family == "gaussian":
        return eta
    if family == "binomial":
        return 1.0 / (1.0 + np.exp(-eta))
    return np.exp(eta)


@dataclass
class EntityTable:
    """One random effect: its entity column, its features column (None: intercept-only), the row of each entity id
    and the (m, 1 + p) coefficients."""

    entity_col: str
    features_col: str | None
    index: dict
    coefficients: np.ndarray

    def scores(self, ids, z) -> np.ndarray:
        """a_e + z . g_e of each row (0 where the id is not in the table)."""
        rows = np.fromiter((self.index.get(v, -1) for v in ids), dtype=np.int64, count=len(ids))
        known = rows >= 0
        out = np.zeros(len(ids))
        coef = self.coefficients[rows[known]]
        out[known] = coef[:, 0]
        if z is not None:
            out[known] += (z[known] * coef[:, 1:]).sum(1)
        return out


@dataclass
class MixedScorer:
    """A saved mixed model, ready to score pandas rows: ``predict_frame(df)``."""

    model_class: str
    intercept: float
    coefficients: np.ndarray
    family: str
    offset_col: str | None
    features_col: str
    tables: list[EntityTable]

    @property
    def n_features(self) -> int:
        return len(self.coefficients)

    @property
    def outputs(self) -> tuple[str, ...]:
        return ("prediction",)

    @property
    def input_columns(self) -> list[str]:
        """The columns a row needs: the fixed effect's features, each effect's entity and features, the offset."""
        columns = [self.features_col]
        for t in self.tables:
            columns += [t.entity_col] + ([t.features_col] if t.features_col else [])
        return columns + ([self.offset_col] if self.offset_col else [])

    def example(self):
        """One row: zero features, the first entity of each table, zero offset."""
        import pandas as pd

        row: dict[str, list] = {self.features_col: [[0.0] * self.n_features]}
        for t in self.tables:
            row[t.entity_col] = [next(iter(t.index), None)]
            if t.features_col:
                row[t.features_col] = [[0.0] * (t.coefficients.shape[1] - 1)]
        if self.offset_col:
            row[self.offset_col] = [0.0]
        return pd.DataFrame(row)

    def predict_frame(self, frame) -> np.ndarray:
        """The mean of each row of the pandas DataFrame ``frame`` (``input_columns``); ValueError naming a missing
        column or a row of the wrong length."""
        missing = [c for c in self.input_columns if c not in frame.columns]
        if missing:
            raise ValueError(f"the input lacks this model's columns {missing} (it takes {self.input_columns})")
        x = feature_rows(frame[self.features_col], self.n_features, self.features_col)
        eta = self.intercept + x @ self.coefficients
        if self.offset_col:
            eta = eta + offset_values(frame[self.offset_col], len(x), self.offset_col)
        for t in self.tables:
            width = t.coefficients.shape[1] - 1
            z = feature_rows(frame[t.features_col], width, t.features_col) if t.features_col else None
            eta = eta + t.scores(frame[t.entity_col].tolist(), z)
        return mean_of(self.family, eta)


def mixed_scorer(path, saved) -> MixedScorer:
    """The ``MixedScorer`` of the model directory ``path`` whose metadata and data row ``saved`` are checked
    (``sparkml.saved.model_files.SavedModel``); each table read and checked here."""
    from sparkml.params.mllib_structs import vector_array

    params, row = saved.params, saved.row
    entities = params.get("entityCols") or []
    features = params.get("entityFeaturesCols") or [""] * len(entities)
    tables = []
    for r, (entity, z, width) in enumerate(zip(entities, features, row["effectWidths"])):
        ids, coefficients = read_local(table_path(path, r), int(width))
        tables.append(EntityTable(entity, z or None, {v: i for i, v in enumerate(ids)}, coefficients))
    return MixedScorer(
        saved.spec.name,
        float(row["intercept"]),
        vector_array(row["coefficients"]),
        str(params.get("family", "gaussian")).lower(),
        params.get("offsetCol") or None,
        params.get("featuresCol", "features"),
        tables,
    )
