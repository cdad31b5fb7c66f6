"""The files of a saved model, checked without pyspark: the one reader that every loader of them shares.

A saved model is a directory in MLlib's layout (``sparkml.base.persistence`` writes it):

    path/metadata/part-*     one JSON line: class, uid, sparkVersion, paramMap, defaultParamMap, "sparkml"
    path/data/*.parquet      one row: the model's numbers (MLlib's vector and matrix structs)

Three loaders read it: ``Model.load`` through Spark (``sparkml.base.persistence.ModelFiles``, so HDFS and S3
paths work), ``sparkml.serving.load`` and MLflow's python_function flavor from a local directory
(``LocalFiles``). Each lists a folder and fetches a file's bytes its own way; everything else is here, so the
three refuse the same files with the same ``ModelFileError`` (naming the file and the problem) before any
model object is built:

* ``path/metadata`` holds one ``part-*`` file and ``path/data`` one ``*.parquet`` file. Hidden names
  (``_SUCCESS``, ``.crc``) are skipped, as Spark skips them; any other file is an error, since Spark would
  read it as part of the model.
* The metadata's first line is a JSON object with ``class``, ``uid``, ``sparkVersion`` (strings) and
  ``paramMap`` (an object), and its class is one the loader reads.
* Each Param value the class has is of its Param's type and within MLlib's bounds (``saved_classes``).
* The Parquet file, parsed by pyarrow from its bytes, holds one row with the class's columns and types,
  non-null, its vectors and matrices well formed and of the sizes the class asks. Spark never decodes the
  file's schema: pyspark would import (and before 4.0 unpickle) the Python class that a user-defined type
  there names.

Everything is read as data: nothing in the files is imported, evaluated or unpickled.
"""

from __future__ import annotations

import json
import os
import reprlib
from dataclasses import dataclass
from typing import Any

from sparkml.params import mllib_structs as structs
from sparkml.params.mllib_structs import STORED


class ModelFileError(ValueError):
    """A saved model or estimator that cannot be loaded: the message names the file (or directory) and
    what is wrong with it."""


def first_line(error) -> str:
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


@dataclass
class SavedModel:
    """A checked model directory: its metadata (and the file it came from), what its class saves
    (``saved_classes.SavedClass``), its data row (MLlib's vector and matrix structs as dicts) and its Param
    values as their Params convert them (``params``: the metadata's defaults, then its set values)."""

    metadata: dict
    file: str
    spec: Any
    row: dict
    params: dict


class ModelFiles:
    """The checks of a model directory at ``path``; a subclass lists and fetches: ``_list(directory)``, the
    files under it (recursively, hidden names skipped; ModelFileError when it is missing), ``_show(file)``,
    its name in messages, and ``_read(file)``, its bytes."""

    def __init__(self, path):
        self.path = os.fspath(path).rstrip("/")

    def _list(self, directory) -> list:
        raise NotImplementedError

    def _show(self, file) -> str:
        return file

    def _read(self, file) -> bytes:
        raise NotImplementedError

    def only_file(self, folder, accepts, what):
        """The one file in ``path/folder`` whose name ``accepts(name)``."""
        directory = f"{self.path}/{folder}"
        files = sorted(self._list(directory), key=self._show)
        for f in files:
            parent, name = (["", *self._show(f).rstrip("/").split("/")])[-2:]
            if parent != folder or not accepts(name):
                raise ModelFileError(f"{self._show(f)}: unexpected file; {directory} should hold {what} only")
        if len(files) != 1:
            found = f" ({', '.join(self._show(f) for f in files)})" if files else ""
            raise ModelFileError(f"{directory}: expected {what}, found {len(files)}{found}")
        return files[0]

    def _bytes(self, file):
        try:
            return self._read(file)
        except ModelFileError:
            raise
        except Exception as e:
            raise ModelFileError(f"{self._show(file)}: cannot read this file ({first_line(e)})") from e

    def metadata(self, classes):
        """(metadata dict, its file) of a model or estimator saved as one of ``classes``, a mapping of each
        class to the "sparkml" class its metadata must name when it names one (None: any)."""
        f = self.only_file("metadata", lambda name: name.startswith("part-"), "one part-* file")
        file = self._show(f)
        data = self._bytes(f)
        lines = data.splitlines()  # as Spark's text source splits: \n, \r\n or \r
        try:
            metadata = json.loads(lines[0].decode("utf-8", "replace") if lines else "")
        except (ValueError, RecursionError) as e:
            reason = e if isinstance(e, ValueError) else "nested too deep"
            raise ModelFileError(
                f"{file}: not model metadata (its first line is not JSON: {reason}); "
                "the file is truncated or not a saved model's"
            ) from None
        problem = _metadata_problem(metadata, classes)
        if problem:
            raise ModelFileError(f"{file}: {problem}")
        return metadata, file

    def data_row(self, spec):
        """(the one row of ``path/data``, its file), checked against ``spec`` (``saved_classes.SavedClass``)."""
        f = self.only_file("data", lambda name: name.endswith(".parquet"), "one Parquet file")
        file = self._show(f)
        return parquet_row(self._bytes(f), file, spec), file

    def read(self, classes, spec_of):
        """The checked ``SavedModel``: ``classes`` as for ``metadata``, ``spec_of(class)`` what that class saves."""
        metadata, file = self.metadata(classes)
        spec = spec_of(metadata["class"])
        params = param_values(metadata, file, spec)
        row, data_file = self.data_row(spec)
        problem = spec.check(row, params) if spec.check is not None else None
        if problem is not None:
            which, text = problem
            raise ModelFileError(f"{file if which == 'metadata' else data_file}: {text}")
        return SavedModel(metadata, file, spec, row, params)


