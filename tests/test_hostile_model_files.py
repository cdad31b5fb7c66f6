"""Damaged or hostile model directories are refused with a ``ModelFileError`` (a ValueError) that names
the offending file and the problem, before any model object is built; a planted pickle is never
unpickled.

One small model per class is fitted and saved once; each case copies the saved directory, damages the
copy and loads it. File and metadata damages go through the same code for every class, so ``make test``
runs each of them on one class (rotating) and ``make test-full`` on all; the damages to the Parquet row
depend on the class's columns and run on every class.
"""

import glob
import json
import os
import pickle
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkml.base.persistence import ModelFileError
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
    "kernel_svc": (
        KernelSVC,
        {"numLandmarks": 8, "landmarkSelection": "random", "maxIter": 3, "probability": True},
        KernelSVCModel,
    ),
}
FOREIGN_CLASSES = (
    "sklearn.linear_model.LogisticRegression",
    "org.apache.spark.ml.classification.RandomForestClassificationModel",
    "os.system",
)
SENTINEL = "unpickled-sentinel"  # what the planted pickles would create, in the test's tmp_path


@pytest.fixture(scope="module")
def saved(spark, tmp_path_factory):
    """kind -> the directory its fitted model was saved to."""
    from data_helpers import linear_frame

    df = linear_frame(spark, n=240, partitions=2)
    root = tmp_path_factory.mktemp("saved")
    paths = {}
    for kind, (estimator, params, _) in KINDS.items():
        paths[kind] = str(root / kind)
        estimator(**params).fit(df).save(paths[kind])
    df.unpersist()
    return paths


def plant_pickle(sentinel):
    """A pickle that, if it were ever unpickled, would create the file `sentinel`."""

    class Plant:
        def __reduce__(self):
            return open, (str(sentinel), "w")

    return pickle.dumps(Plant())


def the_file(model_dir, folder):
    (path,) = [p for p in glob.glob(os.path.join(model_dir, folder, "*")) if not os.path.basename(p).startswith("_")]
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


def edit_row(model_dir, edit):
    """Rewrite the data Parquet file with pyarrow: `edit(rows)` changes the list of row dicts in place
    (vectors and matrices are MLlib's structs); columns it deletes leave the Spark schema too."""
    path = the_file(model_dir, "data")
    table = pq.read_table(path)
    rows = table.to_pylist()
    edit(rows)
    names = [n for n in table.schema.names if n in rows[0]]
    key = b"org.apache.spark.sql.parquet.row.metadata"
    spark_schema = json.loads(table.schema.metadata[key])
    spark_schema["fields"] = [f for f in spark_schema["fields"] if f["name"] in names]
    schema = pa.schema([table.schema.field(n) for n in names], metadata={key: json.dumps(spark_schema)})
    buffer = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), buffer)
    replace_bytes(path, buffer.getvalue().to_pybytes())
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
    def damage(d, kind, sentinel):
        ours = "sparkml.classification.KernelSVCModel" if kind == "kernel_svc" else "org.apache.spark.ml."
        return edit_metadata(d, lambda m: {**m, "class": name}), f"the class is '{name}', expected '{ours}"

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


# The row damages: MLlib's vector and matrix structs edited in place.
COEFFICIENTS = {
    "lr_binary": "coefficientMatrix",
    "lr_multinomial": "coefficientMatrix",
    "linreg": "coefficients",
    "svc": "coefficients",
    "kernel_svc": "coefficientMatrix",
}
INTERCEPTS = {
    "lr_binary": "interceptVector",
    "lr_multinomial": "interceptVector",
    "linreg": "intercept",
    "svc": "intercept",
    "kernel_svc": "interceptVector",
}


def dims(matrix):
    return f"{matrix['numRows']} x {matrix['numCols']}"


def coefficients_one_column_more(d, kind, sentinel):
    """Matrices: one more column than numFeatures (LogisticRegression) or the kernel features; vectors
    (no size to compare with): a sparse vector with an index beyond its size."""
    column = COEFFICIENTS[kind]
    found = {}

    def edit(rows):
        value = rows[0][column]
        if column == "coefficients":
            value.update(type=0, size=2, indices=[0, 5], values=[1.0, 2.0])
            return
        found["was"] = dims(value)
        value["values"] = value["values"] + [0.0] * value["numRows"]
        value["numCols"] += 1
        found["now"] = dims(value)

    path = edit_row(d, edit)
    if column == "coefficients":
        return path, "a vector or matrix in its row has values that do not fit its size .Index 5 is out of"
    return path, f"column '{column}' is {found['now']}, expected {found['was']}"


def coefficients_one_row_more(d, kind, sentinel):
    """A matrix of the wrong dims: one row more than the outputs (binary: 1, multinomial: numClasses)."""
    column = COEFFICIENTS[kind]
    found = {}

    def edit(rows):
        value = rows[0][column]
        found["was"] = dims(value)
        value["values"] = value["values"] + [0.0] * value["numCols"]
        value["numRows"] += 1
        found["now"] = dims(value)

    return edit_row(d, edit), f"column '{column}' is {found['now']}, expected {found['was']}"


def matrix_values_missing(d, kind, sentinel):
    """A matrix whose values do not fill numRows x numCols."""
    column = COEFFICIENTS[kind]

    def edit(rows):
        rows[0][column]["values"] = rows[0][column]["values"][:-1]

    return edit_row(d, edit), "a vector or matrix in its row has values that do not fit its size"


