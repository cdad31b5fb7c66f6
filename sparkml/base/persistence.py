"""Save and load models in MLlib's own on-disk layout, so stock pyspark.ml can load them too.

    path/metadata/part-00000   one JSON line: class (the Scala class), uid, paramMap, defaultParamMap,
                               sparkVersion, timestamp, plus "sparkml": this library's class and Params
    path/data/part-*.parquet   one row with the model's numbers, columns exactly as MLlib writes them

Only Params MLlib knows go into paramMap/defaultParamMap (its reader rejects unknown ones); the
Params this library adds (strategy, device, dtype, ...) that are set live under the "sparkml" key, which MLlib ignores.
Estimators are written as pyspark.ml's Python estimators are (``EstimatorWriter``: the metadata
line alone). Everything is JSON and Parquet: no pickle anywhere. Loading checks the files before
building anything, with the checks ``sparkml.serving`` makes too (``sparkml.saved.model_files``, listing and reading
through Spark here: ``ModelFiles``); a damaged or foreign directory is a ``ModelFileError`` naming the file.
"""

from __future__ import annotations

import json
import math
import re
import time
import urllib.parse
from typing import TYPE_CHECKING, cast

from pyspark.ml.util import DefaultParamsReader, MLReader, MLWriter
from pyspark.sql import SparkSession

from sparkml.base.params import TORCH_PARAM_NAMES, own_param_names
from sparkml.catalog import public_class_name
from sparkml.params import converters
from sparkml.runtime.session_kind import is_connect
from sparkml.saved import classes as saved_classes
from sparkml.saved import model_files
from sparkml.saved.model_files import ModelFileError, first_line

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
    ours = own_param_names(instance)
    return {p.name: _jsonable(v) for p, v in param_map.items() if p.name not in ours}


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
                "paramMap": {
                    n: inst.getOrDefault(n) for n in own_param_names(inst) if inst.hasParam(n) and inst.isSet(n)
                },
            },
        }

    def save_data(self, spark, path, mode):
        self.instance._data_frame(spark).repartition(1).write.mode(mode).parquet(f"{path}/data")
        self.instance._save_beside(spark, path, mode)


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


def _shown(uri):
    """A file as Spark lists it (a URI), as a path: a local one plain (``file:///tmp/a%20b`` -> ``/tmp/a b``)."""
    path = urllib.parse.unquote(uri)
    for scheme in ("file://", "file:"):
        if path.startswith(scheme):
            return path[len(scheme) :]
    return path


def _literal(path):
    """``path`` as Spark's readers take it without expanding ``[]{}*?`` as a glob pattern (Hadoop's escape)."""
    return re.sub(r"([\[\]{}*?])", r"\\\1", path)


class ModelFiles(model_files.ModelFiles):
    """``sparkml.saved.model_files``' checks of a model directory (those ``sparkml.serving`` makes too), listing
    and fetching through Spark, so any path Spark reads works (HDFS, S3, ...): a folder is listed as Spark's
    text source lists it (hidden files skipped), and a file's bytes come through the ``binaryFile`` source.
    Spark decodes neither the metadata's JSON nor the Parquet file's schema: ``model_files`` parses both."""

    def __init__(self, spark, path):
        super().__init__(path)
        self.spark = spark

    def _list(self, directory):
        try:
            return self.spark.read.text(_literal(directory)).inputFiles()
        except Exception as e:
            if "PATH_NOT_FOUND" in str(e):
                raise ModelFileError(
                    f"{directory}: no such directory (a saved model holds metadata/ and data/)"
                ) from None
            raise ModelFileError(f"{directory}: cannot list this directory ({first_line(e)})") from e

    def _show(self, file):
        return _shown(file)

    def _read(self, file):
        row = self.spark.read.format("binaryFile").load(_literal(urllib.parse.unquote(file))).select("content").first()
        return b"" if row is None or row[0] is None else bytes(row[0])


