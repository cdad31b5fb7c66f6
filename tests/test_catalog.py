"""sparkml.catalog: the one table of public estimators and models, and the facades and jobs that read it."""

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
    from sparkml.jobs import config, models

    assert set(config.ESTIMATORS) == set(catalog.BY_NAME)
    assert set(models.MODEL_CLASSES) == set(catalog.BY_SAVED_CLASS)
    assert config.task_of("LinearRegression") == "regression"
