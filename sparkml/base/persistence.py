"""Save and load models in MLlib's own on-disk layout, so stock pyspark.ml can load them too.

    path/metadata/part-00000   one JSON line: class (the Scala class), uid, paramMap, defaultParamMap,
                               sparkVersion, timestamp, plus "sparkml": this library's class and Params
    path/data/part-*.parquet   one row with the model's numbers, columns exactly as MLlib writes them

Only Params MLlib knows go into paramMap/defaultParamMap (its reader rejects unknown ones); the
Params this library adds (strategy, device, dtype, ...) that are set live under the "sparkml" key, which MLlib ignores.
Estimators are written as pyspark.ml's Python estimators are (``EstimatorWriter``: the metadata
line alone). Everything is JSON and Parquet: no pickle anywhere. Loading checks the files before
building anything (``ModelFiles``); a damaged or foreign directory is a ``ModelFileError`` naming the file.
"""

from __future__ import annotations

import json
import math
import reprlib
import time
from typing import TYPE_CHECKING, cast

from pyspark.ml.util import DefaultParamsReader, MLReader, MLWriter
from pyspark.sql import SparkSession

from sparkml.base.params import TORCH_PARAM_NAMES
from sparkml.catalog import public_class_name
from sparkml.session_kind import is_connect

if TYPE_CHECKING:
    from pyspark.ml.param import Params


def _numbers(values):
    """Floats as MLlib's JSON writes them: non-finite ones as the strings "Infinity", "-Infinity", "NaN"
    (MLlib's own reader cannot read those back; ours can)."""
    return [
        v if math.isfinite(v) else ("NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity"))
        for v in map(float, values)
    ]


def _floats(values):
    return [float(v) for v in values]  # float("Infinity") and float("NaN") parse


def _jsonable(value):
    """A Param value as JSON; Matrix and Vector values in MLlib's own JSON form (its
    ``JsonMatrixConverter`` / ``JsonVectorConverter``), which MLlib's reader decodes."""
    from pyspark.ml.linalg import DenseMatrix, DenseVector, Matrix, SparseVector

    if isinstance(value, Matrix):
        dense = (
            value
            if isinstance(value, DenseMatrix)
            else DenseMatrix(value.numRows, value.numCols, value.toArray().ravel(order="F"))
        )
        return {
            "class": "matrix",
            "type": 1,
            "numRows": dense.numRows,
            "numCols": dense.numCols,
            "values": _numbers(dense.values),
            "isTransposed": bool(dense.isTransposed),
        }
    if isinstance(value, SparseVector):
        return {"type": 0, "size": value.size, "indices": value.indices.tolist(), "values": _numbers(value.values)}
    if isinstance(value, DenseVector):
        return {"type": 1, "values": _numbers(value.values)}
    return value.tolist() if hasattr(value, "tolist") else value


def param_value(value):
    """The inverse of ``_jsonable``: MLlib's JSON of a Matrix or Vector back to the pyspark object."""
    from pyspark.ml.linalg import DenseMatrix, SparseMatrix, Vectors

    if not isinstance(value, dict):
        return value
    if value.get("class") == "matrix":
        if value["type"] == 1:
            return DenseMatrix(value["numRows"], value["numCols"], _floats(value["values"]), value["isTransposed"])
        return SparseMatrix(
            value["numRows"],
            value["numCols"],
            value["colPtrs"],
            value["rowIndices"],
            _floats(value["values"]),
            value["isTransposed"],
        )
    if "type" in value and "values" in value:
        if value["type"] == 1:
            return Vectors.dense(_floats(value["values"]))
        return Vectors.sparse(value["size"], value["indices"], _floats(value["values"]))
    return value


def _param_json(instance, param_map):
    return {p.name: _jsonable(v) for p, v in param_map.items() if p.name not in TORCH_PARAM_NAMES}


