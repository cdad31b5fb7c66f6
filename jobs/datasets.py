"""Training data for jobs: parquet / csv / libsvm readers, feature assembly, synthetic demo sets.

`generated:binary|regression|multiclass` build a seeded numpy problem and hand it to Spark as a
DataFrame with a dense `features` VectorUDT column and a double `label`, so demos need no download.
"""
import numpy as np

from sparkml.jobs.config import ConfigError

GENERATED_FEATURES_COL = "features"


def generate_arrays(kind, rows, features, classes=3, seed=0):
    """Seeded synthetic problem as (X float64 [rows, features], y float64 [rows]).

    binary: labels of a noisy linear score (nearly separable, Bayes AUC about 0.99);
    regression: a linear target plus Gaussian noise (R^2 about 0.97);
    multiclass: argmax of `classes` linear scores plus Gumbel noise (a multinomial logit).
    """
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((rows, features))
    if kind == "binary":
        w = rng.standard_normal(features) * (2.0 / np.sqrt(features))
        y = (X @ w + 0.25 + 0.3 * rng.standard_normal(rows) > 0).astype(np.float64)
    elif kind == "regression":
        w = rng.standard_normal(features)
        y = X @ w + 1.5 + np.sqrt(features) * 0.2 * rng.standard_normal(rows)
    elif kind == "multiclass":
        W = rng.standard_normal((features, classes)) * (3.0 / np.sqrt(features))
        y = np.argmax(X @ W + rng.gumbel(size=(rows, classes)), axis=1).astype(np.float64)
    else:
        raise ConfigError("data.train", f"unknown generated dataset {kind!r}")
    return X, y


def generate(spark, kind, rows, features, classes=3, seed=0):
    """`generate_arrays` as a Spark DataFrame (features: VectorUDT, label: double), via Arrow."""
    import pyarrow as pa
    from pyspark.ml.functions import array_to_vector

    X, y = generate_arrays(kind, rows, features, classes, seed)
    table = pa.table({
        GENERATED_FEATURES_COL: pa.FixedSizeListArray.from_arrays(pa.array(X.ravel()), features),
        "label": pa.array(y),
    })
    df = spark.createDataFrame(table)
    return df.withColumn(GENERATED_FEATURES_COL, array_to_vector(GENERATED_FEATURES_COL))


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


def _require_columns(df, columns, key, path):
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ConfigError(key, f"column {missing[0]!r} not found in {path} (columns: {', '.join(df.columns)})")


def prepare(df, data, path):
    """Check the configured columns exist and assemble `data.features` into one vector column.

    Returns (df, features_col). A string `features` names an existing vector column; a list is
    assembled with VectorAssembler (handleInvalid='error': nulls fail loudly, never dropped).
    """
    from pyspark.ml.feature import VectorAssembler

    features = data["features"]
    _require_columns(df, [data["label"]], "data.label", path)
    if data["weight"] is not None:
        _require_columns(df, [data["weight"]], "data.weight", path)
    if not isinstance(features, list):
        col = features or GENERATED_FEATURES_COL
        _require_columns(df, [col], "data.features", path)
        return df, col
    _require_columns(df, features, "data.features", path)
    out = "features" if "features" not in df.columns else "features_assembled"
    assembler = VectorAssembler(inputCols=features, outputCol=out, handleInvalid="error")
    return assembler.transform(df), out


def load(spark, data):
    """Read and prepare train (and test, if configured) for a validated `data` section.

    Returns (train, test_or_None, features_col); without `data.test` the caller splits off a holdout.
    """
    source = data["train"]
    if source.startswith("generated:"):
        gen = data["generated"]
        train = generate(spark, source.split(":", 1)[1], gen["rows"], gen["features"],
                         gen["classes"], gen["seed"])
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
        test, _ = prepare(read(spark, data["test"], data["format"], options, "data.test"), data, data["test"])
    return train, test, features_col


def split(df, holdout_fraction, seed):
    """Random (train, holdout) split, reproducible for a given seed and input partitioning."""
    train, holdout = df.randomSplit([1.0 - holdout_fraction, holdout_fraction], seed=seed)
    return train, holdout
