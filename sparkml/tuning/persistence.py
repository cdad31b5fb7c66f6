"""Saving and loading ``sparkml.tuning``'s validators as pyspark's own files.

pyspark's Python writer records a validator's class as the instance's module and name, and its reader trusts
the files only when that class starts with ``pyspark.ml.``: it reads the param maps' JSON as its Python writer
wrote it, else as the JVM's writer does, and fails on the other layout (pyspark 3.5 hands such a directory to the
JVM's reader). So the writers here record pyspark's class, ``pyspark.ml.tuning.CrossValidator`` or
``pyspark.ml.tuning.TrainValidationSplit``: a directory one of this library's validators saved is the directory
pyspark's validator saves, and ``pyspark.ml.tuning.CrossValidator.load`` reads it (as pyspark's class;
``DefaultParamsReader.loadParamsInstance`` too). ``sparkml.tuning.CrossValidator.load`` reads the same
directory, or one pyspark saved, back as this library's class. The fitted models are pyspark's
``TrainValidationSplitModel`` and a ``CrossValidatorModel`` subclass, saved by pyspark's writers; the latter's
reader (``CrossValidatorModelReader``) gives each fold its own sub-models, where pyspark's Python reader fills one
list that every fold shares.
"""

from __future__ import annotations

import os
from typing import Any

from pyspark.ml import tuning as stock
from pyspark.ml.util import DefaultParamsReader


class _RecordsStockClass:
    """A validator writer that records pyspark's class (module docstring)."""

    instance: Any
    stock_class: str

    def saveImpl(self, path: str) -> None:
        stock._ValidatorSharedReadWrite.validateParams(self.instance)
        # the SparkContext: pyspark 3.5's metadata writer takes only that, 4.x's either
        stock._ValidatorSharedReadWrite.saveImpl(
            path,
            self.instance,
            self.sc,  # type: ignore[attr-defined]
            extraMetadata={"class": self.stock_class},
        )


class CrossValidatorWriter(_RecordsStockClass, stock.CrossValidatorWriter):
    """pyspark's ``CrossValidatorWriter``, recording pyspark's class."""

    stock_class = "pyspark.ml.tuning.CrossValidator"


class TrainValidationSplitWriter(_RecordsStockClass, stock.TrainValidationSplitWriter):
    """pyspark's ``TrainValidationSplitWriter``, recording pyspark's class."""

    stock_class = "pyspark.ml.tuning.TrainValidationSplit"


def writer(instance, stock_writer):
    """The writer of ``instance``: where pyspark picked its Python writer, the same one recording pyspark's
    class; pyspark's pick otherwise (the JVM's writer for a validator over pyspark.ml stages, Spark Connect's)."""
    if type(stock_writer) is stock.CrossValidatorWriter:
        return CrossValidatorWriter(instance)
    if type(stock_writer) is stock.TrainValidationSplitWriter:
        return TrainValidationSplitWriter(instance)
    return stock_writer


class _LoadsAsOwnClass:
    """A validator reader that loads as pyspark's does, then carries uid and Params over to ``self.cls``."""

    cls: type

    def load(self, path: str):
        loaded = super().load(path)  # type: ignore[misc]
        if isinstance(loaded, self.cls):  # pyspark 3.5 read a JVM-written directory into the class itself
            return loaded
        ours = self.cls()
        ours._resetUid(loaded.uid)
        loaded._copyValues(ours)
        return ours


class CrossValidatorReader(_LoadsAsOwnClass, stock.CrossValidatorReader):
    """pyspark's ``CrossValidatorReader``, returning the class it reads for."""


class TrainValidationSplitReader(_LoadsAsOwnClass, stock.TrainValidationSplitReader):
    """pyspark's ``TrainValidationSplitReader``, returning the class it reads for."""


def reader(cls, stock_reader):
    """The reader of ``cls``: pyspark's Python reader's, returning ``cls``; pyspark's pick otherwise (Spark
    Connect's)."""
    if type(stock_reader) is stock.CrossValidatorReader:
        return CrossValidatorReader(cls)
    if type(stock_reader) is stock.TrainValidationSplitReader:
        return TrainValidationSplitReader(cls)
    return stock_reader


class CrossValidatorModelReader(stock.CrossValidatorModelReader):
    """pyspark's ``CrossValidatorModelReader``, returning ``cls`` with each fold's own sub-models. pyspark's reads
    every fold's models into one shared list, which ends holding the last fold's: that list is kept as the last
    fold's, and the other folds are read again into lists of their own."""

    cls: Any

    def load(self, path: str):
        loaded = super().load(path)
        folds = loaded.subModels
        if folds is not None:
            n_maps = len(loaded.getEstimatorParamMaps())
            folds = [
                [
                    # the SparkContext: pyspark 3.5's reader takes only that, 4.x's either
                    DefaultParamsReader.loadParamsInstance(os.path.join(path, "subModels", f"fold{i}", f"{j}"), self.sc)
                    for j in range(n_maps)
                ]
                for i in range(len(folds) - 1)
            ] + [list(folds[-1])]
            loaded.subModels = folds
        return self.cls.of(loaded)


def model_reader(cls, stock_reader):
    """The reader of ``cls`` (a ``CrossValidatorModel``): pyspark's Python reader's, giving each fold its own
    sub-models; pyspark's pick otherwise (Spark Connect's)."""
    if type(stock_reader) is stock.CrossValidatorModelReader:
        return CrossValidatorModelReader(cls)
    return stock_reader