class _Writer(MLWriter):
    """Writes ``path/metadata`` (one JSON line) and whatever ``save_data`` adds, in classic and Spark
    Connect sessions alike. Connect has no JVM handle to delete a directory with: on overwrite each
    part is written with mode("overwrite") instead."""

    def __init__(self, instance):
        super().__init__()
        self.instance = instance

    def metadata(self, spark):
        raise NotImplementedError

    def save_data(self, spark, path, mode):
        pass

    def saveImpl(self, path):
        spark = self.sparkSession or SparkSession.active()
        line = json.dumps(self.metadata(spark), separators=(",", ":"))
        mode = "overwrite" if self.shouldOverwrite else "error"  # Spark Connect knows "error", not "errorifexists"
        spark.createDataFrame([(line,)], "value string").coalesce(1).write.mode(mode).text(f"{path}/metadata")
        self.save_data(spark, path, mode)

    def _handleOverwrite(self, path):
        if not is_connect(self.sparkSession or SparkSession.active()):
            super()._handleOverwrite(path)


class MLlibModelWriter(_Writer):
    """Writes ``instance`` as the Scala class ``java_class`` with the data row from ``instance._data_frame``."""

    def __init__(self, instance, java_class):
        super().__init__(instance)
        self.java_class = java_class

    def metadata(self, spark):
        inst = self.instance
        return {
            "class": self.java_class,
            "timestamp": int(round(time.time() * 1000)),
            "sparkVersion": spark.version,
            "uid": inst.uid,
            "paramMap": _param_json(inst, inst._paramMap),
            "defaultParamMap": _param_json(inst, inst._defaultParamMap),
            "sparkml": {
                "class": f"{type(inst).__module__}.{type(inst).__name__}",
                "paramMap": {n: inst.getOrDefault(n) for n in TORCH_PARAM_NAMES if inst.hasParam(n) and inst.isSet(n)},
            },
        }

    def save_data(self, spark, path, mode):
        self.instance._data_frame(spark).repartition(1).write.mode(mode).parquet(f"{path}/data")


class EstimatorWriter(_Writer):
    """Writes an estimator as pyspark.ml's ``DefaultParamsWriter`` does (every Param, ours included,
    and the class by ``class_name``), so pyspark's ``DefaultParamsReader`` loads it back."""

    def __init__(self, instance, class_name):
        super().__init__(instance)
        self.class_name = class_name

    def metadata(self, spark):
        from pyspark.ml.util import DefaultParamsWriter

        params = {p.name: _jsonable(v) for p, v in self.instance._paramMap.items()}
        return json.loads(
            DefaultParamsWriter._get_metadata_to_save(
                self.instance, spark, paramMap=params, extraMetadata={"class": self.class_name}
            )
        )


class ModelFileError(ValueError):
    """A saved model or estimator that cannot be loaded: the message names the file (or directory) and
    what is wrong with it."""


def _first_line(error):
    """One line on why reading failed: for a JVM error (py4j), its root cause's message."""
    java = getattr(error, "java_exception", None)
    if java is not None:
        while java.getCause() is not None:
            java = java.getCause()
        text = java.getMessage() or java.getClass().getName()
    else:
        text = str(error)
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def _shown(uri):
    """A file as Spark lists it, a local one as a plain path (``file:///tmp/m`` -> ``/tmp/m``)."""
    for scheme in ("file://", "file:"):
        if uri.startswith(scheme):
            return uri[len(scheme) :]
    return uri


