"""sparkml.catalog: the one table of public estimators and models, and the facades and jobs that read it. A new
estimator is its own module plus one row: shown with a toy one (``tests/support/toy_estimators``)."""

import numpy as np
import pytest

pytest.importorskip("pyspark")

import sparkml.classification
import sparkml.regression
from sparkml import catalog


def test_the_facades_export_exactly_the_catalog():
    for facade in (sparkml.classification, sparkml.regression):
        expected = [n for e in catalog.ENTRIES if e.facade == facade.__name__ for n in (e.name, e.model_name)]
        assert sorted(facade.__all__) == sorted(expected)


@pytest.mark.parametrize("entry", catalog.ENTRIES, ids=lambda e: e.name)
def test_public_names_and_saved_classes(entry):
    estimator = catalog.import_path(entry.estimator_path())
    model = catalog.import_path(entry.model_path())
    assert estimator.__module__ != entry.facade  # defined in its own module, found through the table
    assert catalog.public_class_name(estimator) == f"{entry.facade}.{entry.name}"
    assert catalog.public_class_name(model) == f"{entry.facade}.{entry.model_name}"
    assert model._java_class == entry.saved_class
    if entry.stock_model:
        assert model._stock_class is catalog.import_path(entry.stock_model)


def test_a_subclass_elsewhere_keeps_its_own_name():
    class LogisticRegression(sparkml.classification.LogisticRegression):
        pass

    assert catalog.public_class_name(LogisticRegression) == f"{__name__}.LogisticRegression"


def test_the_jobs_read_the_catalog():
    from sparkml.jobs import config

    for entry in catalog.ENTRIES:
        assert config.estimator_class(entry.name) is catalog.import_path(entry.estimator_path())
        assert config.task_of(entry.name) == entry.task
    with pytest.raises(config.ConfigError, match="expected one of LogisticRegression, LinearSVC, KernelSVC"):
        config.estimator_class("ToyRidge")


TOY = catalog.Entry(
    "ToyRidge",
    "support.toy_estimators",
    "support.toy_estimators",
    "regression",
    "support.toy_estimators.ToyRidgeModel",
    stock_model=None,
)


@pytest.fixture
def toy_row(monkeypatch):
    monkeypatch.setattr(catalog, "ENTRIES", (*catalog.ENTRIES, TOY))


def test_a_new_estimator_is_its_module_and_one_row(spark, toy_row, tmp_path):
    from support.data_helpers import linear_frame
    from support.helpers import coefficient_vector
    from support.toy_estimators import ToyRidge, ToyRidgeModel

    from sparkml.jobs import config, models

    frame = linear_frame(spark, n=300, d=3, partitions=2, seed=5).drop("label").withColumnRenamed("y", "label")
    toy = ToyRidge(regParam=0.1).fit(frame)
    stock = sparkml.regression.LinearRegression(regParam=0.1).fit(frame)
    assert type(toy) is ToyRidgeModel
    np.testing.assert_array_equal(coefficient_vector(toy), coefficient_vector(stock))
    with pytest.raises(ValueError, match="elasticNetParam must be 0"):
        ToyRidge(regParam=0.1, elasticNetParam=0.5).fit(frame)
    # the row is all the jobs and persistence need: built by name, named by its facade, loaded by its saved class
    assert config.estimator_class("ToyRidge") is ToyRidge and config.task_of("ToyRidge") == "regression"
    assert config.validate_params("ToyRidge", {"regParam": 0.5}) == {"regParam": 0.5}
    assert catalog.public_class_name(ToyRidge) == "support.toy_estimators.ToyRidge"
    toy.save(str(tmp_path / "model"))
    ToyRidge(regParam=0.1).save(str(tmp_path / "estimator"))
    loaded = models.load_dir(str(tmp_path / "model"), spark=spark)
    assert type(loaded) is ToyRidgeModel
    np.testing.assert_array_equal(coefficient_vector(loaded), coefficient_vector(toy))
    assert ToyRidge.load(str(tmp_path / "estimator")).getRegParam() == 0.1
    with pytest.raises(models.ModelError, match="no stock pyspark.ml twin"):
        models.model_class(models.read_metadata(str(tmp_path / "model")), flavor="pyspark")
