"""Hostile command lines and configs, fuzzed (issue 51 item 6): property-based tests (hypothesis) of the jobs'
entry points, ``sparkml.jobs.train``, ``retrain`` and ``predict``, called in process.

Each example is a valid command line broken in one or two ways (``job_case``, ``predict_case``): a window id
or a registered model's name that is no plain name (separators, ``..``, absolute, unicode, empty, control
characters); a ``--config`` file of random bytes, passwd or shadow lines, a YAML mapping of other keys,
broken YAML (tags, aliases, unclosed brackets) or control characters, each around a secret; an output
location that is a file, lies under one, is empty or holds a NUL; a ``--set`` that cannot apply (unknown
keys, wrong types, unparsable YAML, a key inside a string); an unknown flag or a missing argument. Jobs
examples also carry up to three random ``--set`` overrides ahead of the break (known keys with odd YAML
values, random keys), which may or may not be valid themselves.

What every example must end with: exit code 2; one line ``config error: <key>: <problem>`` on stderr
naming one of the broken keys (any key when random overrides came first), or argparse's usage and
``<prog>: error: ...`` for a bad flag; nothing on stdout; the secret nowhere; no file written; and no Spark
session, MLflow client or estimator made (``job_calls.guard`` makes each raise), so the whole file runs
without Spark in seconds.

Profiles (hypothesis, ``deadline=None``, ``database=None``, ``derandomize=True``: the same examples on every
run): ``make test`` runs ``EXAMPLES["default"]`` examples per test; ``SPARKML_FUZZ_PROFILE=nightly`` many more
(``EXAMPLES["nightly"]``, about two minutes)::

    .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_jobs_fuzz.py
    SPARKML_FUZZ_PROFILE=nightly .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_jobs_fuzz.py
"""

import json
import os
import re
import tempfile

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.job_calls import call, guard, tree, write_config

from sparkml.jobs import config, predict, retrain, train

pytest.importorskip("mlflow")

PROFILE = os.environ.get("SPARKML_FUZZ_PROFILE", "default")
if PROFILE not in ("default", "nightly"):
    raise ValueError(f"SPARKML_FUZZ_PROFILE must be 'default' or 'nightly', got {PROFILE!r}")
EXAMPLES = {"default": 50, "nightly": 3000}
FUZZ = settings(
    max_examples=EXAMPLES[PROFILE],
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
)
SECRET = "SECRET-7d1c-do-not-print"
SECTIONS = set(config.RETRAIN_SCHEMA)  # spark, data, model, output, tracking, registry, gate


def is_plain(name):
    """The rule of docs/jobs.md, written independently of ``jobs.names``."""
    return bool(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}", name)) and ".." not in name


# ---- what breaks a command line -----------------------------------------------------------------------------

LETTERS = st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8)
BAD_NAMES = st.one_of(
    st.sampled_from(
        ["", ".", "..", "../../escaped_win", "/abs/path", "a/b", "a\\b", ".hidden", "-x", "окно", "a b"]
        + ["x" * 201, "a\x00b", "a\nb", "2026-11-03/../..", "C:\\x", "~", "w\u2028"]
    ),
    st.text(max_size=24).filter(lambda s: not is_plain(s)),
)
NOT_CONFIGS = st.one_of(
    st.tuples(st.binary(max_size=120), st.binary(max_size=120)).map(lambda p: p[0] + SECRET.encode() + p[1]),
    st.sampled_from(
        [
            f"root:x:0:0:{SECRET}:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n",
            f"root:*:{SECRET}:0:99999:7:::\n",
            f"[default]\naws_secret_access_key = {SECRET}\n",
            f"data: !{SECRET} x\n",
            f"data: *{SECRET}\n",
            f"data: !!python/object/apply:os.system ['{SECRET}']\n",
            f"data: [1, 2\nmodel: {SECRET}\n",
            f"data: '{SECRET}\n",
            f'data: "\\q{SECRET}"\n',
            f"a: b\n\t{SECRET}: c\n",
            f"--- a\n--- {SECRET}\n",
            "[" * 600 + SECRET,
        ]
    ).map(str.encode),
    st.dictionaries(LETTERS.filter(lambda k: k not in SECTIONS), st.just(SECRET), max_size=3).map(
        lambda d: yaml.safe_dump({**d, SECRET: [SECRET]}).encode()
    ),
    st.text(max_size=30).map(lambda t: (t + "\x01" + SECRET).encode()),
    st.text(max_size=30).map(lambda t: f"caf\xe9 {t} {SECRET}".encode("latin-1", "replace")),
    st.sampled_from(["DIRECTORY", "MISSING"]),
)
OUTPUTS = st.sampled_from(["file", "under a file", "empty", "blank", "nul"])