class LocalFiles(ModelFiles):
    """A model directory on this machine (a path or a ``file:`` URI), read with os and pyarrow."""

    def __init__(self, path):
        path = os.fspath(path)
        for scheme in ("file://", "file:"):
            if path.startswith(scheme):
                path = path[len(scheme) :]
                break
        super().__init__(path)

    def _list(self, directory):
        if os.path.isfile(directory):
            return [directory]
        if not os.path.isdir(directory):
            raise ModelFileError(f"{directory}: no such directory (a saved model holds metadata/ and data/)")
        found = []
        try:
            for root, dirs, files in os.walk(directory, onerror=_raise):
                dirs[:] = [d for d in dirs if not _hidden(d)]
                found += [os.path.join(root, f) for f in files if not _hidden(f)]
        except OSError as e:
            raise ModelFileError(f"{directory}: cannot list this directory ({first_line(e)})") from e
        return found

    def _read(self, file):
        with open(file, "rb") as f:
            return f.read()


def _raise(error):
    raise error


def _hidden(name):
    """Hadoop's hidden files, which Spark's file sources skip."""
    return name.startswith(("_", "."))


def _metadata_problem(metadata, classes):
    """What is wrong with a metadata JSON value (None: nothing)."""
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
    ours, sparkml_class = metadata.get("sparkml", {}), classes[metadata["class"]]
    if "class" in ours and sparkml_class is not None and ours["class"] != sparkml_class:
        return f'the "sparkml" class is {ours["class"]!r}, expected {sparkml_class!r}'
    if not isinstance(ours.get("paramMap", {}), dict):
        return '"sparkml".paramMap is not an object'
    return None


def param_values(metadata, file, spec):
    """{Param name: value as its Param converts it} of the Params ``spec`` knows: the metadata's defaults, then
    its paramMap and the "sparkml" paramMap over them. Other names are skipped (a Param a newer MLlib writes).
    A value its Param refuses, or one out of its bounds, is a ModelFileError."""
    values = {}
    ours = metadata.get("sparkml", {}).get("paramMap", {})
    for source in (metadata.get("defaultParamMap", {}), metadata["paramMap"], ours):
        for name, value in source.items():
            rule = spec.params.get(name)
            if rule is None:
                continue
            try:
                converted = rule(value)
                bound = spec.bounds.get(name)
                problem = bound(converted) if bound is not None else None
                if problem:
                    raise ValueError(problem)
            except Exception as e:
                raise ModelFileError(param_problem(file, name, value, e)) from None
            values[name] = converted
    return values


def param_problem(file, name, value, error):
    return f"{file}: Param {name!r} cannot take the value {reprlib.repr(value)} ({first_line(error)})"


# ---- the data row ------------------------------------------------------------------------------------------

