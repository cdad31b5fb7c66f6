"""Job configuration: load YAML, apply `--set` overrides, validate everything before Spark starts.

Every error is a `ConfigError` naming the full dotted key, e.g.
``model.params.regParm: unknown parameter of LogisticRegression (did you mean regParam?)``.
The documentation's "Batch jobs" page documents each key.
"""

import copy
import difflib
import functools
import os
from typing import Any

import yaml

from sparkml import catalog
from sparkml.jobs import tuning
from sparkml.jobs.errors import ConfigError
from sparkml.jobs.examples import example_names, examples_dir, resolve_path  # noqa: F401  (config.<name> for the jobs)
from sparkml.jobs.names import alias_name, plain_name, shown
from sparkml.jobs.yaml_file import MAX_CONFIG_BYTES, parse_yaml, read_yaml  # noqa: F401  (config.<name> for the jobs)
from sparkml.params.rules import first_problem

FORMATS = ("parquet", "csv", "libsvm")
GENERATED_KINDS = ("binary", "regression", "multiclass")
# Column params come from the data section, so a config cannot set them twice.
COLUMN_PARAMS = {"featuresCol": "data.features", "labelCol": "data.label", "weightCol": "data.weight"}

_REQUIRED = object()
_ANY_MAP = "map"  # a mapping with free keys (Spark conf, reader options, estimator params)
_MAP_OF_MAPS = "map of maps"  # free keys, each holding a mapping (the gate's per-metric rules)

# Schema: key -> (allowed types, default); nested dicts are sections.
SCHEMA: dict[str, dict[str, Any]] = {
    "spark": {
        "master": ((str,), "local[2]"),
        "app_name": ((str,), "sparkml-train"),
        "conf": (_ANY_MAP, {}),
    },
    "data": {
        "train": ((str,), _REQUIRED),
        "format": ((str,), "parquet"),
        "features": ((str, list, type(None)), None),
        "label": ((str,), "label"),
        "weight": ((str, type(None)), None),
        "test": ((str, type(None)), None),
        "holdout_fraction": ((float, int), 0.2),
        "seed": ((int,), 42),
        "options": (_ANY_MAP, {}),
        "generated": {
            "rows": ((int,), 20000),
            "features": ((int,), 20),
            "classes": ((int,), 3),
            "seed": ((int,), 0),
        },
    },
    "model": {
        "estimator": ((str,), _REQUIRED),
        "params": (_ANY_MAP, {}),
        "progress_every": ((int,), 10),
    },
    "output": {
        "dir": ((str,), _REQUIRED),
        "overwrite": ((bool,), False),
    },
    "tracking": {  # jobs/tracking.py: null uri -> $MLFLOW_TRACKING_URI, else sqlite beside output.dir
        "uri": ((str, type(None)), None),
        "experiment": ((str, type(None)), None),
    },
    "tuning": dict(tuning.SCHEMA),  # jobs/tuning.py: model selection before the model is published
}

# jobs.retrain: jobs.train's keys plus the window, the registry and the gate (documented on the "Batch jobs" page).
RETRAIN_SCHEMA = copy.deepcopy(SCHEMA)
RETRAIN_SCHEMA["spark"]["app_name"] = ((str,), "sparkml-retrain")
RETRAIN_SCHEMA["data"]["window_column"] = ((str,), "window")
RETRAIN_SCHEMA["registry"] = {
    "model_name": ((str, type(None)), None),  # null: the config file's name
    "alias": ((str,), "champion"),
    "warm_start": ((bool,), True),
    "lock_timeout_s": ((float, int), 120.0),
    "pending_timeout_s": ((float, int), 3600.0),
}
RETRAIN_SCHEMA["gate"] = {
    "dry_run": ((bool,), False),
    "metrics": (_MAP_OF_MAPS, {}),
}
del RETRAIN_SCHEMA["output"]["overwrite"]  # each version's report has its own folder

_TYPE_NAMES = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    list: "a list",
    type(None): "null",
}
_CONVERTER_NAMES = {  # pyspark.ml's TypeConverters, and their mirrors in sparkml.params.converters
    "to_int": "an integer",
    "to_float": "a number",
    "to_boolean": "true or false",
    "to_string": "a string",
    "to_list_float": "a list of numbers",
    "toInt": "an integer",
    "toFloat": "a number",
    "toBoolean": "true or false",
    "toString": "a string",
    "toListFloat": "a list of numbers",
    "toListInt": "a list of integers",
    "toListString": "a list of strings",
    "toVector": "a list of numbers",
    "toMatrix": "a matrix",
}


