"""Models in the MLflow Model Registry, loaded back as this library's models or as stock pyspark.ml ones.

The registry convention (what `jobs.retrain` registers and what this module reads):

- a registered model ``<name>``; each version's ``source`` is ``runs:/<run_id>/model``, the artifact
  directory that the training run logged: an MLflow model (``MLmodel``, a ``python_function`` flavor whose
  loader module is ``sparkml.serving``, so ``mlflow models serve -m models:/<name>/<version>`` serves it
  without Spark) holding under ``data/model`` the files ``model.save(path)`` writes, MLlib's own layout
  (``metadata/part-*``, one JSON line whose ``"class"`` names the model, and ``data/``, Parquet). Versions
  registered before the flavor are those files alone; both load;
- version tag ``sparkml.estimator``: the estimator's class; alias ``champion``: the version in service.

There is no pickle. MLlib's files are data (JSON and Parquet): loading them runs no code that came with the
files, whereas unpickling runs whatever the pickle names. The class to load with comes from a fixed table
(`sparkml.catalog`) keyed by the metadata's ``"class"``; a class name read from a file is never imported, and
one the table lacks is an error. The
same files load with ``flavor="sparkml"`` (this library's model, KernelSVC included) or ``flavor="pyspark"``
(the stock pyspark.ml model, for the linear models, which MLlib has a twin of).

MLlib's loaders read through Spark. A driver-local download directory is readable when the master is
``local``/``local[n]``; on a cluster the files are copied first to a directory under
``$SPARKML_TEMP_DFS_PATH`` (the setting ``toSpark`` uses in Spark Connect), through the Hadoop FileSystem.
A Spark Connect client copies them there with plain file operations (a directory the server also
mounts) or, without the setting, leaves them in the local download directory (a server on this machine).

mlflow is imported lazily (the ``jobs`` extra).
"""

import contextlib
import glob
import json
import os
import pathlib
import re
import shutil
import tempfile
import uuid

from sparkml import catalog
from sparkml.jobs.config import is_local_path

ALIAS = "champion"  # the alias of the version in service
ARTIFACT_PATH = "model"  # a version's source: runs:/<run_id>/<ARTIFACT_PATH>
TEMP_DFS_ENV = "SPARKML_TEMP_DFS_PATH"
FLAVORS = ("sparkml", "pyspark")


_URI = re.compile(r"models:/(?P<name>[^/@]+)(?:@(?P<alias>[^/@]+)|/(?P<version>[^/@]+))")


class ModelError(ValueError):
    """A registry entry or model directory that cannot be loaded (the text names what and where)."""


def parse_model_uri(text):
    """(name, alias or None, version or None) of ``models:/<name>@<alias>`` or ``models:/<name>/<version>``."""
    m = _URI.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"expected models:/<name>@<alias> or models:/<name>/<version>, got {text!r}")
    version = m.group("version")
    if version is not None and not version.isdigit():
        raise ValueError(
            f"{text!r}: the version must be a number (stages such as {version!r} are not "
            f"supported; use an alias, e.g. models:/{m.group('name')}@{ALIAS})"
        )
    return m.group("name"), m.group("alias"), None if version is None else int(version)


def _missing(e):
    """True for MLflow's answer to a lookup of something that is not there."""
    return getattr(e, "error_code", None) in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE")


def resolve_version(client, name, alias=None, version=None):
    """The ModelVersion of `name` that `alias` points at, or version number `version` (exactly one of them).

    An unknown model, alias or version is a ModelError naming it (and the aliases or versions there are);
    other failures (a store that cannot be read) propagate.
    """
    from mlflow.exceptions import MlflowException

    if (alias is None) == (version is None):
        raise ValueError("give exactly one of alias and version")
    try:
        registered = client.get_registered_model(name)
    except MlflowException as e:
        if _missing(e):
            raise ModelError(f"no registered model named {name!r}") from None
        raise
    try:
        if alias is not None:
            found = client.get_model_version_by_alias(name, alias)
        else:
            found = client.get_model_version(name, str(version))
    except MlflowException as e:
        if not _missing(e):
            raise
        if alias is not None:
            known = ", ".join(sorted(registered.aliases or {})) or "none"
            raise ModelError(f"model {name!r} has no alias {alias!r} (aliases: {known})") from None
        raise ModelError(f"model {name!r} has no version {version}") from None
    if found.status != "READY":
        raise ModelError(f"version {found.version} of model {name!r} is {found.status}, not READY")
    return found


def mllib_dir(model_dir):
    """Where a model directory's MLlib files are: ``data/model`` of an MLflow model (an ``MLmodel`` file, as
    the jobs log them), else the directory itself."""
    if os.path.isfile(os.path.join(model_dir, "MLmodel")):
        return os.path.join(model_dir, "data", "model")
    return model_dir


def read_metadata(model_dir):
    """The metadata JSON of an MLlib model directory (``metadata/part-*``, first line)."""
    model_dir = mllib_dir(model_dir)
    parts = sorted(p for p in glob.glob(os.path.join(model_dir, "metadata", "part-*")) if os.path.isfile(p))
    if not parts:
        raise ModelError(f"{model_dir} is not an MLlib model directory: no metadata/part-* file")
    with open(parts[0], encoding="utf-8") as f:
        line = f.readline()
    try:
        metadata = json.loads(line)
    except ValueError as e:
        raise ModelError(f"{parts[0]}: not MLlib model metadata ({e})") from None
    if not isinstance(metadata, dict) or not isinstance(metadata.get("class"), str):
        raise ModelError(f'{parts[0]}: not MLlib model metadata (no "class" field)')
    metadata["_file"] = parts[0]
    return metadata


