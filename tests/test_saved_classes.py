"""``sparkml.saved.classes`` states, without pyspark, what each model class saves: the checks of every loader
(``sparkml.saved.model_files``) read it. Here it is held to the classes themselves: the columns are those the models
write (``_data_schema``), the shapes those of ``_data_shapes``, and every Param rule is the type converter the
Param declares (pyspark's ``TypeConverters`` mirrored without pyspark accept and refuse the same values)."""

import subprocess
import sys

import numpy as np
import pytest
from pyspark.ml.param import TypeConverters
from pyspark.sql import Row
from support.helpers import ROOT

from sparkml import catalog
from sparkml.base.persistence import param_rules
from sparkml.gpu.kernels import KERNELS
from sparkml.params import converters, kernel_svc, training
from sparkml.saved import classes as saved_classes
from sparkml.strategies import table

MIRRORED = {
    TypeConverters.toInt: converters.to_int,
    TypeConverters.toFloat: converters.to_float,
    TypeConverters.toBoolean: converters.to_boolean,
    TypeConverters.toString: converters.to_string,
    TypeConverters.toListFloat: converters.to_list_float,
}
LINALG = {TypeConverters.toVector: converters.to_vector, TypeConverters.toMatrix: converters.to_matrix}
# values a JSON line can hold, plus every choice any Param of this library offers
PROBES = [
    0,
    3,
    -2,
    2.0,
    2.5,
    float("nan"),
    float("inf"),
    10**400,
    True,
    False,
    None,
    "0.9",
    "many",
    "balanced",
    "scale",
    "cuda:1",
    [],
    [0.5, 0.5],
    [1, "a"],
    np.float64(0.05),  # a gamma computed as 1 / (d * X.var())
    np.int64(3),
    np.float32(0.5),
    np.int32(2),
    np.bool_(True),
    np.array([0.5, 0.5]),
    {},
    {"0": 2.0, "1": 1.0},
    {"0": -1.0},
    *training.DEVICES,
    *training.DTYPES,
    *training.TOPOLOGIES,
    *table.names(),
    *KERNELS,
    *kernel_svc.METHODS,
    *kernel_svc.LOSSES,
    *kernel_svc.MULTI_CLASS_MODES,
    *kernel_svc.LANDMARK_SELECTIONS,
]


def outcome(convert, value):
    try:
        return "ok", convert(value)
    except Exception as e:
        return "refused", f"{type(e).__name__}: {e}"


def model_classes():
    return [pytest.param(catalog.import_path(e.model_path()), id=e.model_name) for e in catalog.ENTRIES]


def test_every_model_class_has_its_saved_class():
    assert sorted(saved_classes.SAVED) == sorted(e.saved_class for e in catalog.ENTRIES)


@pytest.mark.parametrize("cls", model_classes())
def test_the_columns_are_those_the_model_writes(cls):
    saved = saved_classes.SAVED[cls._java_class]
    assert saved.name == cls.__name__ and saved.sparkml_class == f"{cls.__module__}.{cls.__name__}"
    assert saved.columns == tuple((f.name, f.dataType.simpleString()) for f in cls._data_schema.fields)
    assert saved.optional == tuple(getattr(cls, "_optional_data_columns", ()))


@pytest.mark.parametrize("cls", model_classes())
def test_every_param_rule_is_the_params_converter(cls):
    saved = saved_classes.SAVED[cls._java_class]
    instance = cls()
    assert sorted(saved.params) == sorted(p.name for p in instance.params)
    derived = param_rules(instance)  # what the Spark loader derives for a class saved_classes lacks
    for param in instance.params:
        rule = saved.params[param.name]
        if param.typeConverter in LINALG:  # MLlib's JSON, which the Spark loader decodes before converting
            assert rule is LINALG[param.typeConverter] is derived[param.name]
            continue
        if param.typeConverter in MIRRORED:
            assert rule is MIRRORED[param.typeConverter] is derived[param.name], param.name
        for value in PROBES:
            assert outcome(rule, value) == outcome(param.typeConverter, value), (param.name, value)


