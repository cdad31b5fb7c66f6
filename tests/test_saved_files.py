"""Files saved by an earlier version of the library still load: ``tests/data/saved_0_1_0`` was written when every
estimator carried every Param this library adds (KernelSVC included the averaging, parameter-server and gossip
Params it refused)."""

import os

import numpy as np
import pytest

pytest.importorskip("pyspark")

from pyspark.ml.linalg import Vectors
from support.helpers import ROOT

from sparkml.classification import KernelSVC, KernelSVCModel, LogisticRegression

SAVED = os.path.join(ROOT, "tests", "data", "saved_0_1_0")


def test_kernel_svc_estimator_saved_with_retired_params_loads(spark):
    est = KernelSVC.load(os.path.join(SAVED, "kernel_svc_estimator"))
    assert est.uid == "KernelSVC_cb16fa944137"
    assert (est.getRegParam(), est.getNumLandmarks(), est.getMaxIter(), est.getSeed()) == (0.01, 20, 20, 3)
    assert not any(est.hasParam(p) for p in ("localIter", "staleness", "topology"))
    assert est.getStrategy() == "auto" and est.getNumWorkers() == 0


def test_kernel_svc_model_saved_before_scores_the_same(spark):
    model = KernelSVCModel.load(os.path.join(SAVED, "kernel_svc_model"))
    probe = [Vectors.dense([0.1, 0.2]), Vectors.dense([1.5, -1.0]), Vectors.dense([-0.3, 2.0])]
    expected = np.load(os.path.join(SAVED, "kernel_svc_probe_raw.npy"), allow_pickle=False)
    np.testing.assert_allclose([model.predictRaw(v).toArray() for v in probe], expected, rtol=0, atol=1e-12)


def test_logistic_estimator_saved_before_keeps_its_params(spark):
    est = LogisticRegression.load(os.path.join(SAVED, "logistic_estimator"))
    assert (est.getRegParam(), est.getLocalIter(), est.getStrategy()) == (0.1, 5, "averaging")


def test_kernel_svc_has_no_param_it_would_refuse():
    assert not any(KernelSVC().hasParam(p) for p in ("localIter", "staleness", "topology"))
    with pytest.raises(TypeError):
        KernelSVC(localIter=5)
