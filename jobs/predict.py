"""Score a dataset with a registered model and write the predictions as Parquet.

    python -m sparkml.jobs.predict --model models:/<name>@champion --input data.parquet --output scores \\
        --id-cols id --tracking-uri sqlite:///runs/mlflow.db
    spark-submit jobs/predict.py --model models:/<name>/3 --input hdfs:///in --output hdfs:///out ...

Steps: check the arguments and the output path (before Spark starts) -> look the version up in the
registry (`jobs.models`) -> session -> load the model -> read the input, check the id columns and the
features' width against the model -> ``model.transform`` -> write into a staging directory beside the
output and rename it into place. The output holds the id columns (every input column without
``--id-cols``), the prediction columns exactly as ``model.transform`` gives them (vectors stay
vectors) and ``model_name``, ``model_version``: one row per input row.

The registry is ``--tracking-uri``, else ``$MLFLOW_TRACKING_URI``; there is no default, because a
fresh store beside the output would hold no models. Errors in the arguments or the data print one
line ("config error: <key>: <problem>") and exit 2, with nothing written.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

if __package__ in (None, ""):  # run as a file (spark-submit jobs/predict.py) from a source checkout
    _checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.isfile(os.path.join(_checkout, "sparkml", "__init__.py")):
        sys.path.insert(0, _checkout)  # sparkml.jobs: this folder, through the link sparkml/jobs

from sparkml.jobs import datasets, errors, models, outputs, session, tracking
from sparkml.jobs.config import FORMATS, ConfigError, is_local_path, plain_name
from sparkml.runtime.cancellation import FitCancelled

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_FEATURES = "features"
NAME_COL, VERSION_COL = "model_name", "model_version"
OVERWRITE_KEY, OVERWRITE_HINT = "--output", "pass --overwrite to replace it"
SPARK = {"master": "local[2]", "app_name": "sparkml-predict", "conf": {"spark.ui.showConsoleProgress": "false"}}


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="sparkml.jobs.predict", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="models:/<name>@<alias> or models:/<name>/<version>")
    p.add_argument("--input", required=True, help="file, directory or URI to score")
    p.add_argument("--output", required=True, help="Parquet directory to write (a local path or a URI)")
    p.add_argument("--format", default="parquet", choices=FORMATS, help="input format (default: %(default)s)")
    p.add_argument(
        "--id-cols", help="comma-separated input columns to carry into the output (default: every input column)"
    )
    p.add_argument(
        "--features",
        default=DEFAULT_FEATURES,
        help="a vector column, or comma-separated numeric columns to assemble (default: %(default)s)",
    )
    p.add_argument("--tracking-uri", help=f"MLflow tracking URI of the registry (default: ${tracking.ENV_URI})")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    p.add_argument(
        "--flavor",
        default="sparkml",
        choices=models.FLAVORS,
        help="load as this library's model or as the stock pyspark.ml one (default: %(default)s)",
    )
    return p.parse_args(argv)


def column_list(text, key):
    """Comma-separated column names as a list (None stays None); ConfigError for an empty name."""
    if text is None:
        return None
    names = [c.strip() for c in text.split(",")]
    if not all(names):
        raise ConfigError(key, f"expected comma-separated column names, got {text!r}")
    return names


def tracking_uri(arg, env=None):
    """(uri, key that chose it): ``--tracking-uri``, else ``$MLFLOW_TRACKING_URI``; a missing sqlite file
    is an error here, not a new empty store."""
    env = os.environ if env is None else env
    if arg is not None and arg.strip():
        uri, key = arg.strip(), "--tracking-uri"
    elif env.get(tracking.ENV_URI, "").strip():
        uri, key = env[tracking.ENV_URI].strip(), tracking.ENV_URI
    else:
        raise ConfigError(
            "--tracking-uri", f"no registry to read the model from: pass --tracking-uri or set ${tracking.ENV_URI}"
        )
    db = tracking._sqlite_file(uri)
    if db is not None and not os.path.isfile(db):
        raise ConfigError(key, f"no MLflow store at {db}")
    return uri, key


def split_output(path):
    """(parent, name) of the output path: staging happens in the parent, beside the target."""
    given, path = path, path.rstrip("/")
    if is_local_path(path):
        if not path or "\0" in path:
            raise ConfigError("--output", f"expected a directory to write, got {given!r}")
        path = os.path.abspath(path)
        return os.path.dirname(path), os.path.basename(path)
    parent, _, name = path.rpartition("/")
    if not name or not parent or parent.endswith(":"):
        raise ConfigError("--output", f"expected a directory URI such as hdfs://host/scores, got {path!r}")
    return parent, name


def parse_model(uri):
    """(name, alias, version) of --model; ConfigError for anything but models:/<name>@<alias> or /<version>
    with plain names (`jobs.names`)."""
    try:
        name, alias, version = models.parse_model_uri(uri)
    except ValueError as e:
        raise ConfigError("--model", str(e)) from None
    plain_name("--model", name, "a registered model name")
    if alias is not None:
        plain_name("--model", alias, "an alias")
    return name, alias, version


def lookup(client, uri, store_key):
    """The ModelVersion of `uri`; ConfigError on --model for an unknown model / alias / version."""
    name, alias, number = parse_model(uri)
    try:
        return models.resolve_version(client, name, alias, number)
    except models.ModelError as e:
        raise ConfigError("--model", str(e)) from None
    except Exception as e:  # MlflowException, sqlalchemy, connection errors: the store, not the model
        text = " ".join(str(e).split())
        raise ConfigError(store_key, f"cannot read the registry: {type(e).__name__}: {text[:400]}") from None


def read_input(spark, path, fmt, num_features):
    """The input DataFrame. libsvm infers its width from the file: a file that never mentions the last
    features is read at the model's width; one wider than the model is a --features error."""
    df = datasets.read(spark, path, fmt, key="--input")
    if fmt != "libsvm":
        return df
    width = df.schema[DEFAULT_FEATURES].metadata.get("numFeatures")
    if width is not None and width > num_features:
        raise ConfigError("--features", f"{path} has {width} features, the model takes {num_features}")
    return datasets.read(spark, path, fmt, {"numFeatures": num_features}, key="--input")


