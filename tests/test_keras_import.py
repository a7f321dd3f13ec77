"""Keras models imported as they are: the same outputs as ``model(x)`` on every backend, one training step equal to
Keras' own, trained parameters written back, and typed refusals of what cannot be translated."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

import toolkit
from tests.conftest import needs_all_backends
from tests.helpers import max_abs_diff

pytestmark = pytest.mark.skipif(importlib.util.find_spec("keras") is None,
                                reason='needs keras (pip install "multigpu-toolkit[tensorflow]")')

RNG = np.random.default_rng(12)
IMAGES, LABELS = RNG.normal(size=(6, 8, 8, 1)), RNG.integers(0, 5, size=6)
IDS = np.array([[3, 1, 4, 1, 0, 0], [5, 9, 2, 6, 5, 3], [0, 0, 0, 0, 0, 0], [2, 7, 0, 0, 0, 0]], np.int32)
#: Padded sequences, none empty (an average over no steps is 0 / 0, in Keras too).
TOKENS = np.array([[3, 1, 4, 1, 0, 0], [5, 9, 2, 6, 5, 3], [7, 0, 0, 0, 0, 0], [2, 7, 0, 0, 0, 0],
                   [8, 8, 1, 0, 0, 0], [4, 0, 0, 0, 0, 0]], np.int32)
#: Keras rounds its learning rate to float32: a power of two is the same number in float64.
LR = 2.0 ** -4


def _convnet(keras, dropout=0.3):
    keras.utils.set_random_seed(1)
    model = keras.Sequential([
        keras.Input((8, 8, 1)),
        keras.layers.Conv2D(4, 3, padding="same", activation="relu"),
        keras.layers.BatchNormalization(),
        keras.layers.MaxPooling2D(2),
        keras.layers.Conv2D(6, 3, strides=2, padding="same"),
        keras.layers.ReLU(),
        keras.layers.Flatten(),
        keras.layers.Dropout(dropout),
        keras.layers.Dense(5, activation="softmax"),
    ])
    model.compile(optimizer=keras.optimizers.SGD(LR), loss="sparse_categorical_crossentropy")
    # Moving statistics other than the initial ones, so that inference really uses them.
    model.layers[1].set_weights([w + RNG.normal(size=w.shape) * 0.1 + (1.0 if i == 3 else 0.0)
                                 for i, w in enumerate(model.layers[1].get_weights())])
    return model


def _text(keras):
    keras.utils.set_random_seed(2)
    model = keras.Sequential([
        keras.Input((6,), dtype="int32"),
        keras.layers.Embedding(10, 4, mask_zero=True),
        keras.layers.LSTM(5),
        keras.layers.LayerNormalization(),
        keras.layers.Dense(3, activation="sigmoid"),
        keras.layers.Activation("tanh"),
    ])
    model.compile(loss=keras.losses.MeanSquaredError())
    return model


def _branched(keras, dropout=0.3, synchronized=False):
    """A functional convnet with branches: a residual Add of three tensors and a Concatenate of two poolings."""
    keras.utils.set_random_seed(3)
    inputs = keras.Input((8, 8, 1))
    x = keras.layers.Conv2D(4, 3, padding="same", activation="relu")(inputs)
    normalized = keras.layers.BatchNormalization(synchronized=synchronized)(x)
    x = keras.layers.Add()([x, keras.layers.Conv2D(4, 1)(x), normalized])
    x = keras.layers.Concatenate()([keras.layers.MaxPooling2D(2)(x), keras.layers.AveragePooling2D(2)(x)])
    x = keras.layers.Dropout(dropout)(keras.layers.Flatten()(x))
    model = keras.Model(inputs, keras.layers.Dense(5, activation="softmax")(x))
    model.compile(optimizer=keras.optimizers.SGD(LR), loss="sparse_categorical_crossentropy")
    return model


def _attention(keras):
    """A functional Transformer block on padded tokens: causal self-attention under the Embedding's mask, a residual
    Add, layer normalization and a masked average. ``key_dim=4``: Keras scales the queries by ``1/sqrt(key_dim)``
    rounded to float32 (see tests/test_keras_layers.py), which is exact for 4."""
    keras.utils.set_random_seed(4)
    inputs = keras.Input((6,), dtype="int32")
    x = keras.layers.Embedding(10, 4, mask_zero=True)(inputs)
    attended = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)(x, x, use_causal_mask=True)
    x = keras.layers.GlobalAveragePooling1D()(keras.layers.LayerNormalization()(keras.layers.Add()([x, attended])))
    model = keras.Model(inputs, keras.layers.Dense(5)(x))
    model.compile(optimizer=keras.optimizers.SGD(LR),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


#: Each model the tests import, with the inputs it takes.
MODELS = {"convnet": (_convnet, IMAGES), "text": (_text, IDS), "branched": (_branched, IMAGES),
          "attention": (_attention, TOKENS)}


def test_imported_models_compute_what_keras_computes(keras, backend, n_devices):
    for factory, x in MODELS.values():
        model = factory(keras)
        imported = toolkit.from_keras(model)
        trainer = toolkit.DataParallel(imported, backend, n_devices, toolkit.optim.SGD(0.1), dtype="float64")
        np.testing.assert_allclose(trainer.predict(x), np.asarray(model(x, training=False)), rtol=0, atol=1e-10)


def _keras_weights(model) -> dict[str, np.ndarray]:
    """A Keras model's weights by path below the model (``dense/kernel``), which is how from_keras names them."""
    return {w.path.removeprefix(model.name + "/"): np.asarray(w.numpy()) for w in model.weights}


