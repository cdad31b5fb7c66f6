"""Each Param declared once (``sparkml.params``): the estimators' Params, getters, setters, defaults, signatures,
type stubs, rules, saved-file converters and the job config all read the one declaration; the choices a declaration
names are the implementations' (the strategy table, the kernels, the GLM families and links)."""

import inspect
import os
import subprocess
import sys
import textwrap
from dataclasses import fields

import numpy as np
import pytest
from pyspark.ml.param import TypeConverters
from support.data_helpers import rows_frame, small_rows
from support.helpers import ROOT

from sparkml.base.validation import param_rules
from sparkml.classification import (
    KernelSVC,
    KernelSVCModel,
    LinearSVC,
    LinearSVCModel,
    LogisticRegression,
    LogisticRegressionModel,
)
from sparkml.jobs import config
from sparkml.jobs.errors import ConfigError
from sparkml.params import estimators, kernel_svc, training
from sparkml.params.rules import Rule, at_least, choice_of, first_problem
from sparkml.params.training import DEFAULTS, RULES
from sparkml.regression import (
    GeneralizedLinearMixedModel,
    GeneralizedLinearMixedModelModel,
    GeneralizedLinearRegression,
    GeneralizedLinearRegressionModel,
    LinearRegression,
    LinearRegressionModel,
)
from sparkml.saved.classes import SAVED
from sparkml.strategies import table
from sparkml.strategies.table import StrategyOptions, option_params

ESTIMATORS = (
    LogisticRegression,
    LinearSVC,
    LinearRegression,
    GeneralizedLinearRegression,
    KernelSVC,
    GeneralizedLinearMixedModel,
)
MODELS = (
    LogisticRegressionModel,
    LinearSVCModel,
    LinearRegressionModel,
    GeneralizedLinearRegressionModel,
    KernelSVCModel,
    GeneralizedLinearMixedModelModel,
)


@pytest.mark.parametrize("cls,model", list(zip(ESTIMATORS, MODELS)), ids=lambda c: c.__name__)
def test_an_estimator_and_its_model_have_exactly_the_declared_params(cls, model):
    declared = [d.name for d in cls._declared]
    assert {p.name for p in cls().params} == set(declared) == {p.name for p in model().params}
    assert len(declared) == len(set(declared))
    saved = next(s for s in SAVED.values() if s.sparkml_class == f"{model.__module__}.{model.__name__}")
    assert saved.params == {d.name: d.converter for d in cls._declared}


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_signature_defaults_are_the_params_defaults(cls):
    """Every keyword argument is a Param, in the declarations' order, and every Param a keyword argument; help()
    shows each Param's default (None: it has none), the one pyspark's mixins or the declaration give it."""
    estimator = cls()
    signature = inspect.signature(cls.__init__).parameters
    assert list(signature)[1:] == [d.name for d in cls._declared]
    for param in estimator.params:
        default = estimator.getOrDefault(param) if estimator.hasDefault(param) else None
        assert signature[param.name].default == default, param.name
        assert type(signature[param.name].default) is type(default), param.name
        assert signature[param.name].kind is inspect.Parameter.KEYWORD_ONLY


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_a_keyword_that_names_no_param_and_a_positional_argument_are_refused(cls):
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'regparam'"):
        cls(regparam=0.1)
    with pytest.raises(TypeError, match="forces keyword arguments"):
        cls(0.1)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_every_numeric_param_takes_numpy_numbers_as_pyspark_does(cls):
    """pyspark.ml's numeric rule (its ``TypeConverters``): Python and numpy 64-bit ints and floats (a gamma
    computed as 1 / (d X.var()) is a numpy float); each set value reads back as a Python number, as pyspark's
    converter makes it, and the saved file's converter takes it too."""
    estimator, checked = cls(), 0
    for d in cls._declared:
        if d.type not in ("int", "float") or not estimator.hasDefault(d.name):
            continue
        value = estimator.getOrDefault(d.name)
        numpy_value = np.int64(value + 1) if d.type == "int" else np.float64(value + 0.25)
        got = cls(**{d.name: numpy_value}).getOrDefault(d.name)
        pyspark_converter = TypeConverters.toInt if d.type == "int" else TypeConverters.toFloat
        assert got == pyspark_converter(numpy_value) == numpy_value and type(got) is type(value), d.name
        assert d.converter(numpy_value) == got, d.name
        checked += 1
    assert checked >= 5
    if cls is KernelSVC:
        assert KernelSVC(gamma=np.float64(0.05)).getGamma() == 0.05


