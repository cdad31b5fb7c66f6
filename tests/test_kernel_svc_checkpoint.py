"""KernelSVC's checkpoints (``checkpointDir``; ``sparkml/optim/checkpoint.py`` and ``sparkml/optim/newton.py``):
a fit resumed from the checkpoint an uninterrupted fit wrote mid-way ends at that fit's model. The Newton
rounds alone (no Spark) are in ``tests/test_newton.py``; the checkpoint mechanism, the refusals and the killed
driver (LogisticRegression) in ``tests/test_checkpoint.py``.
"""

import logging
import os

import numpy as np
import pytest


def _kernel_svc_coefficients(model):
    return np.concatenate(
        [
            model.coefficientMatrix.toArray().ravel(),
            model.interceptVector.toArray(),
            [] if model.plattCoefficients is None else model.plattCoefficients.toArray().ravel(),
        ]
    )


@pytest.mark.parametrize(
    "label, strategy, landmarks",
    [("label", "sync", 40), ("label3", "allreduce", None)],
    ids=["binary-sync-cholesky", "multiclass-allreduce-cg-platt"],
)
def test_kernel_svc_resumed_from_a_checkpoint_ends_at_the_uninterrupted_model(
    data, tmp_path, caplog, label, strategy, landmarks
):
    """KernelSVC checkpoints its feature map once and its Newton rounds (the squared-hinge warm start's two,
    then the hinge's, counted together) every checkpointInterval. Binary: 40 k-means landmarks (H formed);
    three classes with numLandmarks unset: every one of the 600 rows a landmark (Newton-CG) and Platt scaling.
    The copy is taken at the end of the hinge's third round, before its checkpoint: the state of round 2 + 2.
    In float64: with float32 kernel blocks two plain fits can already differ by about 1e-5 (the float32 sums of
    a Newton round), and the resumed fit as much."""
    import shutil

    from sparkml.classification import KernelSVC

    params = dict(
        labelCol=label,
        strategy=strategy,
        regParam=1e-3,
        gamma=0.1,
        checkpointInterval=1,
        probability=label == "label3",
        tol=1e-8,
        dtype="float64",
    )
    if landmarks is not None:
        params["numLandmarks"] = landmarks
    directory, copy = str(tmp_path / "checkpoints"), str(tmp_path / "copy")

    def keep(event):
        if event.iteration == 3 and event.name.startswith("KernelSVC") and not os.path.exists(copy):
            shutil.copytree(directory, copy)

    reference = KernelSVC(checkpointDir=directory, **params)._add_iteration_callback(keep).fit(data)
    assert not os.path.exists(directory)
    assert sorted(os.listdir(copy)) == ["iteration-000004", "part-feature-map"]
    assert min(s.totalIterations for s in reference.summaries) > 3
    os.rename(copy, directory)
    with caplog.at_level(logging.INFO, logger="sparkml"):
        resumed = KernelSVC(checkpointDir=directory, **params).fit(data)
    logged = [r.getMessage() for r in caplog.records]
    assert any("resuming from the checkpoint" in m and "iteration 4" in m for m in logged)
    assert any("the feature-map comes from the checkpoint" in m for m in logged)
    assert not any("landmarks (relative residual trace" in m for m in logged)  # no landmark search again
    np.testing.assert_allclose(
        _kernel_svc_coefficients(resumed), _kernel_svc_coefficients(reference), rtol=0, atol=1e-9
    )
    for r, ref in zip(resumed.summaries, reference.summaries):
        assert r.totalIterations == ref.totalIterations
        assert r.message == ref.message + " (resumed from the checkpoint of round 4)"
        np.testing.assert_allclose(r.objectiveHistory, ref.objectiveHistory, rtol=1e-12)
    assert not os.path.exists(directory)