@pytest.mark.parametrize("pyspark_converter, ours", list(MIRRORED.items()), ids=lambda c: getattr(c, "__name__", ""))
def test_the_mirrored_converters_take_what_pysparks_take(pyspark_converter, ours):
    for value in PROBES:
        assert outcome(ours, value) == outcome(pyspark_converter, value), value


def test_vector_and_matrix_params_are_checked_as_mllib_writes_them():
    dense = {"type": 1, "values": [1.0, "NaN", "Infinity"]}
    assert converters.to_vector(dense)["values"][2] == np.inf
    assert converters.to_vector([1, 2.5])["values"].tolist() == [1.0, 2.5]
    with pytest.raises(TypeError, match="index 5 is out of range for a size of 2"):
        converters.to_vector({"type": 0, "size": 2, "indices": [0, 5], "values": [1.0, 2.0]})
    matrix = {"class": "matrix", "type": 1, "numRows": 2, "numCols": 1, "values": [1.0, 2.0], "isTransposed": False}
    assert converters.to_matrix(matrix)["numRows"] == 2
    with pytest.raises(TypeError, match="3 values for 2 x 1"):
        converters.to_matrix({**matrix, "values": [1.0, 2.0, 3.0]})
    with pytest.raises(TypeError, match="Could not convert"):
        converters.to_matrix([[1.0]])


ROWS = {  # model class -> rows its _data_shapes and the saved class's shapes must agree on
    "LogisticRegressionModel": [
        {"numClasses": 2, "numFeatures": 4, "isMultinomial": False},
        {"numClasses": 3, "numFeatures": 5, "isMultinomial": True},
    ],
    "LinearSVCModel": [{"intercept": 0.5}],
    "LinearRegressionModel": [{"intercept": 0.5, "scale": 1.0}],
    "GeneralizedLinearRegressionModel": [{"intercept": 0.5}],
    "GeneralizedLinearMixedModelModel": [{"intercept": 0.5, "effectWidths": [0, 3]}],
    "KernelSVCModel": [
        {"numClasses": 3, "kernel": "rbf", "method": "nystroem", "platt": None, "pairs": {"type": 1}},
        {"numClasses": 2, "kernel": "laplacian", "method": "rff", "platt": {"type": 1}},
    ],
}


@pytest.mark.parametrize("cls", model_classes())
def test_the_shapes_are_the_models(cls):
    saved = saved_classes.SAVED[cls._java_class]
    for row in ROWS[cls.__name__]:
        assert cls._data_shapes(Row(**row)) == saved.shapes(row)


def test_serving_reads_and_checks_a_model_without_pyspark(spark, tmp_path):
    """``sparkml.serving`` and ``ModelFileError`` import, and a saved model loads, is checked and scores, in a
    Python where pyspark cannot be imported."""
    from pyspark.ml.linalg import DenseMatrix, DenseVector

    from sparkml.classification import LogisticRegressionModel

    path = str(tmp_path / "model")
    LogisticRegressionModel(DenseMatrix(1, 2, [1.0, -1.0], True), DenseVector([0.5]), 2, False).save(path)
    code = f"""
import sys
class NoPyspark:
    def find_spec(self, name, path=None, target=None):
        if name == "pyspark" or name.startswith("pyspark."):
            raise ImportError("pyspark is blocked")
sys.meta_path.insert(0, NoPyspark())
sys.path.insert(0, {ROOT!r})
from sparkml import serving
from sparkml.saved.model_files import ModelFileError
print(serving.load({path!r}).score([[1.0, 0.0]])["prediction"].tolist())
try:
    serving.load({str(tmp_path / "nowhere")!r})
except ModelFileError as e:
    print(str(e).split(": ", 1)[1])
print("pyspark" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    printed = out.stdout.split("\n")[:3]
    assert printed == ["[1.0]", "no such directory (a saved model holds metadata/ and data/)", "False"], out.stdout
