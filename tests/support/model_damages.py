"""Damages to a saved model's directory, for the hostile-files tests (tests/test_hostile_model_files.py and
tests/test_hostile_model_params.py): each takes (model directory, kind, sentinel path), damages the directory
and returns (the path the error must name, a piece of the message).

``KINDS`` are the small models the tests fit once per module, ``LOADERS`` the three ways a model directory is
loaded: the Spark-side ``Model.load``, ``sparkml.serving.load`` and MLflow's python_function loader
(``sparkml.serving._load_pyfunc``). They share one reader (``sparkml.saved.model_files``), so every damage is refused
by each with the same message.
"""

import glob
import json
import os
import pickle
import re
import shutil

from sparkml import serving
from sparkml.classification import (
    KernelSVC,
    KernelSVCModel,
    LinearSVC,
    LinearSVCModel,
    LogisticRegression,
    LogisticRegressionModel,
)
from sparkml.regression import LinearRegression, LinearRegressionModel

KINDS = {  # kind -> (estimator, its fit Params, the model class)
    "lr_binary": (LogisticRegression, {"maxIter": 5}, LogisticRegressionModel),
    "lr_multinomial": (LogisticRegression, {"maxIter": 5, "labelCol": "label3"}, LogisticRegressionModel),
    "linreg": (LinearRegression, {"maxIter": 5, "labelCol": "y"}, LinearRegressionModel),
    "svc": (LinearSVC, {"maxIter": 5}, LinearSVCModel),
    "kernel_svc": (  # three classes, one-vs-one: its pairs column too
        KernelSVC,
        {"numLandmarks": 8, "landmarkSelection": "random", "maxIter": 3, "probability": True, "labelCol": "label3"},
        KernelSVCModel,
    ),
}
LOADERS = {  # loader name -> load(kind, directory)
    "spark": lambda kind, path: KINDS[kind][2].load(path),
    "serving": lambda kind, path: serving.load(path),
    "pyfunc": lambda kind, path: serving._load_pyfunc(path),
}

FOREIGN_CLASSES = (
    "sklearn.linear_model.LogisticRegression",
    "org.apache.spark.ml.classification.RandomForestClassificationModel",
    "os.system",
    "evil.LogisticRegressionModel",  # serving once took any class named like one of ours
)
SENTINEL = "unpickled-sentinel"  # what the planted pickles would create, in the test's tmp_path


def plant_pickle(sentinel):
    """A pickle that, if it were ever unpickled, would create the file `sentinel`."""

    class Plant:
        def __reduce__(self):
            return open, (str(sentinel), "w")

    return pickle.dumps(Plant())


def the_file(model_dir, folder):
    found = glob.glob(os.path.join(glob.escape(model_dir), folder, "*"))
    (path,) = [p for p in found if not os.path.basename(p).startswith("_")]
    return path


def replace_bytes(path, data):
    """Overwrite `path`, dropping Hadoop's checksum file so the reader sees the new bytes."""
    with open(path, "wb") as f:
        f.write(data)
    crc = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.crc")
    if os.path.exists(crc):
        os.remove(crc)


def edit_metadata(model_dir, edit):
    path = the_file(model_dir, "metadata")
    with open(path) as f:
        metadata = json.loads(f.readline())
    replace_bytes(path, (json.dumps(edit(metadata)) + "\n").encode())
    return path


# ---- damages: each takes (model directory, kind, sentinel path) and returns (the path the error must
# name, a piece of the message) ---------------------------------------------------------------------------


def data_file_deleted(d, kind, sentinel):
    os.remove(the_file(d, "data"))
    return os.path.join(d, "data"), "expected one Parquet file, found 0"


def data_dir_deleted(d, kind, sentinel):
    shutil.rmtree(os.path.join(d, "data"))
    return os.path.join(d, "data"), "no such directory"


