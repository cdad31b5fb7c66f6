"""Training data for jobs: parquet / csv / libsvm readers, feature assembly, synthetic demo sets.

`generated:binary|regression|multiclass` build a seeded numpy problem and hand it to Spark as a
DataFrame with a dense `features` VectorUDT column and a double `label`, so demos need no download.
"""

import hashlib

import numpy as np

from sparkml.jobs.config import ConfigError

GENERATED_FEATURES_COL = "features"


def window_seed(window):
    """A seed derived from a window id (stable across processes, unlike hash())."""
    return int.from_bytes(hashlib.sha256(str(window).encode()).digest()[:8], "little")


def generate_arrays(kind, rows, features, classes=3, seed=0, window=None):
    """Seeded synthetic problem as (X float64 [rows, features], y float64 [rows]).

    binary: labels of a noisy linear score (nearly separable, Bayes AUC about 0.99);
    regression: a linear target plus Gaussian noise (R^2 about 0.97);
    multiclass: argmax of `classes` linear scores plus Gumbel noise (a multinomial logit).
    With a `window` id the true model still comes from `seed`, while the rows and the noise come from
    the window: each window is a new sample of the same problem, as in a scheduled retraining.
    """
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, features))
    noise = rng
    if window is not None:  # the model's draws below stay those of `seed` alone
        noise = np.random.default_rng([seed, window_seed(window)])
        X = noise.standard_normal((rows, features))
    if kind == "binary":
        w = rng.standard_normal(features) * (2.0 / np.sqrt(features))
        y = (X @ w + 0.25 + 0.3 * noise.standard_normal(rows) > 0).astype(np.float64)
    elif kind == "regression":
        w = rng.standard_normal(features)
        y = X @ w + 1.5 + np.sqrt(features) * 0.2 * noise.standard_normal(rows)
    elif kind == "multiclass":
        W = rng.standard_normal((features, classes)) * (3.0 / np.sqrt(features))
        y = np.argmax(X @ W + noise.gumbel(size=(rows, classes)), axis=1).astype(np.float64)
    else:
        raise ConfigError("data.train", f"unknown generated dataset {kind!r}")
    return X, y


def generate(spark, kind, rows, features, classes=3, seed=0, window=None):
    """`generate_arrays` as a Spark DataFrame (features: VectorUDT, label: double), via Arrow."""
    import pyarrow as pa
    from pyspark.ml.functions import array_to_vector
    from pyspark.sql import functions as F

    from sparkml.runtime.compat import from_arrow

    X, y = generate_arrays(kind, rows, features, classes, seed, window)
    table = pa.table(
        {
            GENERATED_FEATURES_COL: pa.FixedSizeListArray.from_arrays(pa.array(X.ravel()), features),
            "label": pa.array(y),
        }
    )
    df = from_arrow(spark, table)
    return df.withColumn(GENERATED_FEATURES_COL, array_to_vector(F.col(GENERATED_FEATURES_COL)))


def read(spark, path, fmt, options=None, key="data.train"):
    """Read one input: parquet (file or directory), csv (header, inferSchema) or libsvm."""
    reader = spark.read
    if fmt == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    for name, value in (options or {}).items():
        reader = reader.option(name, str(value).lower() if isinstance(value, bool) else str(value))
    try:
        return reader.format(fmt).load(path)
    except Exception as e:  # AnalysisException for a missing path; keep the first line only
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if "PATH_NOT_FOUND" in first or "does not exist" in first:
            raise ConfigError(key, f"no such input: {path}") from None
        raise


