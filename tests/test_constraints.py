"""Constraints (Keras' ``MaxNorm``, ``NonNeg``, ``UnitNorm``, ``MinMaxNorm``, and any a Model declares) applied to
the new values after each update, inside the step's all-or-nothing write, on every path: the fused step (1 and 2
devices: TensorFlow's tf.function, the Theano family's host and mesh steps) and the step composed over
micro-batches. Compared with Keras' own fit and train_on_batch in float64, and with NumPy."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import toolkit
from toolkit.nn import constraints

RNG = np.random.default_rng(4)
X, LABELS = RNG.normal(size=(10, 3)), RNG.integers(0, 3, size=10)
BATCH, EPOCHS = 4, 2
#: Keras rounds its learning rate to float32; this one is the same number in float64. Large enough that the
#: constraints bind (checked below).
LR = 0.5
TOLERANCE = 1e-10
MAX_NORM = 0.5


def _constrained(keras):
    """A classifier with each of Keras' four constraint classes, on kernels and biases."""
    keras.utils.set_random_seed(6)
    con = keras.constraints
    model = keras.Sequential([
        keras.Input((3,)),
        keras.layers.Dense(4, activation="tanh", kernel_constraint=con.MaxNorm(MAX_NORM),
                           bias_constraint=con.NonNeg(), name="capped"),
        keras.layers.Dense(3, activation="softmax", kernel_constraint=con.UnitNorm(axis=0),
                           bias_constraint=con.MinMaxNorm(0.25, 0.5, rate=0.75), name="unit")])
    model.compile(optimizer=keras.optimizers.SGD(LR), loss="sparse_categorical_crossentropy")
    return model


def _weights_diff(model, trainer) -> float:
    keras_weights = {"/".join(w.path.split("/")[-2:]): np.asarray(w.numpy()) for w in model.weights}
    return max(float(np.max(np.abs(trainer.params()[k] - v))) for k, v in keras_weights.items())


def test_keras_constraints_bind_as_in_keras_fit(keras, backend):
    """One device (the host step; the fused step on two devices is the next test's), then a step composed over
    micro-batches."""
    model = _constrained(keras)
    trainer = toolkit.DataParallel(toolkit.from_keras(model), backend, 1, toolkit.optim.SGD(LR), dtype="float64")
    history = trainer.fit(X, LABELS, epochs=EPOCHS, batch_size=BATCH, shuffle=False, verbose=0)
    expected = model.fit(X, LABELS, epochs=EPOCHS, batch_size=BATCH, shuffle=False, verbose=0).history
    assert np.max(np.abs(np.subtract(history.history["loss"], expected["loss"]))) <= TOLERANCE
    assert _weights_diff(model, trainer) <= TOLERANCE
    # the step composed over micro-batches applies them too
    loss = trainer.step(X, LABELS, micro_batches=2)
    assert abs(loss - float(model.train_on_batch(X, LABELS))) <= TOLERANCE
    assert _weights_diff(model, trainer) <= TOLERANCE
    params = trainer.params()
    norms = np.sqrt(np.sum(params["capped/kernel"] ** 2, axis=0))
    assert np.all(norms <= MAX_NORM) and np.max(norms) > MAX_NORM - 1e-6  # it binds
    assert np.all(params["capped/bias"] >= 0) and np.any(params["capped/bias"] == 0)
    np.testing.assert_allclose(np.sqrt(np.sum(params["unit/kernel"] ** 2, axis=0)), 1.0, atol=1e-6)


def test_a_model_declares_constraints_applied_on_every_path(backend):
    """The toolkit's own Model: NumPy's SGD step, then the constraint, on the fused step (2 devices) and the step
    composed over micro-batches; a constraint on a name that is no parameter is refused."""
    base = toolkit.models.mlp([3, 4, 3])
    model = dataclasses.replace(base, constraints={"w0": constraints.NonNeg(), "b1": constraints.MaxNorm(0.1)})
    trainer = toolkit.DataParallel(model, backend, 2, toolkit.optim.SGD(LR), dtype="float64")
    for micro_batches in (1, 2):
        before, grads = trainer.params(), trainer.gradients(X, LABELS)
        trainer.step(X, LABELS, micro_batches=micro_batches)
        expected = {k: v - LR * grads[k] for k, v in before.items()}
        expected["w0"] = np.maximum(expected["w0"], 0.0)
        expected["b1"] = expected["b1"] * min(np.linalg.norm(expected["b1"]), 0.1) / (1e-7 + np.linalg.norm(
            expected["b1"]))
        for name, value in trainer.params().items():
            np.testing.assert_allclose(value, expected[name], rtol=0, atol=TOLERANCE, err_msg=name)
    assert np.any(trainer.params()["w0"] == 0)  # it binds
    with pytest.raises(toolkit.ParamsError, match=r"\['kernel'\]"):
        toolkit.DataParallel(dataclasses.replace(base, constraints={"kernel": constraints.NonNeg()}), backend, 1,
                             toolkit.optim.SGD(LR))
    with pytest.raises(TypeError, match="constraints"):
        dataclasses.replace(base, constraints={"w0": "non_neg"})


def test_keras_constraints_the_importer_cannot_translate_are_refused(keras):
    """A constraint class other than Keras' four (a subclass too: its formula may differ) is refused naming the
    layer and the argument; on a frozen layer Keras never applies it, and it is accepted."""

    class Halved(keras.constraints.NonNeg):
        def __call__(self, w):
            return w / 2

    for options, words in [({"kernel_constraint": Halved()}, "kernel_constraint=Halved"),
                           ({"bias_constraint": keras.constraints.Constraint()}, "bias_constraint=Constraint")]:
        model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(2, name="odd", **options)])
        model.compile(loss="mse")
        with pytest.raises(toolkit.KerasImportError, match=f"layer 'odd' \\(Dense\\): {words} is not supported"):
            toolkit.from_keras(model)
        model.get_layer("odd").trainable = False
        assert not toolkit.from_keras(model).constraints
