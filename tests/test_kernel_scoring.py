"""KernelSVC's batch scoring (``sparkml.scoring.batch``) against numpy: the tiled kernel product, the
per-worker cache of the landmarks and coefficients, the device."""

import numpy as np
import pyarrow as pa
import pytest
from sklearn.metrics import pairwise
from support.devices import DEVICES

from sparkml.gpu.feature_maps import FourierSpec, NystroemSpec
from sparkml.scoring import batch as prediction
from sparkml.scoring.kinds import KINDS
from sparkml.scoring.spec import ScoringSpec

GAMMA = 0.07


def _batch(x):
    n, d = x.shape
    return pa.ListArray.from_arrays(pa.array(np.arange(0, n * d + 1, d, dtype=np.int32)), pa.array(x.ravel()))


def _model(rng, classes):
    landmarks, projection = rng.normal(size=(300, 5)), 0.1 * rng.normal(size=(300, 280))
    theta, intercept = rng.normal(size=(classes, 280)), rng.normal(size=classes)
    spec = NystroemSpec("rbf", landmarks, projection, GAMMA, 3, 0.0)
    return spec, np.ascontiguousarray(theta @ projection.T), intercept  # P folded in, as KernelSVCModel does


def _folded(spec, coef, intercept, device="cpu"):
    """The scoring spec of a Nystroem model whose projection is already folded into ``coef``."""
    return ScoringSpec(KINDS["svc"], coef, intercept, feature_map=spec, kernel_block=True, device=device)


def _outputs(struct):
    raw = np.array(struct.field("raw").to_pylist())
    return raw, struct.field("pred").to_numpy()


@pytest.mark.parametrize("device", ["auto"] + DEVICES)
@pytest.mark.parametrize("classes", [1, 3])
def test_nystroem_scores_are_the_kernel_rows_times_the_folded_coefficients(classes, device):
    rng = np.random.default_rng(0)
    spec, coef, intercept = _model(rng, classes)
    x = rng.normal(size=(2500, 5))  # several of the cache-sized tiles
    raw, pred = _outputs(prediction.score_batch(_batch(x), _folded(spec, coef, intercept, device)))
    margins = pairwise.rbf_kernel(x, spec.landmarks, gamma=GAMMA) @ coef.T + intercept
    if classes == 1:
        np.testing.assert_allclose(raw, np.stack([-margins[:, 0], margins[:, 0]], 1), rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(pred, (margins[:, 0] > 0).astype(float))
    else:
        np.testing.assert_allclose(raw, margins, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(pred, margins.argmax(1).astype(float))


def test_random_fourier_scores_are_the_features_times_the_coefficients():
    rng = np.random.default_rng(1)
    spec = FourierSpec("rbf", rng.normal(size=(5, 64)), rng.uniform(0, 2 * np.pi, 64))
    coef, intercept = rng.normal(size=(1, 64)), np.array([0.3])
    x = rng.normal(size=(100, 5))
    raw, _ = _outputs(prediction.score_batch(_batch(x), ScoringSpec(KINDS["svc"], coef, intercept, feature_map=spec)))
    z = np.sqrt(2 / 64) * np.cos(x @ spec.frequencies + spec.offsets)
    np.testing.assert_allclose(raw[:, 1], z @ coef[0] + intercept[0], rtol=1e-12, atol=1e-12)


def test_each_worker_builds_a_models_tensors_once_and_keeps_a_few_models():
    rng = np.random.default_rng(2)
    prediction._DEVICE_MAPS.clear()
    spec, coef, intercept = _model(rng, 1)
    model = _folded(spec, coef, intercept)
    key = model.fingerprint
    x = _batch(rng.normal(size=(10, 5)))
    for _ in range(3):  # three batches of one model: one entry, the same tensors
        prediction.score_batch(x, model)
    assert list(prediction._DEVICE_MAPS) == [(key, "cpu")]
    first = prediction._DEVICE_MAPS[(key, "cpu")]
    prediction.score_batch(x, _folded(spec, coef, intercept))  # the same model built again: the same key
    assert prediction._DEVICE_MAPS[(key, "cpu")] is first
    # another model's coefficients are another entry; the oldest entries go past the bound
    keys = []
    for j in range(prediction._DEVICE_MAPS_KEPT + 1):
        other = _folded(spec, coef + j + 1, intercept)
        keys.append(other.fingerprint)
        prediction.score_batch(x, other)
    assert key not in {k for k, _ in prediction._DEVICE_MAPS}
    assert [k for k, _ in prediction._DEVICE_MAPS] == keys[-prediction._DEVICE_MAPS_KEPT :]
    prediction._DEVICE_MAPS.clear()
