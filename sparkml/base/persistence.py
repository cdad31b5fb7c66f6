"""Save and load models in MLlib's own on-disk layout, so stock pyspark.ml can load them too.

    path/metadata/part-00000   one JSON line: class (the Scala class), uid, paramMap, defaultParamMap,
                               sparkVersion, timestamp, plus "sparkml": this library's class and Params
    path/data/part-*.parquet   one row with the model's numbers, columns exactly as MLlib writes them

Only Params MLlib knows go into paramMap/defaultParamMap (its reader rejects unknown ones); the
Params this library adds (strategy, device, dtype, ...) that are set live under the "sparkml" key, which MLlib ignores.
Estimators are written as pyspark.ml's Python estimators are (``EstimatorWriter``: the metadata
line alone). Everything is JSON and Parquet: no pickle anywhere.
"""
import json
import math
import time

from pyspark.ml.util import DefaultParamsReader, MLReader, MLWriter
from pyspark.sql import SparkSession

from sparkml.base.params import TORCH_PARAM_NAMES
from sparkml.base.session_kind import is_connect


def _numbers(values):
    """Floats as MLlib's JSON writes them: non-finite ones as the strings "Infinity", "-Infinity", "NaN"
    (MLlib's own reader cannot read those back; ours can)."""
    return [v if math.isfinite(v) else ("NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity"))
            for v in map(float, values)]


def _floats(values):
    return [float(v) for v in values]  # float("Infinity") and float("NaN") parse


def _jsonable(value):
    """A Param value as JSON; Matrix and Vector values in MLlib's own JSON form (its
    ``JsonMatrixConverter`` / ``JsonVectorConverter``), which MLlib's reader decodes."""
    from pyspark.ml.linalg import DenseMatrix, DenseVector, Matrix, SparseVector

    if isinstance(value, Matrix):
        dense = value if isinstance(value, DenseMatrix) else DenseMatrix(value.numRows, value.numCols,
                                                                         value.toArray().ravel(order="F"))
        return {"class": "matrix", "type": 1, "numRows": dense.numRows, "numCols": dense.numCols,
                "values": _numbers(dense.values), "isTransposed": bool(dense.isTransposed)}
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
        return SparseMatrix(value["numRows"], value["numCols"], value["colPtrs"], value["rowIndices"],
                            _floats(value["values"]), value["isTransposed"])
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
                "paramMap": {n: inst.getOrDefault(n) for n in TORCH_PARAM_NAMES
                             if inst.hasParam(n) and inst.isSet(n)},
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
        return json.loads(DefaultParamsWriter._get_metadata_to_save(self.instance, spark, paramMap=params,
                                                                     extraMetadata={"class": self.class_name}))


class EstimatorReader(DefaultParamsReader):
    """pyspark.ml's ``DefaultParamsReader``, decoding Matrix and Vector Params (bounds) as MLlib writes them."""

    def load(self, path):
        metadata = DefaultParamsReader.loadMetadata(path, self.sparkSession)
        for key in ("paramMap", "defaultParamMap"):
            metadata[key] = {k: param_value(v) for k, v in metadata.get(key, {}).items()}
        instance = self.cls()
        instance._resetUid(metadata["uid"])
        DefaultParamsReader.getAndSetParams(instance, metadata)
        return instance


class MLlibModelReader(MLReader):
    """Reads a directory written by MLlib or by ``MLlibModelWriter`` into ``cls``."""

    def __init__(self, cls, java_class):
        super().__init__()
        self.cls, self.java_class = cls, java_class

    def load(self, path):
        spark = self.sparkSession or SparkSession.active()
        metadata = json.loads(spark.read.text(f"{path}/metadata").first()[0])
        if metadata["class"] != self.java_class:
            raise ValueError(f"{path} holds a {metadata['class']}, not a {self.java_class}")
        row = spark.read.parquet(f"{path}/data").first()
        instance = self.cls._from_data(row)
        instance._resetUid(metadata["uid"])
        extra = metadata.get("sparkml", {}).get("paramMap", {})
        for source, setter in ((metadata.get("defaultParamMap", {}), instance._setDefault),
                               ({**metadata.get("paramMap", {}), **extra}, instance._set)):
            known = {k: param_value(v) for k, v in source.items() if instance.hasParam(k)}
            if known:
                setter(**known)
        return instance
