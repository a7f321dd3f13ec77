"""Training at a new sequence length (issue 28): a model whose input declares a free axis (Keras'
``Input(shape=(None,))``, or :attr:`toolkit.Model.input_shape`) takes batches that change length between steps, each
new shape compiling its own step, and trains as Keras' own ``fit`` does on the same batches; any other change of
shape is still refused with a :class:`~toolkit.ShapeError` before anything runs."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import toolkit
from toolkit.errors import ArgumentTypeError, ShapeError
from toolkit.training.batches import BatchCheck

needs_keras = pytest.mark.skipif(importlib.util.find_spec("keras") is None
                                 or importlib.util.find_spec("tensorflow") is None,
                                 reason='needs keras on TensorFlow (pip install "multigpu-toolkit[tensorflow]")')

#: Keras rounds its learning rate to float32: a power of two is the same number in float64.
LR = 2.0 ** -4
#: float64 agreement with Keras on TensorFlow: the same formulas, summed in possibly different orders.
TOLERANCE = 1e-10
#: Examples per fit, examples per step (two steps, split 2 + 2 on two devices), and the two sequence lengths.
EXAMPLES, BATCH, LONG, SHORT = 8, 4, 6, 3


# --- the check alone (no framework) --------------------------------------------------------------------------------
def test_batch_check_lets_only_the_free_axes_change():
    check = BatchCheck("float64", input_shape=(None, 2), output_shape=(None,))
    x, y = np.zeros((4, 5, 2)), np.zeros((4, 5))
    check(x, y)
    check.accept()
    got_x, got_y = check(np.ones((3, 7, 2)), np.ones((3, 7)))  # a new length, on the free axes of x and y
    assert got_x.shape == (3, 7, 2) and got_y.shape == (3, 7)
    with pytest.raises(ShapeError, match=r"x has examples of shape \(5, 3\); the model takes examples of shape "
                                         r"\(None, 2\)"):
        check(np.zeros((4, 5, 3)), y)  # a fixed axis
    with pytest.raises(ShapeError, match="the model takes examples of shape"):
        check(np.zeros((4, 5)), y)  # another rank
    with pytest.raises(ShapeError, match=r"keep the shapes of the first batch.*free example axes \{'x': \[0\], "
                                         r"'y': \[0\]\}\); got y \(5, 1\)"):
        check(x, np.zeros((4, 5, 1)))  # targets of another rank
    assert check.spec == {"x": ((5, 2), "f"), "y": ((5,), "f")}  # what was refused was not taken


def test_batch_check_declared_per_input_and_nothing_declared_keeps_the_first_shapes():
    check = BatchCheck("float64", input_shape={"tokens": (None,), "extra": (3,)})
    check({"tokens": np.zeros((2, 4)), "extra": np.zeros((2, 3))}, np.zeros(2))
    check.accept()
    check({"tokens": np.zeros((2, 9)), "extra": np.zeros((2, 3))}, np.zeros(2))
    with pytest.raises(ShapeError, match=r"x\['extra'\] has examples of shape \(4,\)"):
        check({"tokens": np.zeros((2, 9)), "extra": np.zeros((2, 4))}, np.zeros(2))
    fixed = BatchCheck("float64")  # a model of the user's that declares nothing: the first batch fixes every axis
    fixed(np.zeros((2, 4)), np.zeros(2))
    fixed.accept()
    with pytest.raises(ShapeError, match=r"keep the shapes of the first batch: \{'x': \(4,\), 'y': \(\)\}; got x "
                                         r"\(5,\)"):
        fixed(np.zeros((2, 5)), np.zeros(2))


@pytest.mark.parametrize("bad", [(None, -1), (2.0,), "(None,)", {}, {"x": [None, True]}])
def test_model_refuses_a_malformed_input_shape(bad):
    with pytest.raises(ArgumentTypeError, match="Model.input_shape"):
        toolkit.Model(lambda rng: {"w": np.zeros(1)}, lambda ops, p, x: x, lambda ops, out, y: out,
                      input_shape=bad)


# --- against Keras' own fit ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def reference(keras):
    """The smallest Keras model with a free axis (Embedding over ``Input(shape=(None,))``, global average pooling,
    softmax Dense), imported before training; then Keras' own fit at length LONG, and at length SHORT with
    validation at LONG: each fit's loss, the validation loss, the weights after both."""
    keras.utils.set_random_seed(28)
    layers = keras.layers
    inputs = keras.Input(shape=(None,), dtype="int32")
    x = layers.GlobalAveragePooling1D()(layers.Embedding(7, 3, name="tokens")(inputs))
    model = keras.Model(inputs, layers.Dense(2, activation="softmax", name="out")(x))
    model.compile(optimizer=keras.optimizers.SGD(LR), loss="sparse_categorical_crossentropy")
    rng = np.random.default_rng(28)
    data = {length: (rng.integers(0, 7, (EXAMPLES, length)), rng.integers(0, 2, EXAMPLES))
            for length in (LONG, SHORT)}
    imported = toolkit.from_keras(model)
    fit = {"batch_size": BATCH, "epochs": 1, "shuffle": False, "verbose": 0}
    long_fit = model.fit(*data[LONG], **fit).history
    short_fit = model.fit(*data[SHORT], validation_data=data[LONG], **fit).history
    return imported, data, long_fit, short_fit, [np.array(w) for w in model.get_weights()]


@needs_keras
@pytest.mark.parametrize("devices", [1, 2], ids=["1dev", "2dev"])
def test_keras_fit_at_two_lengths_equals_keras(reference, backend, devices):
    imported, data, long_fit, short_fit, weights = reference
    assert imported.input_shape == (None,) and imported.output_shape == (2,)
    trainer = toolkit.DataParallel(imported, backend, devices, toolkit.optim.SGD(LR), dtype="float64")
    fit = {"batch_size": BATCH, "epochs": 1, "shuffle": False, "verbose": 0}
    got = trainer.fit(*data[LONG], **fit).history  # batches of one length: as before
    np.testing.assert_allclose(got["loss"], long_fit["loss"], rtol=0, atol=TOLERANCE)
    got = trainer.fit(*data[SHORT], validation_data=data[LONG], **fit).history
    np.testing.assert_allclose(got["loss"], short_fit["loss"], rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(got["val_loss"], short_fit["val_loss"], rtol=0, atol=TOLERANCE)
    before = trainer.params()
    assert sorted(before) == ["out/bias", "out/kernel", "tokens/embeddings"]
    for got, keras_trained in zip([before[k] for k in ("tokens/embeddings", "out/kernel", "out/bias")], weights):
        np.testing.assert_allclose(got, keras_trained, rtol=0, atol=TOLERANCE)
    with pytest.raises(ShapeError, match="the model takes examples of shape"):
        trainer.step(data[SHORT][0][:, :, None], data[SHORT][1])  # another rank: refused, nothing changed
    assert all(np.array_equal(before[k], v) for k, v in trainer.params().items())