SPARK_SCHEMA_KEY = b"org.apache.spark.sql.parquet.row.metadata"
UDTS = {"org.apache.spark.ml.linalg.VectorUDT": "vector", "org.apache.spark.ml.linalg.MatrixUDT": "matrix"}
_SPARK_NAMES = {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint"}


def _spark_type(t) -> str:
    """A Spark schema JSON type as Spark's ``simpleString`` names it (MLlib's UDTs: vector, matrix)."""
    if isinstance(t, str):
        return _SPARK_NAMES.get(t, t)
    if not isinstance(t, dict):
        return repr(t)
    kind = t.get("type")
    if kind == "udt":
        return UDTS.get(str(t.get("class")), f"udt({t.get('pyClass') or t.get('class')})")
    if kind == "array":
        return f"array<{_spark_type(t.get('elementType'))}>"
    if kind == "map":
        return f"map<{_spark_type(t.get('keyType'))},{_spark_type(t.get('valueType'))}>"
    if kind == "struct":
        fields = [f"{f.get('name')}:{_spark_type(f.get('type'))}" for f in t.get("fields", []) if isinstance(f, dict)]
        return f"struct<{','.join(fields)}>"
    return repr(kind)


def _arrow_type(t) -> str:
    """A pyarrow type as Spark's ``simpleString`` names the type Spark reads it as."""
    import pyarrow as pa

    simple = {
        pa.int8(): "tinyint",
        pa.int16(): "smallint",
        pa.int32(): "int",
        pa.int64(): "bigint",
        pa.float32(): "float",
        pa.float64(): "double",
        pa.bool_(): "boolean",
        pa.string(): "string",
        pa.large_string(): "string",
        pa.binary(): "binary",
    }
    if t in simple:
        return simple[t]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"array<{_arrow_type(t.value_type)}>"
    if pa.types.is_struct(t):
        return f"struct<{','.join(f'{t.field(i).name}:{_arrow_type(t.field(i).type)}' for i in range(t.num_fields))}>"
    return str(t)


def _declared_types(schema) -> dict:
    """{column: type} as Spark reads the file: its Spark schema (the key-value metadata Spark writes) where
    that parses, else the Parquet types."""
    types = {name: _arrow_type(schema.field(name).type) for name in schema.names}
    try:
        spark = json.loads((schema.metadata or {})[SPARK_SCHEMA_KEY])
        types.update({f["name"]: _spark_type(f["type"]) for f in spark["fields"] if f["name"] in types})
    except Exception:  # absent or unreadable: Spark too falls back to the Parquet schema
        pass
    return types


def parquet_row(data: bytes, file, spec) -> dict:
    """The one row of the Parquet file ``data``, checked against ``spec``: columns, types, nulls, the vectors'
    and matrices' structure and sizes (``spec.shapes``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(pa.BufferReader(data))
        schema = parquet.schema_arrow
        count = parquet.metadata.num_rows
    except Exception as e:
        raise ModelFileError(f"{file}: not a readable Parquet file ({first_line(e)})") from e
    declared = _declared_types(schema)
    columns = [(n, t) for n, t in spec.columns if n in declared or n not in spec.optional]
    for name, wanted in columns:
        if name not in declared:
            listed = ", ".join(n for n, _ in columns)
            raise ModelFileError(f"{file}: no column {name!r} (a {spec.name} has {listed})")
        if declared[name] != wanted:
            raise ModelFileError(f"{file}: column {name!r} is {declared[name]}, expected {wanted}")
        stored = _arrow_type(schema.field(name).type)
        if stored != STORED.get(wanted, wanted):
            raise ModelFileError(f"{file}: cannot read its row (column {name!r} is stored as {stored}, not {wanted})")
    if count != 1:
        raise ModelFileError(f"{file}: holds {count} rows, expected one")
    kinds = dict(columns)
    row: dict[str, Any] = {}
    try:
        table = parquet.read(columns=list(kinds)).combine_chunks()
        for name, kind in columns:
            column = table.column(name).chunk(0) if table.column(name).num_chunks else None
            if column is None or len(column) != 1:
                raise ValueError(f"column {name!r} has no value")
            row[name] = structs.from_arrow(column) if kind in STORED else column[0].as_py()
    except structs.Malformed as e:
        raise ModelFileError(f"{file}: {_misfit(name, e)}") from None
    except Exception as e:
        raise ModelFileError(f"{file}: cannot read its row ({first_line(e)})") from e
    scalars = {n: row[n] for n, t in columns if t not in STORED}
    for name, value in scalars.items():
        if value is None:
            raise ModelFileError(f"{file}: column {name!r} is null")
    for name, kind in columns:
        problem = None if row[name] is None or kind not in STORED else structs.problem(kind, row[name])
        if problem:
            raise ModelFileError(f"{file}: {_misfit(name, problem)}")
    try:
        shapes = spec.shapes(row)
    except ValueError as e:
        raise ModelFileError(f"{file}: {e}") from None
    context = ", ".join(f"{k}={v}" for k, v in scalars.items())
    sizes: dict[str, tuple[int, str]] = {}  # a named size -> (its value, the column it was read from)
    for column, shape in shapes.items():
        value = row[column]
        if value is None:
            raise ModelFileError(f"{file}: column {column!r} is null")
        found = structs.dims(kinds[column], value)
        wanted = tuple(sizes.setdefault(s, (n, column))[0] if isinstance(s, str) else s for s, n in zip(shape, found))
        if found != wanted:
            names = [f"{s}={sizes[s][0]} as in {sizes[s][1]!r}" for s in shape if isinstance(s, str)]
            raise ModelFileError(
                f"{file}: column {column!r} is {' x '.join(map(str, found))}, expected "
                f"{' x '.join(map(str, wanted))} ({', '.join(names + ([context] if context else []))})"
            )
    return row


def _misfit(column, problem):
    return f"a vector or matrix in its row has values that do not fit its size (column {column!r}: {problem})"