def quoted(value):
    return json.dumps(value)  # a YAML double-quoted scalar: the value exactly, whatever it holds


def bad_sets(retrain):
    """(``--set`` item, keys its error may name): an override that cannot apply."""
    items = [
        LETTERS.map(lambda k: (f"zz{k}=1", {f"zz{k}"})),
        LETTERS.map(lambda k: (f"data.zz{k}=1", {f"data.zz{k}"})),
        LETTERS.map(lambda k: (f"model.params.zz{k}=1", {f"model.params.zz{k}"})),
        st.sampled_from(["abc", "1.5", "true", "[1]", "{a: 1}", "'1'", "2026-11-03"]).map(
            lambda v: (f"data.seed={v}", {"data.seed"})
        ),
        st.sampled_from(["[", "{", "!!python/object:os.system x", "*nope", "a: b: c", "'x"]).map(
            lambda v: (f"model.params.regParam={v}", {"model.params.regParam"})
        ),
        st.sampled_from(["0", "1", "-1", "2", ".nan"]).map(lambda v: (f"data.holdout_fraction={v}", {"data"})),
        st.text(max_size=12).filter(lambda s: "=" not in s).map(lambda s: (s, {"--set"})),
        st.sampled_from(["=1", " =1", "="]).map(lambda s: (s, {"--set"})),
        st.just(("output.dir.x=1", {"output.dir"})),
        st.just(("spark.conf.x=[1]", {"spark.conf.x"})),
        st.just(("data.format=xls", {"data.format"})),
        st.just(("model.estimator=Nope", {"model.estimator"})),
    ]
    if retrain:
        items += [
            BAD_NAMES.map(lambda n: (f"registry.model_name={quoted(n)}", {"registry.model_name"})),
            st.one_of(BAD_NAMES, st.sampled_from(["a.b", "latest", "v3"])).map(
                lambda n: (f"registry.alias={quoted(n)}", {"registry.alias"})
            ),
            LETTERS.map(lambda k: (f"gate.metrics.zz{k}.threshold=1", {"gate.metrics"})),
        ]
    return st.one_of(*items)


BAD_FLAGS = st.sampled_from([["--bogus"], ["--wndow=1"], ["-z"], ["--set"], ["--config"], ["--check=1"]])
ODD_VALUES = st.one_of(
    st.sampled_from(
        ["", "null", "~", "[", "]", "{", "{a: 1}", "[1, 2]", "1e999", "-1e999", ".nan", ".inf", "-0", "0x10"]
        + ["1_000", "true", "no", "!!binary aGk=", "!!python/object:os.system x", "&a [*a]", "*undefined"]
        + ["'quoted'", '"\\u0000"', "2026-11-03", "12:30:00", "\x00", "\t", "? a", "- x", "%TAG", "@", "`"]
    ),
    st.text(max_size=12),
)
KNOWN_KEYS = st.sampled_from(
    ["data.seed", "data.holdout_fraction", "data.features", "data.label", "data.weight", "data.format"]
    + ["data.test", "data.options.header", "data.generated.rows", "data.generated.classes", "data.window_column"]
    + ["model.params.regParam", "model.params.maxIter", "model.params.tol", "model.params.family"]
    + ["model.params.strategy", "model.params.device", "model.params.thresholds", "model.progress_every"]
    + ["spark.master", "spark.conf.spark.sql.shuffle.partitions", "gate.dry_run", "registry.warm_start", "x"]
)
NOISE = st.one_of(
    st.tuples(KNOWN_KEYS, ODD_VALUES).map(lambda kv: f"{kv[0]}={kv[1]}"),
    st.tuples(st.text(max_size=15), ODD_VALUES).map(lambda kv: f"{kv[0]}={kv[1]}"),
).filter(lambda item: item.split("=", 1)[0].strip().split(".")[0] not in ("output", "registry", "tracking"))


