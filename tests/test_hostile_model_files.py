"""Damaged or hostile model directories are refused with a ``ModelFileError`` (a ValueError) that names the
offending file and the problem, before any model object is built, by each of the three loaders: the Spark-side
``Model.load``, ``sparkml.serving.load`` and MLflow's python_function loader (``sparkml.serving._load_pyfunc``).
They share one reader (``sparkml.saved.model_files``); a planted pickle is never unpickled, and nothing the files
name is imported.

One small model per kind is fitted and saved once; each case copies the saved directory, damages the copy
(tests/support/model_damages.py, tests/support/row_damages.py) and loads it. File, metadata and Param damages go
through the same code for every class, so ``make test`` runs each of them on one kind per loader (rotating) and
``make test-full`` on all; the damages to the Parquet row depend on the class's columns and run on every kind.
"""

import os
import pickle
import re
import shutil

import pytest
from support.model_damages import (
    FILE_DAMAGES,
    KINDS,
    LOADERS,
    PARAM_DAMAGES,
    SENTINEL,
    edit_metadata,
    plant_pickle,
    replace_bytes,
    the_file,
)
from support.row_damages import COEFFICIENTS, MATRIX_ONLY, ROW_DAMAGES, intercepts_one_short, udt_planted_in_the_schema

from sparkml import serving
from sparkml.base.persistence import ModelFileError
from sparkml.classification import KernelSVC, LogisticRegression


@pytest.fixture(scope="module")
def saved(spark, tmp_path_factory):
    """kind -> the directory its fitted model was saved to."""
    from support.data_helpers import linear_frame

    df = linear_frame(spark, n=240, partitions=2)
    root = tmp_path_factory.mktemp("saved")
    paths = {}
    for kind, (estimator, params, _) in KINDS.items():
        paths[kind] = str(root / kind)
        estimator(**params).fit(df).save(paths[kind])
    df.unpersist()
    return paths


def _kinds(damage):
    return [k for k in sorted(KINDS) if k in getattr(damage, "kinds", KINDS)]


def cases():
    loaders = list(LOADERS)
    for i, damage in enumerate([*FILE_DAMAGES, *PARAM_DAMAGES, udt_planted_in_the_schema]):
        kinds = _kinds(damage)
        for li, loader in enumerate(loaders):
            for j, kind in enumerate(kinds):
                marks = () if j == (i + li) % len(kinds) else (pytest.mark.full,)
                yield pytest.param(loader, kind, damage, marks=marks, id=f"{loader}-{kind}-{damage.__name__}")
    for damage in ROW_DAMAGES:
        for kind in _kinds(damage):
            if damage in MATRIX_ONLY and COEFFICIENTS[kind] == "coefficients":
                continue
            for loader in loaders:
                yield pytest.param(loader, kind, damage, id=f"{loader}-{kind}-{damage.__name__}")


@pytest.mark.parametrize("loader, kind, damage", list(cases()))
def test_a_damaged_model_is_refused_naming_the_file(saved, tmp_path, monkeypatch, loader, kind, damage):
    monkeypatch.syspath_prepend(str(tmp_path))  # where a planted module would be imported from
    model_dir = str(tmp_path / "model")
    shutil.copytree(saved[kind], model_dir)
    sentinel = tmp_path / SENTINEL
    named, problem = damage(model_dir, kind, sentinel)
    with pytest.raises(ModelFileError, match=problem) as info:
        LOADERS[loader](kind, model_dir)
    assert isinstance(info.value, ValueError)
    assert named in str(info.value), str(info.value)
    assert not sentinel.exists()


def test_the_planted_pickle_is_armed(tmp_path):
    """What the planted files would do if anything unpickled them (the tests above: nothing does)."""
    sentinel = tmp_path / SENTINEL
    pickle.loads(plant_pickle(sentinel))
    assert sentinel.exists()


