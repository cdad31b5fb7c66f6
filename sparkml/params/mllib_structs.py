"""MLlib's vectors and matrices as Spark stores them in Parquet (their UDTs' struct) and as MLlib's JSON writes
them (Vector and Matrix Params), without pyspark: read into dicts whose arrays are numpy arrays, checked for
being well formed, and turned into dense arrays. ``sparkml.saved.model_files`` checks saved models' rows and Params
with these."""

from __future__ import annotations

import numpy as np

# how Spark stores MLlib's vectors and matrices (their UDTs' sqlType)
STORED = {
    "vector": "struct<type:tinyint,size:int,indices:array<int>,values:array<double>>",
    "matrix": "struct<type:tinyint,numRows:int,numCols:int,colPtrs:array<int>,rowIndices:array<int>,"
    "values:array<double>,isTransposed:boolean>",
}
ARRAYS = {"indices": np.int64, "colPtrs": np.int64, "rowIndices": np.int64, "values": np.float64}
DENSE_LIMIT = 2**31 - 1  # the most values MLlib's dense vectors and matrices hold


class Malformed(ValueError):
    """A vector or matrix whose parts do not fit together."""


def from_arrow(struct) -> dict | None:
    """A vector or matrix struct of a one-row pyarrow StructArray as a dict, its lists numpy arrays (None: a
    null list). Malformed when a list holds nulls."""
    if struct.null_count:
        return None
    out = {}
    for i in range(struct.type.num_fields):
        name, child = struct.type.field(i).name, struct.field(i)
        if name not in ARRAYS:
            out[name] = child[0].as_py()
        elif child.null_count:
            out[name] = None
        else:
            flat = child.flatten()
            if flat.null_count:
                raise Malformed(f"its {name} hold nulls")
            out[name] = flat.to_numpy(zero_copy_only=False).astype(ARRAYS[name], copy=False)
    return out


def from_json(value: dict, parse) -> dict:
    """A vector or matrix as MLlib's JSON writes it, its lists numpy arrays (``parse(values)``: the floats)."""
    out = dict(value)
    for name in ("indices", "colPtrs", "rowIndices"):
        if out.get(name) is not None:
            if not isinstance(out[name], list) or not all(type(v) is int for v in out[name]):
                raise Malformed(f"its {name} are not integers")
            out[name] = np.asarray(out[name], dtype=np.int64)
    out["values"] = np.asarray(parse(out.get("values")), dtype=np.float64)
    return out


def dims(kind, value) -> tuple:
    """(size,) of a vector, (numRows, numCols) of a matrix."""
    if kind == "matrix":
        return (value["numRows"], value["numCols"])
    return (len(value["values"]),) if value["type"] == 1 else (value["size"],)


def _int(value) -> bool:
    return type(value) is int and 0 <= value <= DENSE_LIMIT


def _out_of_range(index, below) -> str | None:
    bad = index[(index < 0) | (index >= below)]
    return f"index {int(bad[0])} is out of range for a size of {below}" if len(bad) else None


def problem(kind, v) -> str | None:
    """What is wrong with a vector or matrix dict (None: nothing)."""
    if v.get("type") not in (0, 1):
        return f"its type is {v.get('type')!r}, expected 0 (sparse) or 1 (dense)"
    values = v.get("values")
    if not isinstance(values, np.ndarray) or values.ndim != 1:
        return "it has no values"
    if kind == "vector":
        if v["type"] == 1:
            return None
        size, index = v.get("size"), v.get("indices")
        if not _int(size):
            return f"a sparse vector of size {size!r}"
        if index is None or len(index) != len(values):
            return "a sparse vector whose indices and values differ in length"
        if (np.diff(index) <= 0).any():
            return _out_of_range(index, size) or "a sparse vector whose indices are not increasing"
        return _out_of_range(index, size)
    rows, cols, transposed = v.get("numRows"), v.get("numCols"), v.get("isTransposed")
    if not (_int(rows) and _int(cols)) or rows * cols > DENSE_LIMIT:
        return f"a matrix of {rows!r} x {cols!r}"
    if type(transposed) is not bool:
        return "isTransposed is not a boolean"
    if v["type"] == 1:
        return None if len(values) == rows * cols else f"{len(values)} values for {rows} x {cols}"
    major, minor = (rows, cols) if transposed else (cols, rows)
    ptrs, index = v.get("colPtrs"), v.get("rowIndices")
    if ptrs is None or len(ptrs) != major + 1 or ptrs[0] != 0 or ptrs[-1] != len(values) or (np.diff(ptrs) < 0).any():
        return "a sparse matrix whose colPtrs do not delimit its values"
    if index is None or len(index) != len(values):
        return "a sparse matrix whose rowIndices and values differ in length"
    return _out_of_range(index, minor)


def vector_array(v) -> np.ndarray:
    """A checked vector as a float64 array."""
    if v["type"] == 1:
        return v["values"]
    out = np.zeros(int(v["size"]))
    out[v["indices"]] = v["values"]
    return out


def matrix_array(m) -> np.ndarray:
    """A checked matrix (dense column-major, or transposed; sparse CSC, or CSR) as a 2-D float64 array."""
    rows, cols, values = int(m["numRows"]), int(m["numCols"]), m["values"]
    if m["type"] == 1:
        return values.reshape((rows, cols)) if m["isTransposed"] else values.reshape((cols, rows)).T
    ptrs = m["colPtrs"]
    major = np.repeat(np.arange(len(ptrs) - 1), np.diff(ptrs))
    out = np.zeros((rows, cols))
    if m["isTransposed"]:  # CSR: colPtrs are row pointers
        out[major, m["rowIndices"]] = values
    else:
        out[m["rowIndices"], major] = values
    return out