def data_truncated(d, kind, sentinel):
    path = the_file(d, "data")
    with open(path, "rb") as f:
        data = f.read()
    replace_bytes(path, data[: len(data) // 2])
    return path, "not a readable Parquet file \\("


def metadata_dir_deleted(d, kind, sentinel):
    shutil.rmtree(os.path.join(d, "metadata"))
    return os.path.join(d, "metadata"), "no such directory"


def metadata_file_deleted(d, kind, sentinel):
    os.remove(the_file(d, "metadata"))
    return os.path.join(d, "metadata"), "expected one part-\\* file, found 0"


def metadata_truncated(d, kind, sentinel):
    path = the_file(d, "metadata")
    with open(path, "rb") as f:
        data = f.read()
    replace_bytes(path, data[: len(data) // 2])
    return path, "not model metadata \\(its first line is not JSON"


def metadata_not_json(d, kind, sentinel):
    path = the_file(d, "metadata")
    replace_bytes(path, b"class = 'LogisticRegressionModel'\n")
    return path, "not JSON"


def metadata_a_list(d, kind, sentinel):
    path = the_file(d, "metadata")
    replace_bytes(path, b'["class", "uid"]\n')
    return path, "a JSON list, not an object"


def metadata_without_class(d, kind, sentinel):
    return edit_metadata(d, lambda m: {k: v for k, v in m.items() if k != "class"}), "no 'class' field"


def metadata_without_param_map(d, kind, sentinel):
    return edit_metadata(d, lambda m: {k: v for k, v in m.items() if k != "paramMap"}), "no 'paramMap' field"


def uid_a_number(d, kind, sentinel):
    return edit_metadata(d, lambda m: {**m, "uid": 42}), "'uid' is int, expected a string"


def param_of_the_wrong_type(d, kind, sentinel):
    return edit_metadata(d, lambda m: {**m, "paramMap": {**m["paramMap"], "maxIter": "many"}}), "Param 'maxIter'"


def foreign_class(name):
    def damage(d, kind, sentinel):  # serving reads every class of this library: it lists them all
        ours = "sparkml.classification.KernelSVCModel" if kind == "kernel_svc" else "org.apache.spark.ml."
        return edit_metadata(d, lambda m: {**m, "class": name}), f"the class is '{name}', expected .*'{ours}"

    damage.__name__ = f"class_{name.rsplit('.', 1)[-1]}"
    return damage


def foreign_sparkml_class(d, kind, sentinel):
    path = edit_metadata(d, lambda m: {**m, "sparkml": {**m["sparkml"], "class": "os.system"}})
    return path, "the \"sparkml\" class is 'os.system', expected 'sparkml."


def pickle_beside_data(d, kind, sentinel):
    path = os.path.join(d, "data", "evil.pkl")
    replace_bytes(path, plant_pickle(sentinel))
    return path, "unexpected file"


def pickle_beside_metadata(d, kind, sentinel):
    path = os.path.join(d, "metadata", "evil.pkl")
    replace_bytes(path, plant_pickle(sentinel))
    return path, "unexpected file"


def pickle_named_parquet(d, kind, sentinel):
    path = the_file(d, "data")
    replace_bytes(path, plant_pickle(sentinel))
    return path, "not a readable Parquet file \\("


def second_parquet_file_a_pickle(d, kind, sentinel):
    path = os.path.join(d, "data", "part-00001-evil.snappy.parquet")
    replace_bytes(path, plant_pickle(sentinel))
    return path, "expected one Parquet file, found 2"


def pickle_named_metadata(d, kind, sentinel):
    path = the_file(d, "metadata")
    replace_bytes(path, plant_pickle(sentinel))
    return path, "not JSON"


def metadata_nested_too_deep(d, kind, sentinel):
    path = the_file(d, "metadata")
    replace_bytes(path, b"[" * 100_000 + b"\n")
    return path, "not model metadata \\(its first line is not JSON"


def only(*kinds):
    """The damage applies to these kinds only."""

    def mark(damage):
        damage.kinds = kinds
        return damage

    return mark


def set_param(d, key, name, value):
    """Set Param ``name`` to ``value`` in the metadata's ``key`` (paramMap, defaultParamMap or sparkml)."""

    def edit(m):
        if key == "sparkml":
            return {**m, "sparkml": {**m["sparkml"], "paramMap": {**m["sparkml"]["paramMap"], name: value}}}
        return {**m, key: {**m[key], name: value}}

    return edit_metadata(d, edit)


def threshold_a_string(d, kind, sentinel):
    name = "epsilon" if kind == "linreg" else "threshold"
    path = set_param(d, "paramMap", name, "0.9")
    return path, f"Param '{name}' cannot take the value '0.9' .Could not convert 0.9 to float"


@only("lr_binary", "lr_multinomial")
def threshold_out_of_range(d, kind, sentinel):
    path = set_param(d, "paramMap", "threshold", 1.5)
    return path, "Param 'threshold' cannot take the value 1.5 .must be in \\[0, 1\\]"


@only("lr_binary", "lr_multinomial")
def thresholds_of_another_length(d, kind, sentinel):
    k = 2 if kind == "lr_binary" else 3
    path = set_param(d, "paramMap", "thresholds", [0.5] * (k + 1))
    return path, f"Param 'thresholds' has {k + 1} values; the model has {k} classes"


@only("lr_binary", "lr_multinomial")
def thresholds_negative(d, kind, sentinel):
    k = 2 if kind == "lr_binary" else 3
    values = [-1.0] + [1.0] * (k - 1)
    return set_param(d, "paramMap", "thresholds", values), re.escape(f"value {values} (must be >= 0")


def default_of_the_wrong_type(d, kind, sentinel):
    return set_param(d, "defaultParamMap", "tol", "tiny"), "Param 'tol' cannot take the value 'tiny'"


def sparkml_param_not_a_choice(d, kind, sentinel):
    path = set_param(d, "sparkml", "device", "tpu")
    return path, "Param 'device' cannot take the value 'tpu' .device must be one of auto, cpu, cuda; got 'tpu'"


FILE_DAMAGES = [
    data_file_deleted,
    data_dir_deleted,
    data_truncated,
    metadata_dir_deleted,
    metadata_file_deleted,
    metadata_truncated,
    metadata_not_json,
    metadata_a_list,
    metadata_without_class,
    metadata_without_param_map,
    uid_a_number,
    param_of_the_wrong_type,
    *map(foreign_class, FOREIGN_CLASSES),
    foreign_sparkml_class,
    pickle_beside_data,
    pickle_beside_metadata,
    pickle_named_parquet,
    second_parquet_file_a_pickle,
    pickle_named_metadata,
    metadata_nested_too_deep,
]
PARAM_DAMAGES = [
    threshold_a_string,
    threshold_out_of_range,
    thresholds_of_another_length,
    thresholds_negative,
    default_of_the_wrong_type,
    sparkml_param_not_a_choice,
]