class ModelFiles:
    """The checks every load makes, before any model or estimator object is built.

    ``path/metadata`` must hold one ``part-*`` file whose first line is a JSON object with ``class``,
    ``uid`` (strings), ``paramMap`` (an object) and ``sparkVersion``, and whose ``class`` (and, when
    present, ``sparkml.class``) is one this loader reads; ``path/data`` one Parquet file of one row with
    the columns and types of the model's ``_data_schema``, non-null, its vectors and matrices of the
    sizes ``_data_shapes`` asks. Files are read through Spark as data (text and Parquet): nothing in
    them is imported, evaluated or unpickled. Hidden files (``.crc``, ``_SUCCESS``) are skipped, as
    Spark skips them; any other file is an error, since Spark would read it as part of the model.
    Every failure is a ``ModelFileError`` naming the file.
    """

    def __init__(self, spark, path):
        self.spark, self.path = spark, path.rstrip("/")

    def only_file(self, folder, accepts, what):
        """The one file in ``path/folder`` (as Spark names it) that ``accepts(name)``."""
        directory = f"{self.path}/{folder}"
        try:
            files = sorted(self.spark.read.text(directory).inputFiles())
        except Exception as e:
            if "PATH_NOT_FOUND" in str(e):
                raise ModelFileError(
                    f"{directory}: no such directory (a saved model holds metadata/ and data/)"
                ) from None
            raise ModelFileError(f"{directory}: cannot list this directory ({_first_line(e)})") from e
        for f in files:
            parent, name = f.rstrip("/").split("/")[-2:]
            if parent != folder or not accepts(name):
                raise ModelFileError(f"{_shown(f)}: unexpected file; {directory} should hold {what} only")
        if len(files) != 1:
            found = f" ({', '.join(_shown(f) for f in files)})" if files else ""
            raise ModelFileError(f"{directory}: expected {what}, found {len(files)}{found}")
        return files[0]

    def metadata(self, classes, sparkml_class=None):
        """(metadata dict, its file) of a model or estimator saved as one of ``classes`` (and, when the
        file names one under ``"sparkml"``, as ``sparkml_class``)."""
        uri = self.only_file("metadata", lambda name: name.startswith("part-"), "one part-* file")
        file = _shown(uri)
        try:
            first = self.spark.read.text(uri).first()
        except Exception as e:
            raise ModelFileError(f"{file}: cannot read this file ({_first_line(e)})") from e
        try:
            metadata = json.loads(first[0] if first is not None else "")
        except ValueError as e:
            raise ModelFileError(
                f"{file}: not model metadata (its first line is not JSON: {e}); "
                "the file is truncated or not a saved model's"
            ) from None
        problem = _metadata_problem(metadata, classes, sparkml_class)
        if problem:
            raise ModelFileError(f"{file}: {problem}")
        return metadata, file

    def data_row(self, cls):
        """The one row of ``path/data``, checked against ``cls._data_schema`` and ``cls._data_shapes``."""
        from pyspark.ml.linalg import Matrix

        file = _shown(self.only_file("data", lambda name: name.endswith(".parquet"), "one Parquet file"))
        expected = cls._data_schema
        try:
            frame = self.spark.read.parquet(file)
            schema = frame.schema
        except Exception as e:
            raise ModelFileError(f"{file}: not a readable Parquet file ({_first_line(e)})") from e
        optional = getattr(cls, "_optional_data_columns", ())  # added after files were written without them
        expected = type(expected)([f for f in expected.fields if f.name in schema.names or f.name not in optional])
        for field in expected.fields:
            if field.name not in schema.names:
                raise ModelFileError(
                    f"{file}: no column {field.name!r} (a {cls.__name__} has {', '.join(expected.names)})"
                )
            found, wanted = schema[field.name].dataType.simpleString(), field.dataType.simpleString()
            if found != wanted:
                raise ModelFileError(f"{file}: column {field.name!r} is {found}, expected {wanted}")
        try:
            rows = frame.select(*expected.names).take(2)
        except AssertionError as e:  # pyspark.ml.linalg's checks, decoding a vector or matrix
            raise ModelFileError(
                f"{file}: a vector or matrix in its row has values that do not fit its size"
                f"{f' ({e})' if str(e) else ''}"
            ) from e
        except Exception as e:
            raise ModelFileError(f"{file}: cannot read its row ({_first_line(e)})") from e
        if len(rows) != 1:
            raise ModelFileError(f"{file}: holds {frame.count()} rows, expected one")
        row = rows[0]
        scalars = {
            f.name: row[f.name] for f in expected.fields if f.dataType.simpleString() not in ("vector", "matrix")
        }
        for name, value in scalars.items():
            if value is None:
                raise ModelFileError(f"{file}: column {name!r} is null")
        context = ", ".join(f"{k}={v}" for k, v in scalars.items())
        try:
            shapes = cls._data_shapes(row)
        except ValueError as e:
            raise ModelFileError(f"{file}: {e}") from None
        sizes: dict[str, tuple[int, str]] = {}  # a named size -> (its value, the column it was read from)
        for column, shape in shapes.items():
            value = row[column]
            if value is None:
                raise ModelFileError(f"{file}: column {column!r} is null")
            found = (value.numRows, value.numCols) if isinstance(value, Matrix) else (value.size,)
            wanted = tuple(
                sizes.setdefault(s, (n, column))[0] if isinstance(s, str) else s for s, n in zip(shape, found)
            )
            if found != wanted:
                names = [f"{s}={sizes[s][0]} as in {sizes[s][1]!r}" for s in shape if isinstance(s, str)]
                raise ModelFileError(
                    f"{file}: column {column!r} is {_dims(found)}, expected {_dims(wanted)} "
                    f"({', '.join(names + ([context] if context else []))})"
                )
        return row