def model_class(metadata, flavor="sparkml"):
    """The class that loads a model directory with this metadata, looked up in ``sparkml.catalog`` by the
    metadata's ``class`` (a fixed table in the code: never extended from a file)."""
    if flavor not in FLAVORS:
        raise ValueError(f"flavor: expected one of {', '.join(FLAVORS)}, got {flavor!r}")
    known = catalog.by_saved_class()
    entry = known.get(metadata["class"])
    if entry is None:
        raise ModelError(
            f"{metadata['_file']}: class {metadata['class']!r} is not a model this library loads "
            f"(known: {', '.join(sorted(known))})"
        )
    target = entry.model_path() if flavor == "sparkml" else entry.stock_model
    if target is None:
        raise ModelError(
            f"{metadata['class']} has no stock pyspark.ml twin (MLlib has no such model): load it with flavor 'sparkml'"
        )
    return catalog.import_path(target)


def load_dir(model_dir, flavor="sparkml", spark=None):
    """Load a local MLlib model directory (ours or stock, by `flavor`), readable where `spark` runs, everything
    read before returning (the directory, or its copy, may go). This library's loader checks every file first
    (``sparkml.base.persistence.ModelFiles``); what it refuses is a ModelError naming the file under `model_dir`."""
    from sparkml.base.persistence import ModelFileError

    cls = model_class(read_metadata(model_dir), flavor)
    model_dir = mllib_dir(model_dir)
    with readable_copy(model_dir, spark) as path:
        try:
            model = cls.load(path)
            read_fully = getattr(model, "_read_fully", None)
            if read_fully is not None:  # what a model reads lazily (a mixed model's tables): the copy goes below
                read_fully()
            return model
        except ModelFileError as e:
            raise ModelError(str(e).replace(path.removeprefix("file:"), model_dir)) from None


def placement(spark, env=None):
    """How Spark reads a driver-local model directory: ``("local", None)`` as it is (local master;
    Spark Connect without ``$SPARKML_TEMP_DFS_PATH``), ``("hadoop", root)`` copied under `root` through
    the Hadoop FileSystem (classic session, cluster master), ``("copy", root)`` copied under `root` with
    file operations (Spark Connect, a directory the server mounts). ModelError when a copy is needed and
    impossible."""
    from sparkml.runtime.session_kind import is_connect

    env = os.environ if env is None else env
    root = env.get(TEMP_DFS_ENV, "").strip() or None
    if spark is not None and is_connect(spark):
        if root is None:
            return "local", None
        if not is_local_path(root) and not root.startswith("file:"):
            raise ModelError(
                f"${TEMP_DFS_ENV}={root}: a Spark Connect client cannot copy a model there; "
                "set it to a directory this machine and the server both mount"
            )
        return "copy", root
    master = spark.sparkContext.master if spark is not None else "local"
    if master == "local" or master.startswith("local["):
        return "local", None
    if root is None:
        raise ModelError(
            f"master {master} cannot read this machine's download directory: set "
            f"${TEMP_DFS_ENV} to a directory every node reads (e.g. hdfs:///tmp/sparkml)"
        )
    return "hadoop", root


@contextlib.contextmanager
def readable_copy(local_dir, spark, env=None):
    """A path Spark can read `local_dir` at (see `placement`); a copy made for it is deleted afterwards."""
    kind, root = placement(spark, env)
    if kind == "local":
        yield local_dir
        return
    target = root.rstrip("/") + f"/sparkml-model-{uuid.uuid4().hex[:12]}"
    if kind == "copy":
        plain = target[len("file:") :] if target.startswith("file:") else target
        try:
            shutil.copytree(local_dir, plain)
            yield target
        finally:
            shutil.rmtree(plain, ignore_errors=True)
        return
    sc = spark.sparkContext
    path = sc._jvm.org.apache.hadoop.fs.Path
    fs = path(target).getFileSystem(sc._jsc.hadoopConfiguration())
    try:
        fs.copyFromLocalFile(False, True, path(pathlib.Path(local_dir).resolve().as_uri()), path(target))
        yield target
    finally:
        fs.delete(path(target), True)


def download(client, version, dst):
    """Download a version's model directory into `dst`; return its local path."""
    source = version.source
    if source.startswith("runs:/"):
        run_id, _, artifact_path = source[len("runs:/") :].partition("/")
        return client.download_artifacts(run_id, artifact_path, dst)
    import mlflow.artifacts

    return mlflow.artifacts.download_artifacts(artifact_uri=source, dst_path=dst)


def load_version(client, version, spark, flavor="sparkml"):
    """The model of a registered `version` (a ModelVersion): this library's class, or with
    ``flavor="pyspark"`` the stock pyspark.ml one (linear models only). Loading reads everything; the
    downloaded files are deleted before returning."""
    tmp = tempfile.mkdtemp(prefix="sparkml-registry-")
    try:
        model_dir = download(client, version, tmp)
        try:
            return load_dir(model_dir, flavor, spark)
        except ModelError as e:  # name the files as the artifact store holds them, not the download
            raise ModelError(
                f"version {version.version} of model {version.name!r}: "
                f"{str(e).replace(model_dir, version.source.rstrip('/'))}"
            ) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load(uri, spark, flavor="sparkml", tracking_uri=None):
    """(model, ModelVersion) of a ``models:/<name>@<alias>`` or ``models:/<name>/<version>`` URI.

    `tracking_uri`: the store (None: MLflow's default, ``$MLFLOW_TRACKING_URI``); the registry follows
    it unless ``$MLFLOW_REGISTRY_URI`` is set.
    """
    from mlflow.tracking import MlflowClient

    name, alias, number = parse_model_uri(uri)
    client = MlflowClient(tracking_uri=tracking_uri)
    version = resolve_version(client, name, alias, number)
    return load_version(client, version, spark, flavor), version
