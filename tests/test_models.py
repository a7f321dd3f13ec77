"""The built-in real models (a ResNet, a Transformer language model, a masked-LSTM classifier, the Keras MNIST
convnet) train to the same numbers on every backend and device count.

Small sizes keep this fast; the models take any size. Float64, 5 Adam steps: the backends agree within
FLOAT64_ATOL on 1 and 4 devices with dropout and synchronized batch normalization on (FLOAT64_DEVICE_COUNTS), and 4
devices agree with one device (per-replica batch statistics depend on the split by design: tests/test_model_state.py
shows how)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import toolkit
from tests.conftest import THEANO, needs_all_backends
from tests.helpers import max_abs, max_abs_diff
from toolkit import datasets, models
from toolkit.tolerances import FLOAT64_ATOL, parity_bound

pytestmark = [pytest.mark.parity, needs_all_backends]

STEPS, BATCH, LR = 5, 8, 1e-3
#: One device and the most this suite configures. Two devices run the same mesh code as four (one shard_map or
#: replicated tf.function over n replicas): the float32 test below trains on 2, and tests/test_data_parallel.py and
#: tests/test_model_state.py cover every count on smaller models. Each count of the four models costs 40-100 s of
#: CPU per parity session (measured in CI).
FLOAT64_DEVICE_COUNTS = (1, 4)
#: PyTensor (the ``parity-pytensor`` session) runs the float64 comparison on one device: the 4-device step is the
#: Theano family's mesh code, the same on either engine, which ``parity`` runs on Aesara; PyTensor's device counts are
#: checked against one device in tests/test_data_parallel.py and tests/test_model_state.py (``tests-pytensor``).
ENGINE_ONE_DEVICE = "pytensor"
#: float32 Adam runs use this eps so that the derived bound (toolkit.tolerances.parity_bound) is tight enough to test.
FLOAT32_EPS = 1e-3

MODELS = {
    "resnet": (lambda: models.resnet((8, 8, 3), width=4, blocks=(1, 1), synchronized=True),
               lambda: datasets.synthetic_images(BATCH, size=8, test_fraction=0)),
    "transformer": (lambda: models.transformer_lm(vocab=128, seq_len=8, width=16, heads=2, depth=1),
                    lambda: datasets.zen_corpus(8, BATCH, test_fraction=0)),
    "lstm-text": (lambda: models.lstm_text(vocab=16, seq_len=6, embed=4, units=6),
                  lambda: datasets.synthetic_sequences(BATCH, seq_len=6, vocab=16, test_fraction=0)),
    "mnist-convnet": (lambda: models.mnist_convnet((8, 8, 1), filters=(4, 8), padding="same"),
                      lambda: tuple(a[:BATCH] for a in datasets.digits())),
}


#: The same models with per-replica batch statistics: on one device they are the synchronized ones, and
#: ``trainer.gradients`` (composed per device, where replicas cannot sum) takes them.
PLAIN_TWINS = {"resnet": lambda: models.resnet((8, 8, 3), width=4, blocks=(1, 1))}


@functools.cache
def _model(name, twin=False):
    return PLAIN_TWINS[name]() if twin else MODELS[name][0]()


@functools.cache
def _train(name, backend, n_devices, dtype):
    x, y, _, _ = MODELS[name][1]()
    optimizer = toolkit.optim.Adam(LR) if dtype == "float64" else toolkit.optim.Adam(LR, eps=FLOAT32_EPS)
    trainer = toolkit.DataParallel(_model(name), backend, n_devices, optimizer, dtype=dtype, seed=2)
    gradient = toolkit.DataParallel(_model(name, twin=name in PLAIN_TWINS), backend, 1, optimizer, dtype=dtype,
                                    seed=2).gradients(x, y)  # the global batch's first gradient
    losses = [trainer.step(x, y) for _ in range(STEPS)]
    return losses, trainer.params(), trainer.state(), max_abs(gradient), trainer.predict(x[:3])


@pytest.mark.parametrize("n_devices", FLOAT64_DEVICE_COUNTS, ids=lambda n: f"{n}dev")
@pytest.mark.parametrize("name", list(MODELS))
def test_backends_and_device_counts_agree_in_float64(name, n_devices):
    if THEANO == ENGINE_ONE_DEVICE and n_devices > 1:
        pytest.skip(f"{THEANO}: one device here; the mesh on {n_devices} devices runs on Aesara (ENGINE_ONE_DEVICE)")
    tf_run, aesara_run = (_train(name, b, n_devices, "float64") for b in ("tensorflow", THEANO))
    np.testing.assert_allclose(tf_run[0], aesara_run[0], rtol=0, atol=FLOAT64_ATOL)
    assert max_abs_diff(tf_run[1], aesara_run[1]) <= FLOAT64_ATOL
    if tf_run[2]:
        assert max_abs_diff(tf_run[2], aesara_run[2]) <= FLOAT64_ATOL
    np.testing.assert_allclose(tf_run[4], aesara_run[4], rtol=0, atol=FLOAT64_ATOL)
    assert tf_run[0][-1] < tf_run[0][0]  # it trains
    one = _train(name, THEANO, 1, "float64")
    np.testing.assert_allclose(aesara_run[0], one[0], rtol=0, atol=FLOAT64_ATOL)
    assert max_abs_diff(aesara_run[1], one[1]) <= FLOAT64_ATOL
    if one[2]:
        assert max_abs_diff(aesara_run[2], one[2]) <= FLOAT64_ATOL


@pytest.mark.parametrize("name", list(MODELS))
def test_backends_agree_in_float32_within_the_derived_bound(name):
    tf_run, aesara_run = (_train(name, b, 2, "float32") for b in ("tensorflow", THEANO))
    bound = parity_bound("float32", toolkit.optim.Adam(LR, eps=FLOAT32_EPS), STEPS, grad_scale=tf_run[3],
                         param_scale=max_abs(tf_run[1]))
    assert max_abs_diff(tf_run[1], aesara_run[1]) <= bound


def test_transformer_dropout_changes_training_but_not_inference():
    x, y, _, _ = MODELS["transformer"][1]()
    plain = models.transformer_lm(vocab=128, seq_len=8, width=16, heads=2, depth=1, dropout=0.0)
    runs = {}
    for model in (_model("transformer"), plain):
        trainer = toolkit.DataParallel(model, THEANO, 1, toolkit.optim.SGD(1e-300), dtype="float64", seed=2)
        runs[model] = (trainer.loss(x, y), trainer.predict(x))
    assert abs(runs[plain][0] - runs[_model("transformer")][0]) > 1e-6
    np.testing.assert_allclose(runs[plain][1], runs[_model("transformer")][1], rtol=0, atol=1e-12)