@pytest.mark.parametrize("name", ["convnet", "branched", "attention"])
def test_a_training_step_equals_keras(keras, backend, name):
    """Without dropout (whose masks differ by design), one SGD step on one device equals Keras' fit step: the
    loss, the batch statistics and the gradients all agree."""
    factory, x = MODELS[name]
    model = factory(keras, dropout=0.0) if name != "attention" else factory(keras)
    trainer = toolkit.DataParallel(toolkit.from_keras(model), backend, 1, toolkit.optim.SGD(LR), dtype="float64")
    loss = trainer.step(x, LABELS)
    keras_loss = model.train_on_batch(x, LABELS)
    assert abs(loss - float(keras_loss)) <= 1e-10
    weights = _keras_weights(model)
    assert set(trainer.params()) | set(trainer.state()) == set(weights)
    assert max_abs_diff({**trainer.params(), **trainer.state()}, weights) <= 1e-10


@needs_all_backends
@pytest.mark.parametrize("name", ["branched", "attention"])
def test_imported_models_fit_like_keras_fit_under_mirrored_strategy(keras, backend, n_devices, name):
    """Keras' own ``fit`` under MirroredStrategy on two TensorFlow devices, and the toolkit's ``fit`` of the imported
    model on every backend and device count: the same parameters and moving statistics after an epoch (float64,
    in order, no dropout; batch normalization synchronized, which Keras computes across its replicas)."""
    import tensorflow as tf

    factory, x = MODELS[name]
    x, y = np.concatenate([x, x[::-1]]), np.concatenate([LABELS, LABELS[::-1]])  # three batches of 4: even splits
    # ReductionToOneDevice: the default collectives fail on the Embedding's sparse gradient here (TensorFlow 2.21:
    # "Shape mismatch in the collective instance", a [189] buffer on one replica, [4] on the other).
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"],
                                              cross_device_ops=tf.distribute.ReductionToOneDevice())
    from_logits = name == "attention"  # its last Dense has no softmax
    with strategy.scope():
        model = factory(keras, dropout=0.0, synchronized=True) if name == "branched" else factory(keras)
        model.compile(optimizer=keras.optimizers.SGD(LR), loss=model.loss,
                      metrics=["accuracy", keras.metrics.SparseCategoricalCrossentropy(from_logits=from_logits)])
    trainer = toolkit.DataParallel(toolkit.from_keras(model), backend, n_devices, toolkit.optim.SGD(LR),
                                   dtype="float64")
    history = trainer.fit(x, y, epochs=1, batch_size=4, shuffle=False, verbose=0, metrics=[
        "accuracy", toolkit.metrics.sparse_categorical_crossentropy(from_logits=from_logits)])
    keras_history = model.fit(x, y, epochs=1, batch_size=4, shuffle=False, verbose=0)
    assert sorted(history.history) == sorted(keras_history.history)  # loss and Keras' two training metrics
    for metric, values in keras_history.history.items():
        assert abs(history.history[metric][0] - values[0]) <= 1e-10, metric
    assert max_abs_diff({**trainer.params(), **trainer.state()}, _keras_weights(model)) <= 1e-10


