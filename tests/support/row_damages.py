"""Damages to a saved model's data row (tests/test_hostile_model_files.py): MLlib's vector and matrix structs
and the Parquet file's Spark schema edited in place. Each takes (model directory, kind, sentinel path) and
returns (the path the error must name, a piece of the message), as those of tests/support/model_damages.py."""

import base64
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq

from support.model_damages import only, plant_pickle, replace_bytes, the_file


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
        return path, "values that do not fit its size .column 'coefficients': index 5 is out of range for a size of 2"
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


@only("kernel_svc")
def pairs_name_class_minus_one(d, kind, sentinel):
    def edit(rows):
        rows[0]["pairs"]["values"][0] = -1.0

    return edit_row(d, edit), "column 'pairs' names class -1; the model has classes 0 to 2"


@only("kernel_svc")
def pairs_repeated(d, kind, sentinel):
    def edit(rows):
        pairs = rows[0]["pairs"]
        assert pairs["isTransposed"] and pairs["values"] == [0.0, 1.0, 0.0, 2.0, 1.0, 2.0]
        pairs["values"] = [0.0, 1.0, 1.0, 0.0, 1.0, 2.0]

    return edit_row(d, edit), "column 'pairs' holds the pair \\(1, 0\\) twice"


def udt_planted_in_the_schema(d, kind, sentinel):
    """The Parquet file's Spark schema declares the coefficients a Python user-defined type: a class of a module
    that creates the sentinel when imported, with a planted pickle as its serialized class (pyspark imports
    the module, and before 4.0 unpickles the class, when it decodes such a schema)."""
    module = f"planted_{os.path.basename(os.path.dirname(d))}"
    with open(os.path.join(os.path.dirname(str(sentinel)), f"{module}.py"), "w") as f:
        f.write(f"open({str(sentinel)!r}, 'w').close()\nPlanted = None\n")
    column = COEFFICIENTS[kind]
    path = the_file(d, "data")
    table = pq.read_table(path)
    key = b"org.apache.spark.sql.parquet.row.metadata"
    spark_schema = json.loads(table.schema.metadata[key])
    for field in spark_schema["fields"]:
        if field["name"] == column:
            field["type"] = {
                "type": "udt",
                "pyClass": f"{module}.NotThere",
                "serializedClass": base64.b64encode(plant_pickle(sentinel)).decode(),
                "sqlType": field["type"]["sqlType"],
            }
    buffer = pa.BufferOutputStream()
    pq.write_table(table.replace_schema_metadata({key: json.dumps(spark_schema)}), buffer)
    replace_bytes(path, buffer.getvalue().to_pybytes())
    kind_name = "matrix" if column == "coefficientMatrix" else "vector"
    return path, f"column '{column}' is udt\\({module}.NotThere\\), expected {kind_name}"


ROW_DAMAGES = [
    coefficients_one_column_more,
    coefficients_one_row_more,
    matrix_values_missing,
    intercepts_one_short,
    intercept_column_missing,
    two_rows,
    pairs_name_class_minus_one,
    pairs_repeated,
]
MATRIX_ONLY = {coefficients_one_row_more, matrix_values_missing}
