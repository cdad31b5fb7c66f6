"""Each Param's default and check written once (``sparkml.param_table``): the estimators' signatures show the
Params' own defaults, the strategies' options start from them, and the job config refuses a bad value with the
words the estimator's fit refuses it with."""

import ast
import inspect
import textwrap
from dataclasses import fields

import pytest
from support.data_helpers import rows_frame, small_rows

from sparkml import param_table
from sparkml.base.validation import param_rules
from sparkml.classification import KernelSVC, LinearSVC, LogisticRegression
from sparkml.jobs import config
from sparkml.jobs.errors import ConfigError
from sparkml.param_table import DEFAULTS, Rule, first_problem
from sparkml.regression import GeneralizedLinearRegression, LinearRegression
from sparkml.strategies.table import StrategyOptions, option_params

ESTIMATORS = (LogisticRegression, LinearSVC, LinearRegression, KernelSVC)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_signature_defaults_are_the_params_defaults(cls):
    """Every keyword argument is a Param and every Param a keyword argument; help() shows each Param's default
    (None: it has none), the one pyspark's mixins or this library's ``_setDefault`` give it."""
    estimator = cls()
    signature = inspect.signature(cls.__init__).parameters
    assert set(signature) - {"self"} == {p.name for p in estimator.params}
    for param in estimator.params:
        default = estimator.getOrDefault(param) if estimator.hasDefault(param) else None
        assert signature[param.name].default == default, param.name
        assert type(signature[param.name].default) is type(default), param.name


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_signatures_write_no_default_of_their_own(cls):
    """In the source, a keyword default is ``...`` (the Param's, filled in) or None (the Param has none): no value
    is written twice."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(inspect.unwrap(cls.__init__))))
    written = {
        arg.arg: ast.literal_eval(default)
        for arg, default in zip(tree.body[0].args.kwonlyargs, tree.body[0].args.kw_defaults)
    }
    assert written and set(written.values()) <= {..., None}, written
    for name, value in written.items():
        assert (value is None) == (not cls().hasDefault(name)), name


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_the_training_params_defaults_are_the_tables(cls):
    estimator = cls()
    own = {name: value for name, value in DEFAULTS.items() if estimator.hasParam(name)}
    assert {"strategy", "device", "dtype", "numWorkers", "checkpointInterval", "aggregationDepth"} <= set(own)
    assert {name: estimator.getOrDefault(name) for name in own} == own


def test_strategy_options_start_from_the_tables_defaults_and_map_one_param_each():
    mapping = option_params()
    assert mapping == {
        "device": "device",
        "aggregation_depth": "aggregationDepth",
        "num_workers": "numWorkers",
        "local_iter": "localIter",
        "staleness": "staleness",
        "topology": "topology",
    }
    defaults = StrategyOptions()
    assert {f.name: getattr(defaults, f.name) for f in fields(StrategyOptions)} == {
        option: DEFAULTS[param] for option, param in mapping.items()
    }
    assert defaults.staleness == 3 and defaults.topology == "ring" and defaults.aggregation_depth == 2


def test_the_options_a_fit_builds_are_its_params(monkeypatch):
    """``_make_strategy`` reads the mapping: each option the Param's value, KernelSVC's missing ones the defaults."""
    import sparkml.strategies as strategies

    built = []
    monkeypatch.setattr(strategies, "make_strategy", lambda name, data, loss, options: built.append(options))

    class Data:
        strategy = "sync"

    LogisticRegression(staleness=7, topology="complete", numWorkers=2, localIter=4, aggregationDepth=5)._make_strategy(
        Data(), None
    )
    KernelSVC(device="cpu")._make_strategy(Data(), None)
    assert built == [
        StrategyOptions(
            device="auto", aggregation_depth=5, num_workers=2, local_iter=4, staleness=7, topology="complete"
        ),
        StrategyOptions(device="cpu"),
    ]


def test_rules_report_the_first_broken_one_in_order_and_only_where_they_apply():
    rules = {"a": param_table.at_least(0), "b": Rule(lambda v: v < 1, "must be < 1", only_with="c")}
    assert first_problem(rules, {"a": 0, "b": 5}) is None  # c unset: b's rule does not apply
    assert first_problem(rules, {"a": 0, "b": 5, "c": ""}) is None
    assert first_problem(rules, {"a": -1, "b": 5, "c": "x"}) == ("a", "a must be >= 0; got -1")
    assert first_problem(rules, {"a": 1, "b": 5, "c": "x"}) == ("b", "b must be < 1; got 5")
    assert param_table.choice_of(("x", "y"), " (why)").problem("p", "z") == "p must be one of x, y (why); got 'z'"


def test_an_estimators_own_rule_replaces_the_tables():
    assert param_rules(LogisticRegression)["regParam"] is param_table.RULES["regParam"]
    assert param_rules(KernelSVC)["regParam"].problem("regParam", 0.0) == (
        "regParam must be a finite number > 0 for KernelSVC (1 / (n C)); got 0.0"
    )
    assert param_rules(LogisticRegression)["regParam"].problem("regParam", 0.0) is None
    # MLlib takes an infinite regParam; the solvers cannot (an L1 strength of inf fails inside a task)
    for cls in (LogisticRegression, KernelSVC, GeneralizedLinearRegression):
        assert "must be a finite number" in param_rules(cls)["regParam"].problem("regParam", float("inf"))


# (estimator, Params) that its fit refuses before touching the data
REFUSED = [
    ("LogisticRegression", {"staleness": -1}),
    ("LogisticRegression", {"localIter": 0}),
    ("LogisticRegression", {"numWorkers": -2}),
    ("LogisticRegression", {"maxIter": -1}),
    ("LogisticRegression", {"elasticNetParam": 1.5}),
    ("LogisticRegression", {"aggregationDepth": 1}),
    ("LogisticRegression", {"regParam": float("inf")}),
    ("LinearSVC", {"tol": -1e-3}),
    ("LinearSVC", {"checkpointDir": "hdfs://namenode/ckpt"}),
    ("LinearSVC", {"checkpointDir": "/tmp/ckpt", "checkpointInterval": 0}),
    ("LinearRegression", {"solver": "qr"}),
    ("LinearRegression", {"loss": "absolute"}),
    ("LinearRegression", {"loss": "huber", "epsilon": 1.0}),
    ("KernelSVC", {"regParam": 0.0}),
    ("KernelSVC", {"landmarkTol": 1.5}),
    ("KernelSVC", {"strategy": "averaging"}),
]


@pytest.fixture(scope="module")
def frame(spark):
    return rows_frame(spark, small_rows())


@pytest.mark.parametrize("name,params", REFUSED, ids=lambda v: str(v))
def test_a_job_configs_error_is_the_fits(frame, name, params):
    with pytest.raises(ValueError) as fit:
        config.estimator_class(name)(**params).fit(frame)
    with pytest.raises(ConfigError) as job:
        config.validate_params(name, params)
    param = str(fit.value).split(" ")[0]  # the message starts with the Param it refuses
    assert param in params
    assert str(job.value) == f"model.params.{param}: {fit.value}"
    assert job.value.key == f"model.params.{param}"


def test_a_job_configs_error_for_a_bad_choice_is_the_params():
    """A choice is the Param's converter, which refuses the value as it is set: the same words either way."""
    with pytest.raises(ValueError) as made:
        LogisticRegression(topology="star")
    with pytest.raises(ConfigError) as job:
        config.validate_params("LogisticRegression", {"topology": "star"})
    assert str(job.value) == f"model.params.topology: {made.value}"
    assert str(made.value) == "topology must be one of ring, complete; got 'star'"


def test_a_job_config_from_yaml_is_refused_before_spark_starts():
    raw = {
        "data": {"train": "generated:binary"},
        "model": {"estimator": "LogisticRegression", "params": {"strategy": "ssp", "staleness": -1}},
        "output": {"dir": "runs/x"},
    }
    with pytest.raises(ConfigError, match=r"^model\.params\.staleness: staleness must be >= 0; got -1$"):
        config.validate(raw)
    raw["model"]["params"] = {"checkpointInterval": 0}  # no checkpointDir: no checkpoints, nothing to check
    assert config.validate(raw)["model"]["params"] == {"checkpointInterval": 0}


def test_the_docs_table_of_added_params_shows_the_tables_defaults():
    import re

    from support.helpers import ROOT

    with open(f"{ROOT}/docs/getting-started.md", encoding="utf-8") as f:
        rows = dict(re.findall(r"^\| `(\w+)` \| `([^`]+)` \|", f.read(), re.M))
    shown = {name: ast.literal_eval(value) for name, value in rows.items() if name in DEFAULTS}
    assert shown == {name: value for name, value in DEFAULTS.items() if name != "aggregationDepth"}