@st.composite
def job_case(draw, retrain):
    """({kind: what breaks it}, random overrides): one or two breaks of a train (or retrain) command line."""
    kinds = ["config", "output", "set", "flags"] + (["window"] if retrain else [])
    chosen = draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=2, unique=True))
    strategies = {"config": NOT_CONFIGS, "output": OUTPUTS, "set": bad_sets(retrain), "window": BAD_NAMES}
    strategies["flags"] = BAD_FLAGS | (st.just("no --window") if retrain else BAD_FLAGS)
    if retrain:
        strategies["output"] = OUTPUTS | st.just("window folder is a file")
    return {kind: draw(strategies[kind]) for kind in chosen}, draw(st.lists(NOISE, max_size=3))


def output_dir(kind, d):
    taken = os.path.join(d, "taken")
    paths = {"file": taken, "under a file": os.path.join(taken, "x", "y"), "empty": "", "blank": "  "}
    paths.update({"nul": os.path.join(d, "a\0b")})
    if kind == "window folder is a file":
        os.makedirs(os.path.join(d, "runs"))
        open(os.path.join(d, "runs", "w1"), "w").close()
    return paths.get(kind, os.path.join(d, "runs"))


def check_refused(main, argv, d, keys, prog):
    """Run `main`; check the refusal. `keys`: the keys its line may name (None: any)."""
    before = tree(d)
    code, out, err = call(main, argv)
    lines = err.splitlines()
    assert code == 2 and lines, (argv, code, err)
    if keys == "argparse":
        assert lines[-1].startswith(f"{prog}: error: ") and lines[0].startswith("usage: "), err
    else:
        assert len(lines) == 1 and lines[0].startswith("config error: "), err
        key = lines[0][len("config error: ") :].split(": ", 1)[0]
        assert keys is None or any(key == k or key.startswith(k + ".") for k in keys), (key, keys, err)
    assert out == "" and SECRET not in err, err
    assert tree(d) == before, argv


def run_job_case(main, retrain, case, prog):
    breaks, noise = case
    with tempfile.TemporaryDirectory(prefix="sparkml-fuzz-") as d:
        d = os.path.realpath(d)
        with open(os.path.join(d, "taken"), "w") as f:
            f.write("a file")
        cfg = write_config(d, retrain, output={"dir": output_dir(breaks.get("output"), d)})
        keys = {"output": {"output.dir"}, "window": {"--window"}, "config": {"--config", "data.train"}}
        keys = set().union(*(keys.get(kind, set()) for kind in breaks))
        content = breaks.get("config")
        if content == "DIRECTORY":
            cfg = d
        elif content == "MISSING":
            cfg = os.path.join(d, "missing.yaml")
        elif content is not None:
            with open(cfg, "wb") as f:
                f.write(content)
        argv = [f"--config={cfg}"]
        if retrain and breaks.get("flags") != "no --window":
            argv.append(f"--window={breaks.get('window', 'w1')}")
        argv += [f"--set={item}" for item in noise]
        if "set" in breaks:
            item, set_keys = breaks["set"]
            argv.append(f"--set={item}")
            keys |= set_keys
        if "flags" in breaks:
            argv += [] if breaks["flags"] == "no --window" else breaks["flags"]
            keys = "argparse"
        check_refused(main, argv, d, None if noise and keys != "argparse" else keys, prog)