def _did_you_mean(name, choices):
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def load(path, overrides=(), schema=None):
    """Read `path` (YAML; or an example config's name, ``resolve_path``), apply ``key=value`` overrides,
    return the validated config dict.

    `schema`: SCHEMA (jobs.train's, the default) or RETRAIN_SCHEMA. A file that is not a YAML mapping, or
    a mapping none of whose keys is a section of `schema`, is refused as a whole: the error names the
    file, never what it holds."""
    schema = SCHEMA if schema is None else schema
    path = resolve_path(path)
    raw = read_yaml(path)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError("--config", f"{path} is not a YAML mapping (a job config maps {', '.join(schema)})")
    if raw and not any(isinstance(key, str) and key in schema for key in raw):
        raise ConfigError("--config", f"{path} is not a job config: none of its keys is one of {', '.join(schema)}")
    for item in overrides:
        apply_override(raw, item, schema)
    return validate(raw, schema)


def apply_override(raw, item, schema=None):
    """Apply one ``a.b.c=value`` (value parsed as YAML) to the raw config, in place.

    Keys under a free mapping (``spark.conf``, ``data.options``) may hold dots themselves:
    ``spark.conf.spark.sql.shuffle.partitions=8`` sets the key ``spark.sql.shuffle.partitions``.
    """
    key, sep, text = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError("--set", f"expected key=value, got {item!r}")
    try:
        value = parse_yaml(text) if text.strip() else None
    except yaml.YAMLError:
        raise ConfigError(key, f"cannot parse value {text!r} as YAML") from None
    parts, node, done = key.strip().split("."), raw, []
    schema = SCHEMA if schema is None else schema
    while len(parts) > 1:
        part = parts.pop(0)
        done.append(part)
        spec = schema.get(part) if isinstance(schema, dict) else None
        if not isinstance(node.get(part, {}), dict):
            raise ConfigError(".".join(done), f"is {node[part]!r}, cannot set {'.'.join(parts)} inside it")
        node = node.setdefault(part, {})
        if isinstance(spec, tuple) and spec[0] == _ANY_MAP:
            parts = [".".join(parts)]  # the rest is one free key
        elif isinstance(spec, tuple) and spec[0] == _MAP_OF_MAPS and len(parts) > 1:
            free = parts.pop(0)  # gate.metrics.<metric>.<key>: one free level, then the rule's key
            done.append(free)
            node = node.setdefault(free, {})
            if not isinstance(node, dict):
                raise ConfigError(".".join(done), f"is {node!r}, not a mapping")
            parts = [".".join(parts)]
        schema = spec
    node[parts[0]] = value


def _check_section(raw, schema, prefix, out):
    if not isinstance(raw, dict):
        raise ConfigError(prefix.rstrip(".") or "config", f"expected a mapping, got {raw!r}")
    for key in raw:
        if key not in schema:
            raise ConfigError(f"{prefix}{key}", "unknown key" + _did_you_mean(str(key), schema))
    for key, spec in schema.items():
        dotted, value = f"{prefix}{key}", raw.get(key)
        if isinstance(spec, dict):
            out[key] = {}
            _check_section(value if value is not None else {}, spec, dotted + ".", out[key])
            continue
        types, default = spec
        if key not in raw or (value is None and type(None) not in types and types not in (_ANY_MAP, _MAP_OF_MAPS)):
            if default is _REQUIRED:
                raise ConfigError(dotted, "is required")
            out[key] = copy.deepcopy(default)
            continue
        if types in (_ANY_MAP, _MAP_OF_MAPS):
            if value is not None and not isinstance(value, dict):
                raise ConfigError(dotted, f"expected a mapping, got {value!r}")
            out[key] = copy.deepcopy(dict(value or {}))
            continue
        if isinstance(value, bool) and bool not in types or not isinstance(value, types):
            wanted = " or ".join(_TYPE_NAMES[t] for t in types)
            raise ConfigError(dotted, f"expected {wanted}, got {value!r}")
        out[key] = float(value) if float in types and not isinstance(value, bool) else value