def test_stubs_written_from_the_declarations_are_current():
    """The type stubs of the methods made from the declarations (``tools/write_param_stubs.py``) match them."""
    run = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools", "write_param_stubs.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_param_declared_once_appears_everywhere():
    """A toy Param added to LinearSVC's list by one declaration: the signature and ``help()``, ``explainParams``, the
    getter and setter, the rule (fit and job config alike), a saved model's file check and the job config's Params
    all have it, with no other edit."""
    script = textwrap.dedent(
        """
        import inspect, json
        from sparkml.params import estimators
        from sparkml.params.converters import to_float
        from sparkml.params.declared import Declared
        from sparkml.params.rules import at_least

        TOY = Declared("toyParam", to_float, "float", "A toy Param.", default=0.5, rule=at_least(0))
        estimators.LINEAR_SVC = (*estimators.LINEAR_SVC, TOY)

        from sparkml.base.validation import check_params
        from sparkml.classification import LinearSVC, LinearSVCModel
        from sparkml.jobs import config
        from sparkml.jobs.errors import ConfigError
        from sparkml.saved.classes import SAVED

        svc = LinearSVC(toyParam=2)
        out = {
            "signature": str(inspect.signature(LinearSVC.__init__).parameters["toyParam"]),
            "explained": [line for line in svc.explainParams().split("\\n") if line.startswith("toyParam")],
            "got": svc.getToyParam(),
            "set": svc.setToyParam(3.0).getToyParam(),
            "model_has": LinearSVCModel().hasParam("toyParam"),
            "saved": SAVED["org.apache.spark.ml.classification.LinearSVCModel"].params["toyParam"] is to_float,
        }
        try:
            check_params(LinearSVC(toyParam=-1.0))
        except ValueError as e:
            out["fit_refuses"] = str(e)
        try:
            config.validate_params("LinearSVC", {"toyParam": -1.0})
        except ConfigError as e:
            out["job_refuses"] = str(e)
        print(json.dumps(out))
        """
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    out = __import__("json").loads(run.stdout.strip().splitlines()[-1])
    assert out == {
        "signature": "toyParam=0.5",
        "explained": ["toyParam: A toy Param. (default: 0.5, current: 2.0)"],
        "got": 2.0,
        "set": 3.0,
        "model_has": True,
        "saved": True,
        "fit_refuses": "toyParam must be >= 0; got -1.0",
        "job_refuses": "model.params.toyParam: toyParam must be >= 0; got -1.0",
    }


def test_the_declared_choices_are_the_implementations():
    from sparkml.gpu import glm, kernels

    assert training.STRATEGIES == table.names()
    assert kernel_svc.NEWTON_STRATEGIES == (table.AUTO, *table.names_where(kernel_svc=True))
    assert kernel_svc.KERNELS == kernels.KERNELS
    assert estimators.GLM_FAMILIES == glm.FAMILIES and estimators.GLM_LINKS == glm.LINKS


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_the_training_params_defaults_are_the_tables(cls):
    estimator = cls()
    own = {name: value for name, value in DEFAULTS.items() if estimator.hasParam(name)}
    assert {"strategy", "device", "dtype", "numWorkers", "checkpointInterval", "aggregationDepth"} <= set(own)
    if cls is GeneralizedLinearMixedModel:  # its objective is compared across passes to tol=1e-6: float64 rows
        own["dtype"] = "float64"
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
    rules = {"a": at_least(0), "b": Rule(lambda v: v < 1, "must be < 1", only_with="c")}
    assert first_problem(rules, {"a": 0, "b": 5}) is None  # c unset: b's rule does not apply
    assert first_problem(rules, {"a": 0, "b": 5, "c": ""}) is None
    assert first_problem(rules, {"a": -1, "b": 5, "c": "x"}) == ("a", "a must be >= 0; got -1")
    assert first_problem(rules, {"a": 1, "b": 5, "c": "x"}) == ("b", "b must be < 1; got 5")
    assert choice_of(("x", "y"), " (why)").problem("p", "z") == "p must be one of x, y (why); got 'z'"


def test_an_estimators_own_rule_replaces_the_shared_one():
    assert param_rules(LogisticRegression)["regParam"] is RULES["regParam"]
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
    ("KernelSVC", {"landmarkGainTol": 1.0}),
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


def test_the_docs_table_of_added_params_is_generated_from_the_declarations():
    import importlib.util
    import re

    spec = importlib.util.spec_from_file_location("docs_generated", os.path.join(ROOT, "docs", "hooks", "generated.py"))
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    with open(os.path.join(ROOT, "docs", "getting-started.md"), encoding="utf-8") as f:
        page = hook.on_page_markdown(f.read(), None, None, None)
    rows = dict(re.findall(r"^\| `(\w+)` \| (unset|`[^`]+`) \|", page, re.M))
    assert rows == {
        d.name: f"`{d.default!r}`".replace("'", '"') if d.has_default else "unset"
        for d in (*training.TRAINING, *training.SOLVER_OPTIONS, training.CLASS_WEIGHT)
    }
    assert rows["strategy"] == '`"auto"`' and rows["checkpointDir"] == "unset" and rows["staleness"] == "`3`"