def param_rules(instance):
    """{Param name: its type converter} of ``instance``, pyspark's ``TypeConverters`` as
    ``sparkml.params.converters`` mirrors them without pyspark."""
    from pyspark.ml.param import TypeConverters

    mirrored = {
        TypeConverters.toInt: converters.to_int,
        TypeConverters.toFloat: converters.to_float,
        TypeConverters.toBoolean: converters.to_boolean,
        TypeConverters.toString: converters.to_string,
        TypeConverters.toListFloat: converters.to_list_float,
        TypeConverters.toVector: converters.to_vector,
        TypeConverters.toMatrix: converters.to_matrix,
    }
    return {p.name: mirrored.get(p.typeConverter, p.typeConverter) for p in instance.params}


def saved_class_of(cls):
    """What ``cls`` saves: this library's classes' ``sparkml.saved.classes`` entry; for another class (a new
    estimator's model, before it has one there) the same, read from its ``_data_schema``, ``_data_shapes``
    and Params."""
    saved = saved_classes.SAVED.get(cls._java_class)
    if saved is not None:
        return saved
    schema = cls._data_schema
    return saved_classes.SavedClass(
        cls.__name__,
        cls._java_class,
        f"{cls.__module__}.{cls.__name__}",
        tuple((f.name, f.dataType.simpleString()) for f in schema.fields),
        lambda row: cls._data_shapes(spark_row(row, schema)),
        param_rules(cls()),
        optional=tuple(getattr(cls, "_optional_data_columns", ())),
    )


def spark_row(row, schema):
    """A checked data row (``model_files``: MLlib's structs as dicts) as the pyspark Row Spark would read, its
    vectors and matrices pyspark.ml.linalg objects; ``schema``: its (name, type) columns, or a StructType."""
    from pyspark.ml.linalg import DenseMatrix, DenseVector, SparseMatrix, SparseVector
    from pyspark.sql import Row

    def value(kind, v):
        if v is None or kind not in ("vector", "matrix"):
            return v
        if kind == "vector":
            return DenseVector(v["values"]) if v["type"] == 1 else SparseVector(v["size"], v["indices"], v["values"])
        if v["type"] == 1:
            return DenseMatrix(v["numRows"], v["numCols"], v["values"], v["isTransposed"])
        return SparseMatrix(v["numRows"], v["numCols"], v["colPtrs"], v["rowIndices"], v["values"], v["isTransposed"])

    columns = (
        [(f.name, f.dataType.simpleString()) for f in schema.fields] if hasattr(schema, "fields") else list(schema)
    )
    return Row(**{name: value(kind, row[name]) for name, kind in columns if name in row})


def _set_params(instance, values, setter, file):
    for name, value in values.items():
        try:
            setter(**{name: param_value(value)})
        except Exception as e:
            raise ModelFileError(model_files.param_problem(file, name, value, e)) from e


class EstimatorReader(DefaultParamsReader):
    """pyspark.ml's ``DefaultParamsReader`` with the checks of ``ModelFiles`` on the metadata, decoding
    Matrix and Vector Params (bounds) as MLlib writes them."""

    def load(self, path):
        classes = list(dict.fromkeys([public_class_name(self.cls), f"{self.cls.__module__}.{self.cls.__name__}"]))
        spark = self.sparkSession or SparkSession.active()
        metadata, file = ModelFiles(spark, path).metadata(dict.fromkeys(classes))
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
    ``sparkml.saved.model_files`` (those of ``sparkml.serving``); a damaged or foreign directory is a
    ``ModelFileError`` naming the file."""

    def __init__(self, cls, java_class):
        super().__init__()
        self.cls, self.java_class = cls, java_class

    def load(self, path):
        files = ModelFiles(self.sparkSession or SparkSession.active(), path)
        saved_class = saved_class_of(self.cls)
        saved = files.read({self.java_class: f"{self.cls.__module__}.{self.cls.__name__}"}, lambda _: saved_class)
        instance = self.cls._from_data(spark_row(saved.row, saved_class.columns))
        instance._resetUid(saved.metadata["uid"])
        metadata = saved.metadata
        extra = metadata.get("sparkml", {}).get("paramMap", {})
        for source, setter in (
            (metadata.get("defaultParamMap", {}), instance._setDefault),
            ({**metadata["paramMap"], **extra}, instance._set),
        ):
            _set_params(instance, {k: v for k, v in source.items() if instance.hasParam(k)}, setter, saved.file)
        instance._load_beside(files.spark, path)
        return instance