def _dims(shape):
    return " x ".join(map(str, shape))


def _metadata_problem(metadata, classes, sparkml_class):
    """What is wrong with a metadata JSON value for ``ModelFiles.metadata`` (None: nothing)."""
    if not isinstance(metadata, dict):
        return f"not model metadata (a JSON {type(metadata).__name__}, not an object)"
    fields = {"class": str, "uid": str, "sparkVersion": str, "paramMap": dict}
    optional = {"defaultParamMap": dict, "sparkml": dict}
    for key, kind in [*fields.items(), *optional.items()]:
        if key not in metadata and key in optional:
            continue
        if key not in metadata:
            return f"not model metadata (no {key!r} field)"
        if not isinstance(metadata[key], kind):
            return f"{key!r} is {type(metadata[key]).__name__}, expected {'a string' if kind is str else 'an object'}"
    if metadata["class"] not in classes:
        return f"the class is {metadata['class']!r}, expected {' or '.join(map(repr, classes))}"
    ours = metadata.get("sparkml", {})
    if "class" in ours and ours["class"] != sparkml_class:
        return f'the "sparkml" class is {ours["class"]!r}, expected {sparkml_class!r}'
    if not isinstance(ours.get("paramMap", {}), dict):
        return '"sparkml".paramMap is not an object'
    return None


def _set_params(instance, values, setter, file):
    for name, value in values.items():
        try:
            setter(**{name: param_value(value)})
        except Exception as e:
            raise ModelFileError(
                f"{file}: Param {name!r} cannot take the value {reprlib.repr(value)} ({_first_line(e)})"
            ) from e


class EstimatorReader(DefaultParamsReader):
    """pyspark.ml's ``DefaultParamsReader`` with the checks of ``ModelFiles`` on the metadata, decoding
    Matrix and Vector Params (bounds) as MLlib writes them."""

    def load(self, path):
        classes = list(dict.fromkeys([public_class_name(self.cls), f"{self.cls.__module__}.{self.cls.__name__}"]))
        spark = self.sparkSession or SparkSession.active()
        metadata, file = ModelFiles(spark, path).metadata(classes)
        instance = cast("Params", self.cls())  # the estimators of this library are Params
        instance._resetUid(metadata["uid"])
        for key, setter in (("defaultParamMap", instance._setDefault), ("paramMap", instance._set)):
            # Params of this library the class no longer has (KernelSVC was saved with the averaging, parameter
            # server and gossip Params it refused): their values cannot matter, so they are dropped
            values = {
                k: v for k, v in metadata.get(key, {}).items() if instance.hasParam(k) or k not in TORCH_PARAM_NAMES
            }
            unknown = sorted(k for k in values if not instance.hasParam(k))
            if unknown:
                raise ModelFileError(f"{file}: {key} has Params a {self.cls.__name__} lacks: {', '.join(unknown)}")
            _set_params(instance, values, setter, file)
        return instance


class MLlibModelReader(MLReader):
    """Reads a directory written by MLlib or by ``MLlibModelWriter`` into ``cls``, after the checks of
    ``ModelFiles``; a damaged or foreign directory is a ``ModelFileError`` naming the file."""

    def __init__(self, cls, java_class):
        super().__init__()
        self.cls, self.java_class = cls, java_class

    def load(self, path):
        files = ModelFiles(self.sparkSession or SparkSession.active(), path)
        metadata, file = files.metadata([self.java_class], f"{self.cls.__module__}.{self.cls.__name__}")
        instance = self.cls._from_data(files.data_row(self.cls))
        instance._resetUid(metadata["uid"])
        extra = metadata.get("sparkml", {}).get("paramMap", {})
        for source, setter in (
            (metadata.get("defaultParamMap", {}), instance._setDefault),
            ({**metadata["paramMap"], **extra}, instance._set),
        ):
            _set_params(instance, {k: v for k, v in source.items() if instance.hasParam(k)}, setter, file)
        return instance