def validate(raw, schema=None):
    """Check a raw config dict against `schema` (default SCHEMA) and the estimator's Params; return it
    with defaults."""
    cfg: dict[str, Any] = {}
    _check_section(raw, SCHEMA if schema is None else schema, "", cfg)
    data = cfg["data"]
    if data["format"] not in FORMATS:
        raise ConfigError("data.format", f"expected one of {', '.join(FORMATS)}, got {data['format']!r}")
    if data["train"].startswith("generated:"):
        kind = data["train"].split(":", 1)[1]
        if kind not in GENERATED_KINDS:
            raise ConfigError(
                "data.train", f"expected generated:{{{','.join(GENERATED_KINDS)}}}, got {data['train']!r}"
            )
    if (data["test"] or "").startswith("generated:"):
        raise ConfigError("data.test", "generated:* datasets are for data.train only (the holdout is split off)")
    features = data["features"]
    if isinstance(features, list) and (not features or not all(isinstance(c, str) for c in features)):
        raise ConfigError("data.features", f"expected a non-empty list of column names, got {features!r}")
    if not 0.0 < data["holdout_fraction"] < 1.0 and data["test"] is None:
        raise ConfigError("data.holdout_fraction", f"expected a number in (0, 1), got {data['holdout_fraction']}")
    gen = data["generated"]
    for key in ("rows", "features"):
        if gen[key] < 1:
            raise ConfigError(f"data.generated.{key}", f"expected a positive integer, got {gen[key]}")
    if gen["classes"] < 2:
        raise ConfigError("data.generated.classes", f"expected at least 2, got {gen['classes']}")
    for key, value in cfg["spark"]["conf"].items():
        if not isinstance(value, (str, int, float, bool)):
            raise ConfigError(f"spark.conf.{key}", f"expected a scalar, got {value!r}")
    for key in ("uri", "experiment"):
        value = cfg["tracking"][key]
        if value is not None and not value.strip():
            raise ConfigError(f"tracking.{key}", "expected a non-empty string or null, got ''")
    out_dir = cfg["output"]["dir"]
    if not out_dir.strip() or "\0" in out_dir:
        raise ConfigError("output.dir", f"expected a directory path or URI, got {shown(out_dir)}")
    if "registry" in cfg:  # jobs.retrain: names of registry entries (a null model_name: retrain.load_config)
        if cfg["registry"]["model_name"] is not None:
            plain_name("registry.model_name", cfg["registry"]["model_name"], "a registered model name")
        alias_name("registry.alias", cfg["registry"]["alias"])
    name, params = cfg["model"]["estimator"], validate_params(cfg["model"]["estimator"], cfg["model"]["params"])
    cfg["model"]["params"] = params
    grid_value = functools.partial(_grid_value, name, params)
    cfg["tuning"] = tuning.check(cfg["tuning"], task_of(name), params, grid_value)
    cls = estimator_class(name)
    known = estimator_params(cls)
    tuning.check_maps(cls, params, cfg["tuning"]["grid"])
    tuning.check_metric(cfg["tuning"]["metric"], name, known, params, cfg["data"])
    _check_columns(cfg, params)
    if cfg["data"]["weight"] is not None and "weightCol" not in known:
        raise ConfigError("data.weight", f"{name} takes no weight column")
    return cfg


def estimator_class(name, key="model.estimator"):
    """Import the estimator class registered under `name` (a row of ``sparkml.catalog``)."""
    entries = catalog.by_name()
    if name not in entries:
        raise ConfigError(key, f"expected one of {', '.join(entries)}, got {name!r}" + _did_you_mean(name, entries))
    path = entries[name].estimator_path()
    try:
        return catalog.import_path(path)
    except (ImportError, AttributeError) as e:
        raise ConfigError(key, f"{name} is registered as {path} but cannot be imported: {e}") from None


def estimator_params(cls):
    """Map Param name -> Param for an estimator class, without needing a Spark session.

    Pure-Python estimators are instantiated; Java-backed pyspark.ml ones need a SparkContext
    to instantiate, so their class-level Param declarations are read instead (same set).
    """
    from pyspark.ml.param import Param

    try:
        return {p.name: p for p in cls().params}
    except Exception:  # e.g. AssertionError: no SparkContext for a JavaEstimator
        return {n: getattr(cls, n) for n in dir(cls) if isinstance(getattr(cls, n, None), Param)}


