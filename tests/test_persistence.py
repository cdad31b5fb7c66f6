"""Models are saved in MLlib's own layout: stock pyspark.ml loads ours, ours loads stock MLlib's,
``toSpark()`` gives the stock model, and the files are JSON and Parquet only (no pickle)."""

import glob
import json
import os

import numpy as np
import pytest
from pyspark.ml import classification as stock_classification
from support.helpers import assert_same_outputs
from support.model_kinds import KINDS

from sparkml.base.params import TORCH_PARAM_NAMES
from sparkml.classification import LogisticRegression, LogisticRegressionModel


def numbers(model):
    """(coefficients (K, d), intercepts (K,)) of any of the linear models, ours or stock."""
    if hasattr(model, "coefficientMatrix"):
        return model.coefficientMatrix.toArray(), model.interceptVector.toArray()
    return np.atleast_2d(model.coefficients.toArray()), np.atleast_1d(model.intercept)


def assert_same_numbers(a, b, atol=0.0):
    (ca, ia), (cb, ib) = numbers(a), numbers(b)
    assert ca.shape == cb.shape and ia.shape == ib.shape
    np.testing.assert_allclose(ca, cb, rtol=0, atol=atol)
    np.testing.assert_allclose(ia, ib, rtol=0, atol=atol)


def assert_same_params(a, b):
    """Every Param of ``a`` is set (or defaulted) on ``b`` the same way, with the same value."""
    for p in a.params:
        assert b.hasParam(p.name), p.name
        q = b.getParam(p.name)
        assert a.isSet(p) == b.isSet(q), p.name
        assert a.isDefined(p) == b.isDefined(q), p.name
        if a.isDefined(p):
            assert a.getOrDefault(p) == b.getOrDefault(q), p.name


@pytest.mark.compat
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_our_save_loads_as_the_stock_model(spark, data, fitted, tmp_path, kind):
    stock_model_cls, columns = KINDS[kind].stock_model, KINDS[kind].columns
    model = fitted(kind)
    path = str(tmp_path / kind)
    model.save(path)
    stock = stock_model_cls.load(path)
    assert isinstance(stock, stock_model_cls) and stock.uid == model.uid
    assert_same_numbers(model, stock)
    assert stock.numFeatures == model.numFeatures
    if kind.startswith("lr"):
        assert stock.numClasses == model.numClasses
    if kind == "linreg":
        assert stock.scale == model.scale
    assert_same_outputs(model.transform(data), stock.transform(data), columns, atol=1e-12)


@pytest.mark.compat
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_stock_save_loads_as_our_model(spark, data, tmp_path, kind):
    k = KINDS[kind]
    our_model_cls, stock_est_cls, params, columns = k.model, k.stock_estimator, k.params, k.columns
    stock = stock_est_cls(**{**params, "maxIter": 10}).fit(data)
    path = str(tmp_path / kind)
    stock.save(path)
    ours = our_model_cls.load(path)
    assert isinstance(ours, our_model_cls) and ours.uid == stock.uid
    assert_same_numbers(ours, stock)
    assert ours.getRegParam() == stock.getRegParam() and ours.getMaxIter() == 10
    assert ours.getLabelCol() == stock.getLabelCol()
    assert ours.getDevice() == "auto" and ours.getStrategy() == "auto"  # our own Params keep their defaults
    assert_same_outputs(ours.transform(data), stock.transform(data), columns, atol=1e-12)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_our_round_trip_keeps_every_param(data, fitted, tmp_path, kind):
    our_model_cls = KINDS[kind].model
    model = fitted(kind).copy()
    model.setDevice("cpu").setDtype("float32").setStrategy("sync").setPredictionCol("pred")
    path = str(tmp_path / kind)
    model.save(path)
    loaded = our_model_cls.load(path)
    assert type(loaded) is our_model_cls and loaded.uid == model.uid
    assert_same_params(model, loaded)
    assert_same_params(loaded, model)
    assert (loaded.getDevice(), loaded.getDtype(), loaded.getStrategy()) == ("cpu", "float32", "sync")
    assert_same_numbers(model, loaded)


