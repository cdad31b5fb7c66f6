"""Reading a job config file: YAML as version 1.2 reads numbers, every error a ``ConfigError`` on ``--config``
that names the file and never quotes what it holds (it may be any readable file)."""

import re

import yaml

from sparkml.jobs.errors import ConfigError
from sparkml.jobs.examples import example_names
from sparkml.jobs.names import shown

MAX_CONFIG_BYTES = 1 << 20  # a job config is a few hundred bytes
_TOKEN = re.compile(r"<[a-z ]+>|[^\w\s]{1,3}")


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader reading numbers as YAML 1.2 does: ``1.0e9`` and ``1e-3`` are floats (YAML 1.1, PyYAML's
    grammar, wants a sign in the exponent and reads them as strings)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?|[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def parse_yaml(text):
    """The YAML document ``text`` (``_Loader``)."""
    return yaml.load(text, Loader=_Loader)  # _Loader is a SafeLoader: no Python objects


def _yaml_problem(e):
    """Where and what a YAML error is, without quoting the file: PyYAML's problems may quote what it read."""
    mark = getattr(e, "problem_mark", None)
    problem = str(getattr(e, "problem", None) or "a syntax error")
    # keep the grammar's tokens ('<block end>', ':', ']'), drop quoted text of the file (a tag, an alias...)
    problem = re.sub(r"""\s*('[^']*'|"[^"]*")""", lambda m: m[0] if _TOKEN.fullmatch(m[1][1:-1]) else "", problem)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


def read_yaml(path):
    """The YAML document of the file `path` (None for an empty file). Every error is a ConfigError on
    ``--config`` that names the file and never quotes its content (it may be any readable file)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        examples = ", ".join(example_names())
        raise ConfigError(
            "--config",
            f"cannot read {path}: {e.strerror or type(e).__name__}"
            + (f" (the example configs: {examples})" if examples else ""),
        ) from None
    except UnicodeDecodeError:
        raise ConfigError("--config", f"{path} is not a YAML file: not UTF-8 text") from None
    except ValueError:  # a NUL in the path
        raise ConfigError("--config", f"cannot read {shown(path)}: not a file name") from None
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError("--config", f"{path} is not a job config: larger than {MAX_CONFIG_BYTES >> 20} MiB")
    try:
        return parse_yaml(text)
    except yaml.reader.ReaderError:
        raise ConfigError("--config", f"{path} is not a YAML file: it holds control characters") from None
    except yaml.YAMLError as e:
        raise ConfigError("--config", f"{path} is not valid YAML: {_yaml_problem(e)}") from None
    except RecursionError:
        raise ConfigError("--config", f"{path} is not a job config: nested too deeply") from None