def require_columns(df, columns, key, path):
    """ConfigError naming `key` and the first of `columns` missing from `df` (read from `path`)."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ConfigError(key, f"column {missing[0]!r} not found in {path} (columns: {', '.join(df.columns)})")


def feature_width(df, col):
    """The vector size of `col`: from its ML attributes when Spark knows it, else the first non-null row
    (None for an input without rows)."""
    attrs = df.schema[col].metadata.get("ml_attr", {})
    if attrs.get("num_attrs") is not None:
        return int(attrs["num_attrs"])
    row = df.where(df[col].isNotNull()).select(col).first()
    return None if row is None else row[0].size


def prepare(df, data, path):
    """Check the configured columns exist and assemble `data.features` into one vector column.

    Returns (df, features_col). A string `features` names an existing vector column; a list is
    assembled with VectorAssembler (handleInvalid='error': nulls fail loudly, never dropped).
    """
    from pyspark.ml.feature import VectorAssembler

    features = data["features"]
    require_columns(df, [data["label"]], "data.label", path)
    if data["weight"] is not None:
        require_columns(df, [data["weight"]], "data.weight", path)
    if not isinstance(features, list):
        col = features or GENERATED_FEATURES_COL
        require_columns(df, [col], "data.features", path)
        return df, col
    require_columns(df, features, "data.features", path)
    out = "features" if "features" not in df.columns else "features_assembled"
    assembler = VectorAssembler(inputCols=features, outputCol=out, handleInvalid="error")
    return assembler.transform(df), out


WINDOW_PLACEHOLDER = "{window}"


def window_source(path, window):
    """`path` with ``{window}`` replaced by the window id (None when the path has no placeholder)."""
    return path.replace(WINDOW_PLACEHOLDER, str(window)) if WINDOW_PLACEHOLDER in path else None


def _read_window(spark, data, window):
    """One window of `data.train`: the path with ``{window}`` filled in, a generated sample for the
    window, or the rows whose `data.window_column` equals the id (a partition ``window=<id>`` of a
    Parquet dataset is pruned by Spark, not scanned)."""
    from pyspark.sql import functions as F

    source = data["train"]
    path = window_source(source, window)
    if path is not None:
        return read(spark, path, data["format"], data["options"]), path
    if source.startswith("generated:"):
        gen = data["generated"]
        return generate(
            spark, source.split(":", 1)[1], gen["rows"], gen["features"], gen["classes"], gen["seed"], window
        ), f"{source} window {window}"
    df = read(spark, source, data["format"], data["options"])
    column = data["window_column"]
    require_columns(df, [column], "data.window_column", source)
    return df.where(F.col(column).cast("string") == str(window)), f"{source} ({column} = {window})"


def load(spark, data, window=None):
    """Read and prepare train (and test, if configured) for a validated `data` section; with `window`,
    only that window of the training data (`_read_window`).

    Returns (train, test_or_None, features_col); without `data.test` the caller splits off a holdout.
    """
    source = data["train"]
    if window is not None:
        train, source = _read_window(spark, data, window)
    elif source.startswith("generated:"):
        gen = data["generated"]
        train = generate(spark, source.split(":", 1)[1], gen["rows"], gen["features"], gen["classes"], gen["seed"])
    else:
        train = read(spark, source, data["format"], data["options"])
    train, features_col = prepare(train, data, source)
    test = None
    if data["test"] is not None:
        options = dict(data["options"])
        if data["format"] == "libsvm" and "numFeatures" not in options:
            # libsvm infers the width per file; the test set must match the training width.
            options["numFeatures"] = train.schema["features"].metadata.get("numFeatures")
        options = {k: v for k, v in options.items() if v is not None}
        test_path = (window_source(data["test"], window) if window is not None else None) or data["test"]
        test, _ = prepare(read(spark, test_path, data["format"], options, "data.test"), data, test_path)
    return train, test, features_col


def split(df, holdout_fraction, seed):
    """Random (train, holdout) split, reproducible for a given seed and input partitioning."""
    train, holdout = df.randomSplit([1.0 - holdout_fraction, holdout_fraction], seed=seed)
    return train, holdout


def fingerprint(df):
    """sha256 of a DataFrame's schema, row count and the sum of its rows' 64-bit hashes (Spark's
    xxhash64 over every column): the same rows in any order and partitioning give the same value."""
    from pyspark.sql import functions as F

    row = df.select(
        F.count(F.lit(1)).alias("n"), F.sum(F.xxhash64(*df.columns).cast("decimal(38,0)")).alias("h")
    ).first()
    text = f"{df.schema.simpleString()}|{row['n']}|{row['h']}"
    return hashlib.sha256(text.encode()).hexdigest()