def test_torch_params_of_the_estimator_reach_the_saved_model(data, tmp_path):
    est = LogisticRegression(regParam=0.05, device="cpu", dtype="float32", strategy="sync", threshold=0.6, maxIter=20)
    model = est.fit(data)
    assert (model.getDevice(), model.getDtype(), model.getStrategy()) == ("cpu", "float32", "sync")
    path = str(tmp_path / "lr32")
    model.write().save(path)
    loaded = LogisticRegressionModel.load(path)
    assert_same_params(model, loaded)
    assert loaded.isSet(loaded.dtype) and loaded.getDtype() == "float32"
    assert loaded.getThreshold() == 0.6 and loaded.getRegParam() == 0.05
    stock = stock_classification.LogisticRegressionModel.load(path)
    assert stock.getThreshold() == 0.6 and stock._java_obj.getThreshold() == 0.6


@pytest.mark.compat
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_to_spark_gives_the_stock_model(data, fitted, kind):
    stock_model_cls, columns = KINDS[kind].stock_model, KINDS[kind].columns
    model = fitted(kind).copy()
    if kind == "lr_binary":
        model.setThreshold(0.7)
    elif kind == "svc":
        model.setThreshold(0.25)
    model.setPredictionCol("pred")
    stock = model.toSpark()
    assert type(stock) is stock_model_cls and stock.uid == model.uid
    assert_same_numbers(model, stock)
    assert stock.getPredictionCol() == "pred" and stock._java_obj.getPredictionCol() == "pred"
    if kind in ("lr_binary", "svc"):
        assert stock._java_obj.getThreshold() == model.getThreshold()
    assert not any(stock.hasParam(name) for name in TORCH_PARAM_NAMES)
    columns = ["pred" if c == "prediction" else c for c in columns]
    assert_same_outputs(model.transform(data), stock.transform(data), columns, atol=1e-12)


def _files(path):
    return [f for f in glob.glob(os.path.join(path, "**"), recursive=True) if os.path.isfile(f)]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_saved_files_are_json_and_parquet_with_known_params(data, fitted, tmp_path, kind):
    stock_model_cls = KINDS[kind].stock_model
    model = fitted(kind).copy().setDevice("cpu")
    path = str(tmp_path / kind)
    model.save(path)
    assert sorted(os.listdir(path)) == ["data", "metadata"]
    for f in _files(path):
        name = os.path.basename(f)
        if name.startswith(".") and name.endswith(".crc") or name == "_SUCCESS":
            continue
        with open(f, "rb") as fh:
            head = fh.read(4)
        assert not head.startswith(b"\x80"), f"{f} looks like a pickle"
        assert not name.endswith((".pkl", ".pickle", ".pt", ".pth", ".npy")), f
        if os.path.basename(os.path.dirname(f)) == "data":
            assert head == b"PAR1", f"{f} is not Parquet"
        else:
            assert os.path.basename(os.path.dirname(f)) == "metadata", f
    lines = [
        line
        for f in _files(os.path.join(path, "metadata"))
        if os.path.basename(f).startswith("part-")
        for line in open(f, encoding="utf-8")
        if line.strip()
    ]
    assert len(lines) == 1
    metadata = json.loads(lines[0])
    assert (
        metadata["class"]
        == f"org.apache.spark.ml.{stock_model_cls.__module__.split('.')[-1]}.{stock_model_cls.__name__}"
    )
    assert metadata["uid"] == model.uid
    stock = stock_model_cls.load(path)
    for section in ("paramMap", "defaultParamMap"):
        names = set(metadata[section])
        assert not names & set(TORCH_PARAM_NAMES), section
        unknown = [n for n in names if not stock._java_obj.hasParam(n)]
        assert not unknown, f"{section} has Params MLlib does not know: {unknown}"
    assert metadata["paramMap"].keys() == {p.name for p in model._paramMap} - set(TORCH_PARAM_NAMES)
    assert metadata["sparkml"]["paramMap"]["device"] == "cpu"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_write_overwrite_save(data, fitted, tmp_path, kind):
    our_model_cls, stock_model_cls = KINDS[kind].model, KINDS[kind].stock_model
    model = fitted(kind)
    path = str(tmp_path / kind)
    model.save(path)
    changed = model.copy().setPredictionCol("second")
    with pytest.raises(Exception):
        changed.save(path)  # the path exists: refused, as in MLlib
    assert our_model_cls.load(path).getPredictionCol() == "prediction"
    changed.write().overwrite().save(path)
    assert our_model_cls.load(path).getPredictionCol() == "second"
    assert stock_model_cls.load(path).getPredictionCol() == "second"
    assert_same_numbers(our_model_cls.load(path), model)