def validate_params(name, params):
    """Check estimator params by name, through each Param's typeConverter and each Param's rule (the estimator's:
    ``sparkml.base.validation.param_rules``, so a value is refused with the words its fit would refuse it with);
    return converted values."""
    from sparkml.base.validation import param_rules  # the estimators' floor: imported where an estimator is

    cls = estimator_class(name)
    known = estimator_params(cls)
    out = {}
    for key, value in params.items():
        dotted = f"model.params.{key}"
        if key in COLUMN_PARAMS:
            raise ConfigError(dotted, f"set through {COLUMN_PARAMS[key]}, not model.params")
        if key not in known:
            raise ConfigError(dotted, f"unknown parameter of {name}" + _did_you_mean(str(key), known))
        converter = known[key].typeConverter
        wanted = _CONVERTER_NAMES.get(getattr(converter, "__name__", ""), "a valid value")
        if isinstance(value, bool) and wanted != "true or false" or value is None:
            raise ConfigError(dotted, f"expected {wanted}, got {value!r}")
        try:
            out[key] = converter(value)
        except (TypeError, ValueError) as e:  # a stock converter's text is generic; a custom one's is not
            problem = f"expected {wanted}, got {value!r}" if wanted != "a valid value" else str(e)
            raise ConfigError(dotted, problem) from None
    found = first_problem(param_rules(cls), {**_param_defaults(cls), **out})
    if found is not None:
        raise ConfigError(f"model.params.{found[0]}", found[1])
    return out


def _grid_value(name, params, param, value, dotted):
    """One ``tuning.grid`` value, checked and converted as ``model.params``' are, its error on ``dotted`` (on the
    grid's key when the Param itself is refused)."""
    try:
        return validate_params(name, {**params, param: value})[param]
    except ConfigError as e:
        named = param in COLUMN_PARAMS or param not in estimator_params(estimator_class(name))
        raise ConfigError(dotted.rsplit("[", 1)[0] if named else dotted, str(e).split(": ", 1)[1]) from None


def _check_columns(cfg, params):
    """The data section's columns and the column Params of ``model.params`` (``offsetCol``...) against the columns
    of the training data where they can be read without Spark: a generated dataset's, a local Parquet file's or
    directory's (its schema, with Hive partition columns). Other inputs are checked when the job reads them,
    before any fit."""
    data = cfg["data"]
    columns = _readable_columns(data)
    if columns is None:
        return
    features = data["features"] if isinstance(data["features"], list) else [data["features"] or "features"]
    wanted = [("data.label", data["label"]), ("data.weight", data["weight"])]
    wanted += [("data.features", c) for c in features]
    wanted += [(f"model.params.{k}", v) for k, v in params.items() if k.endswith("Col") and v]
    for key, column in wanted:
        if column is not None and column not in columns:
            raise ConfigError(key, f"column {column!r} is not in {data['train']} (columns: {', '.join(columns)})")


def _readable_columns(data):
    """The training data's column names, or None where they cannot be read before Spark starts."""
    path = data["train"]
    if path.startswith("generated:"):
        return ["features", "label"]
    if data["format"] != "parquet" or not is_local_path(path) or "{" in path or not os.path.exists(path):
        return None
    import pyarrow.dataset as ds

    try:
        return ds.dataset(path, format="parquet", partitioning="hive").schema.names
    except Exception:  # not readable as Parquet here: the job's own read says why
        return None


def _param_defaults(cls):
    """Param name -> default of an estimator class (none for one that needs a SparkContext to be made)."""
    try:
        estimator = cls()
    except Exception:  # e.g. AssertionError: no SparkContext for a JavaEstimator
        return {}
    return {p.name: v for p, v in estimator.extractParamMap().items()}


def task_of(name):
    """'classification' or 'regression' for a registered estimator name."""
    return catalog.by_name()[name].task


def is_local_path(path):
    """True for a plain filesystem path, False for a URI such as hdfs://, s3a://, file:/."""
    return not path.split("/", 1)[0].endswith(":")