@pytest.mark.parametrize("loader", sorted(LOADERS))
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_undamaged_copy_loads(saved, tmp_path, kind, loader):
    model_dir = str(tmp_path / "model")
    shutil.copytree(saved[kind], model_dir)
    model = LOADERS[loader](kind, model_dir)
    if loader == "spark":
        assert type(model) is KINDS[kind][2]
    else:
        scorer = model if loader == "serving" else model.scorer
        assert scorer.model_class == KINDS[kind][2].__name__ and isinstance(
            model, (serving.Scorer, serving.PandasModel)
        )


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_a_path_with_spaces_and_glob_characters_loads(saved, tmp_path, loader):
    """The directory is read as it is named: a space, %20 or [1] is no URI escape or glob pattern."""
    model_dir = str(tmp_path / "a b%20[1]{x}" / "model")
    shutil.copytree(saved["lr_binary"], model_dir)
    assert LOADERS[loader]("lr_binary", model_dir) is not None
    os.remove(the_file(model_dir, "data"))
    with pytest.raises(ModelFileError, match=re.escape(f"{model_dir}/data: expected one Parquet file, found 0")):
        LOADERS[loader]("lr_binary", model_dir)


def test_serving_errors_name_the_path_as_given(saved, tmp_path):
    """A ``file:`` URI or a trailing slash is the same directory; what is named is the path given."""
    model_dir = str(tmp_path / "model")
    shutil.copytree(saved["svc"], model_dir)
    assert serving.load(f"file:{model_dir}/").model_class == "LinearSVCModel"
    with pytest.raises(ModelFileError, match=f"^{tmp_path}/nowhere/metadata: no such directory"):
        serving.load(str(tmp_path / "nowhere"))


def test_a_registry_load_names_the_file_too(spark, saved, tmp_path):
    """``jobs.models.load_dir`` (what registry versions load through) gives the loader's error as a
    ModelError, naming the file in the directory it was given."""
    from sparkml.jobs import models

    model_dir = str(tmp_path / "model")
    shutil.copytree(saved["lr_multinomial"], model_dir)
    named, problem = intercepts_one_short(model_dir, "lr_multinomial", None)
    with pytest.raises(models.ModelError, match=problem) as info:
        models.load_dir(model_dir, spark=spark)
    assert named in str(info.value)


ESTIMATOR_DAMAGES = {  # name -> (damage of a saved estimator's directory, a piece of the message)
    "not_json": (lambda d, s: replace_bytes(the_file(d, "metadata"), b"{truncat"), "not JSON"),
    "foreign_class": (
        lambda d, s: edit_metadata(d, lambda m: {**m, "class": "os.system"}),
        "the class is 'os.system', expected 'sparkml.classification.",
    ),
    "uid_a_list": (lambda d, s: edit_metadata(d, lambda m: {**m, "uid": ["x"]}), "'uid' is list"),
    "unknown_param": (
        lambda d, s: edit_metadata(d, lambda m: {**m, "paramMap": {"evil": 1}}),
        "paramMap has Params a .* lacks: evil",
    ),
    "pickle_beside": (
        lambda d, s: replace_bytes(os.path.join(d, "metadata", "evil.pkl"), plant_pickle(s)),
        "evil.pkl: unexpected file",
    ),
}


@pytest.mark.parametrize(
    "estimator", [LogisticRegression, pytest.param(KernelSVC, marks=pytest.mark.full)], ids=lambda c: c.__name__
)
@pytest.mark.parametrize("name", sorted(ESTIMATOR_DAMAGES))
def test_a_damaged_estimator_is_refused_naming_the_file(spark, tmp_path, name, estimator):
    damage, problem = ESTIMATOR_DAMAGES[name]
    path = str(tmp_path / "estimator")
    estimator(maxIter=3).save(path)
    sentinel = tmp_path / SENTINEL
    damage(path, sentinel)
    with pytest.raises(ModelFileError, match=problem) as info:
        estimator.load(path)
    assert os.path.join(path, "metadata") in str(info.value)
    assert not sentinel.exists()