@FUZZ
@given(case=job_case(retrain=False))
def test_train_refuses_hostile_command_lines(monkeypatch, case):
    guard(monkeypatch)
    run_job_case(train.main, False, case, "sparkml.jobs.train")


@FUZZ
@given(case=job_case(retrain=True))
def test_retrain_refuses_hostile_command_lines(monkeypatch, case):
    guard(monkeypatch)
    run_job_case(retrain.main, True, case, "sparkml.jobs.retrain")


# ---- the scoring job ------------------------------------------------------------------------------------------


def valid_model_uri(text):
    m = re.fullmatch(r"models:/([^/@]+)(?:@([^/@]+)|/([0-9]+))", text.strip())
    return m is not None and is_plain(m[1]) and (m[2] is None or is_plain(m[2]))


PREDICT_BREAKS = {
    "--model": st.one_of(
        st.text(max_size=30),
        BAD_NAMES.map(lambda n: f"models:/{n}@champion"),
        BAD_NAMES.map(lambda n: f"models:/events@{n}"),
        st.sampled_from(["models:/events/1.0", "models:/events/Production", "models:/events", "models:/@x"]),
    ).filter(lambda uri: not valid_model_uri(uri)),
    "--output": st.sampled_from(["exists", "a file", "under a file", "", "/", "nul"]),
    "--id-cols": st.sampled_from([",", "a,,b", " ", "", "a, ,b", ",a"]),
    "--features": st.sampled_from([",", "a,,b", " ", "", ",a"]),
    "--tracking-uri": st.sampled_from(["missing store", "no store"]),
    "flags": st.sampled_from([["--format=xls"], ["--flavor=onnx"], ["--bogus"], ["--model"], "no --input"]),
}


@st.composite
def predict_case(draw):
    chosen = draw(st.lists(st.sampled_from(sorted(PREDICT_BREAKS)), min_size=1, max_size=3, unique=True))
    return {kind: draw(PREDICT_BREAKS[kind]) for kind in chosen}


@FUZZ
@given(breaks=predict_case())
def test_predict_refuses_hostile_command_lines(monkeypatch, breaks):
    guard(monkeypatch)
    with tempfile.TemporaryDirectory(prefix="sparkml-fuzz-") as d:
        d = os.path.realpath(d)
        for name in ("taken", "mlflow.db"):
            open(os.path.join(d, name), "w").close()
        os.makedirs(os.path.join(d, "scores-there"))
        outputs = {"exists": "scores-there", "a file": "taken", "under a file": "taken/x/y", "nul": "a\0b"}
        output = breaks.get("--output", "scores")  # "" and "/" as they are
        output = os.path.join(d, outputs.get(output, output)) if output not in ("", "/") else output
        argv = ["--model", breaks.get("--model", "models:/events@champion"), "--output", output]
        argv = [f"{flag}={value}" for flag, value in zip(argv[::2], argv[1::2])]
        if breaks.get("flags") != "no --input":
            argv.append(f"--input={os.path.join(d, 'in.parquet')}")
        for flag in ("--id-cols", "--features"):
            if flag in breaks:
                argv.append(f"{flag}={breaks[flag]}")
        store = {"missing store": f"sqlite:///{d}/missing.db", None: f"sqlite:///{d}/mlflow.db"}
        if breaks.get("--tracking-uri") != "no store":
            argv.append(f"--tracking-uri={store[breaks.get('--tracking-uri')]}")
        keys = "argparse" if "flags" in breaks else {k for k in breaks}
        if "flags" in breaks and breaks["flags"] != "no --input":
            argv += breaks["flags"]
        check_refused(predict.main, argv, d, keys, "sparkml.jobs.predict")