def test_trained_parameters_go_back_to_keras(keras, backend, tmp_path):
    model = _convnet(keras)
    trainer = toolkit.DataParallel(toolkit.from_keras(model), backend, 2, toolkit.optim.Adam(0.01), dtype="float64")
    for _ in range(2):
        trainer.step(IMAGES, LABELS)
    toolkit.to_keras(trainer.params(), model, trainer.state())
    np.testing.assert_allclose(np.asarray(model(IMAGES, training=False)), trainer.predict(IMAGES), rtol=0,
                               atol=1e-10)
    model.save(tmp_path / "trained.keras")  # a model trained on any backend saves with Keras
    with pytest.raises(toolkit.KerasImportError, match="no value for"):
        toolkit.to_keras(trainer.params(), model)  # the moving statistics are missing
    # the same architecture built again (other generated layer names): matched by structure with model=
    again = _convnet(keras)
    with pytest.raises(toolkit.KerasImportError, match="no value for .*pass model=trainer.model"):
        toolkit.to_keras(trainer.params(), again, trainer.state())
    toolkit.to_keras(trainer.params(), again, trainer.state(), model=trainer.model)
    np.testing.assert_allclose(np.asarray(again(IMAGES, training=False)), trainer.predict(IMAGES), rtol=0,
                               atol=1e-10)
    other = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Conv2D(4, 3, padding="same"),
                              keras.layers.Flatten(), keras.layers.Dense(5)])
    before = [w.copy() for w in other.get_weights()]
    with pytest.raises(toolkit.KerasImportError, match="has 4 weights, .* has 10: not the same architecture"):
        toolkit.to_keras(trainer.params(), other, trainer.state(), model=trainer.model)
    assert all(np.array_equal(a, b) for a, b in zip(other.get_weights(), before))


def test_what_cannot_be_translated_is_refused(keras):
    """What from_keras cannot apply exactly is a KerasImportError naming the layer and the setting (the argument
    walk of test_keras_import_settings covers every argument; graph refusals are in test_keras_graphs)."""
    cases = [
        (keras.Sequential([keras.Input((6, 2)), keras.layers.LSTM(2, recurrent_dropout=1.0)]),
         "LSTM.*recurrent_dropout=1"),
        (keras.Sequential([keras.Input((4, 4, 1)), keras.layers.UpSampling2D(interpolation="bilinear")]),
         "interpolation='bilinear'"),
        (keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)]), "has no loss"),
    ]
    tokens = keras.Input((6,), dtype="int32")
    embedded = keras.layers.Embedding(10, 4, mask_zero=True)(tokens)
    cases += [
        (keras.Model(tokens, keras.layers.Concatenate()([embedded, embedded])), "Concatenate.*masked inputs"),
    ]
    for model, words in cases:
        with pytest.raises(toolkit.KerasImportError, match=words):
            toolkit.from_keras(model)


def test_keras_first_then_logical_devices_says_what_to_do():
    """Building a Keras model starts TensorFlow with its devices fixed: asking for logical devices afterwards is an
    error that says to ask first (a fresh process, since this one already has its devices)."""
    program = ("import keras, toolkit\n"
               "keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])(keras.ops.ones((1, 3)))\n"
               "try:\n    toolkit.use_logical_devices(2)\n"
               "except toolkit.LogicalDevicesError as error:\n    print(error)\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if k != "XLA_FLAGS"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "building a Keras model: call toolkit.use_logical_devices before using Keras" in done.stdout


def test_logical_devices_then_keras_then_a_trainer_works():
    """The README's order: logical devices first, then Keras code (which imports TensorFlow and, building a model,
    starts it), then a trainer on those devices. TensorFlow gets its devices the moment it is imported (a fresh
    process, since this one already has its devices)."""
    program = ("import numpy as np, toolkit\n"
               "toolkit.use_logical_devices(2)\n"
               "import keras\n"
               "model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])\n"
               "model(keras.ops.ones((1, 3)))\n"
               "model.compile(loss='mse')\n"
               "trainer = toolkit.DataParallel(toolkit.from_keras(model), 'tensorflow', 2, toolkit.optim.SGD(0.1))\n"
               "trainer.step(np.ones((4, 3), 'float32'), np.zeros((4, 2), 'float32'))\n"
               "print([str(d) for d in trainer.devices])\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if k != "XLA_FLAGS"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("['cpu:0', 'cpu:1']")