def features_column(df, names, path):
    """(df, vector column): one vector column as it is, else the columns assembled (nulls fail loudly)."""
    from pyspark.ml.feature import VectorAssembler
    from pyspark.ml.linalg import VectorUDT

    datasets.require_columns(df, names, "--features", path)
    if len(names) == 1 and isinstance(df.schema[names[0]].dataType, VectorUDT):
        return df, names[0]
    out = "features"
    while out in df.columns:
        out = "_" + out
    return VectorAssembler(inputCols=names, outputCol=out, handleInvalid="error").transform(df), out


def output_columns(model):
    """The columns `model.transform` adds (those of its prediction Params that are set to a name)."""
    params = ("rawPredictionCol", "probabilityCol", "predictionCol")
    return [model.getOrDefault(p) for p in params if model.hasParam(p) and model.getOrDefault(p)]


def score(model, df, features_col, keep, version):
    """The output DataFrame: `keep` columns, transform's new columns in its order, model_name/version."""
    from pyspark.sql import functions as F

    taken = set(keep) & (set(output_columns(model)) | {NAME_COL, VERSION_COL})
    if taken:
        raise ConfigError(
            "--id-cols",
            f"input column {sorted(taken)[0]!r} clashes with the output column of that name: list --id-cols without it",
        )
    model.setFeaturesCol(features_col)
    scored = model.transform(df)
    added = [c for c in scored.columns if c not in df.columns]
    number = int(version.version) if str(version.version).isdigit() else str(version.version)
    return scored.select(*keep, *added, F.lit(version.name).alias(NAME_COL), F.lit(number).alias(VERSION_COL))


def prepare(spark, args, model):
    """Read the input and check it against the model: (df, features column, columns to keep)."""
    df = read_input(spark, args.input, args.format, model.numFeatures)
    ids = column_list(args.id_cols, "--id-cols")
    if ids is not None:
        datasets.require_columns(df, ids, "--id-cols", args.input)
    keep = ids if ids is not None else list(df.columns)
    df, col = features_column(df, column_list(args.features, "--features"), args.input)
    width = datasets.feature_width(df, col)
    if width is not None and width != model.numFeatures:
        raise ConfigError(
            "--features", f"{col} holds vectors of size {width}, the model takes {model.numFeatures} features"
        )
    return df, col, keep


def run(args, spark, client, version):
    """Load, score and publish; return {"rows", "name", "version", "output"}."""
    parent, name = split_output(args.output)
    store = outputs.store_for(args.output, spark)
    outputs.refuse_overwrite(store, parent, args.overwrite, name, OVERWRITE_KEY, OVERWRITE_HINT)
    session.ship_packages(spark)
    try:
        model = models.load_version(client, version, spark, args.flavor)
    except models.ModelError as e:
        raise ConfigError("--model", str(e)) from None
    df, col, keep = prepare(spark, args, model)
    scored = score(model, df, col, keep, version)
    created = not store.exists(parent)
    staging = outputs.Staging(store, parent)
    published = False
    try:
        scored.write.parquet(staging.path(name))
        rows = spark.read.parquet(staging.path(name)).count()
        staging.publish([name], args.overwrite)
        published = True
    finally:
        staging.cleanup()
        if created and not published:
            store.remove(parent)
    return {"rows": rows, "name": version.name, "version": version.version, "output": store.join(parent, name)}


def main(argv: Sequence[str] | None = None, spark: SparkSession | None = None) -> int:
    """Command-line entry point; returns the exit code (0 ok, 2 config error). `spark`: a session to use."""
    args = parse_args(argv)
    t0 = time.perf_counter()
    try:
        column_list(args.id_cols, "--id-cols")
        column_list(args.features, "--features")
        parse_model(args.model)
        if is_local_path(args.output):  # fail before Spark starts when we can
            parent, name = split_output(args.output)
            outputs.check_local_dir(parent, OVERWRITE_KEY)
            outputs.refuse_overwrite(outputs.LocalStore(), parent, args.overwrite, name, OVERWRITE_KEY, OVERWRITE_HINT)
        uri, key = tracking_uri(args.tracking_uri)
        client = tracking.require_mlflow().MlflowClient(tracking_uri=uri)
        version = lookup(client, args.model, key)
        result = session.run_with(SPARK, spark, lambda s: run(args, s, client, version))
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, FitCancelled) as e:
        return errors.report_cancelled("sparkml-predict", e)
    print(
        f"scored {result['rows']:,} rows with {result['name']} version {result['version']} in "
        f"{time.perf_counter() - t0:.1f} s -> {result['output']}"
    )
    return 0


cli = errors.entry_point(main)

if __name__ == "__main__":  # spark-submit jobs/<name>.py: the console entry point's exit codes and quiet Ctrl-C
    cli()