def intercepts_one_short(d, kind, sentinel):
    """Vectors: one intercept fewer than the outputs; scalars: null."""
    column = INTERCEPTS[kind]
    found = {}

    def edit(rows):
        if column == "intercept":
            rows[0][column] = None
            return
        found["was"] = len(rows[0][column]["values"])
        rows[0][column]["values"] = rows[0][column]["values"][:-1]

    path = edit_row(d, edit)
    if column == "intercept":
        return path, "column 'intercept' is null"
    return path, f"column '{column}' is {found['was'] - 1}, expected {found['was']}"


def intercept_column_missing(d, kind, sentinel):
    column = INTERCEPTS[kind]

    def edit(rows):
        del rows[0][column]

    return edit_row(d, edit), f"no column '{column}'"


def two_rows(d, kind, sentinel):
    def edit(rows):
        rows.append(dict(rows[0]))

    return edit_row(d, edit), "holds 2 rows, expected one"


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
]
ROW_DAMAGES = [
    coefficients_one_column_more,
    coefficients_one_row_more,
    matrix_values_missing,
    intercepts_one_short,
    intercept_column_missing,
    two_rows,
]
MATRIX_ONLY = {coefficients_one_row_more, matrix_values_missing}


def cases():
    kinds = sorted(KINDS)
    for i, damage in enumerate(FILE_DAMAGES):
        for j, kind in enumerate(kinds):
            marks = () if j == i % len(kinds) else (pytest.mark.full,)
            yield pytest.param(kind, damage, marks=marks, id=f"{kind}-{damage.__name__}")
    for damage in ROW_DAMAGES:
        for kind in kinds:
            if damage in MATRIX_ONLY and COEFFICIENTS[kind] == "coefficients":
                continue
            yield pytest.param(kind, damage, id=f"{kind}-{damage.__name__}")


@pytest.mark.parametrize("kind, damage", list(cases()))
def test_a_damaged_model_is_refused_naming_the_file(saved, tmp_path, kind, damage):
    model_dir = str(tmp_path / "model")
    shutil.copytree(saved[kind], model_dir)
    sentinel = tmp_path / SENTINEL
    named, problem = damage(model_dir, kind, sentinel)
    with pytest.raises(ModelFileError, match=problem) as info:
        KINDS[kind][2].load(model_dir)
    assert isinstance(info.value, ValueError)
    assert named in str(info.value), str(info.value)
    assert not sentinel.exists()


def test_the_planted_pickle_is_armed(tmp_path):
    """What the planted files would do if anything unpickled them (the tests above: nothing does)."""
    sentinel = tmp_path / SENTINEL
    pickle.loads(plant_pickle(sentinel))
    assert sentinel.exists()


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_undamaged_copy_loads(saved, tmp_path, kind):
    model_dir = str(tmp_path / "model")
    shutil.copytree(saved[kind], model_dir)
    model = KINDS[kind][2].load(model_dir)
    assert type(model) is KINDS[kind][2]


def test_a_registry_load_names_the_file_too(spark, saved, tmp_path):
    """``jobs.models.load_dir`` (what registry versions load through) gives the loader's error as a
    ModelError, naming the file in the directory it was given."""
    from sparkml.jobs import models

    model_dir = str(tmp_path / "model")
    shutil.copytree(saved["lr_multinomial"], model_dir)
    named, problem = intercepts_one_short(model_dir, "lr_multinomial", None)
    with pytest.raises(models.ModelError, match=problem) as info:
        models.load_dir(model_dir, spark=spark)
    assert named in str(info.value)


ESTIMATOR_DAMAGES = {  # name -> (damage of a saved estimator's directory, a piece of the message)
    "not_json": (lambda d, s: replace_bytes(the_file(d, "metadata"), b"{truncat"), "not JSON"),
    "foreign_class": (
        lambda d, s: edit_metadata(d, lambda m: {**m, "class": "os.system"}),
        "the class is 'os.system', expected 'sparkml.classification.",
    ),
    "uid_a_list": (lambda d, s: edit_metadata(d, lambda m: {**m, "uid": ["x"]}), "'uid' is list"),
    "unknown_param": (
        lambda d, s: edit_metadata(d, lambda m: {**m, "paramMap": {"evil": 1}}),
        "paramMap has Params a .* lacks: evil",
    ),
    "pickle_beside": (
        lambda d, s: replace_bytes(os.path.join(d, "metadata", "evil.pkl"), plant_pickle(s)),
        "evil.pkl: unexpected file",
    ),
}


@pytest.mark.parametrize(
    "estimator", [LogisticRegression, pytest.param(KernelSVC, marks=pytest.mark.full)], ids=lambda c: c.__name__
)
@pytest.mark.parametrize("name", sorted(ESTIMATOR_DAMAGES))
def test_a_damaged_estimator_is_refused_naming_the_file(spark, tmp_path, name, estimator):
    damage, problem = ESTIMATOR_DAMAGES[name]
    path = str(tmp_path / "estimator")
    estimator(maxIter=3).save(path)
    sentinel = tmp_path / SENTINEL
    damage(path, sentinel)
    with pytest.raises(ModelFileError, match=problem) as info:
        estimator.load(path)
    assert os.path.join(path, "metadata") in str(info.value)
    assert not sentinel.exists()
