"""Keras graphs as users write them, imported as written: ``keras.ops`` calls and operators in a functional graph,
custom ``Layer`` subclasses opened up (a Transformer block with its own weight), and their typed refusals. Outputs
equal Keras' within 1e-10 (float64) on every backend and 1 and 2 devices; a few fit steps equal Keras' own fit."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

import toolkit
from tests.helpers import keras_in_float64

pytestmark = pytest.mark.skipif(importlib.util.find_spec("keras") is None,
                                reason='needs keras (pip install "multigpu-toolkit[tensorflow]")')

RNG = np.random.default_rng(28)
SEQUENCES = RNG.normal(size=(4, 5, 4))
TARGETS = RNG.normal(size=(4, 3))
#: Keras rounds its learning rate to float32: a power of two is the same number in float64.
LR = 2.0 ** -4
#: float64 agreement with Keras on TensorFlow: the same formulas, summed in possibly different orders.
TOLERANCE = 1e-10
#: Keras' other backends compute float64 in float32 (keras.src.backend.common.dtypes.BIT64_TO_BIT32_DTYPE, JAX's
#: default): compared with the NumPy backend, where Keras runs without TensorFlow (the PyTensor environment), the
#: toolkit's float64 results are as close as float32 rounding allows (measured: 1e-7).
FLOAT32_TOLERANCE = 1e-5


def _tolerance(keras) -> float:
    return TOLERANCE if keras.backend.backend() == "tensorflow" else FLOAT32_TOLERANCE


@pytest.fixture(scope="module")
def keras():
    if importlib.util.find_spec("tensorflow") is not None:
        toolkit.get_backend("tensorflow")  # its logical devices, before Keras starts TensorFlow
    else:  # Keras' default backend is TensorFlow: without it, Keras runs on NumPy (inference only)
        os.environ.setdefault("KERAS_BACKEND", "numpy")
    import keras

    with keras_in_float64(keras):
        yield keras


def _operations(keras):
    """Operators, keras.ops calls with arguments, indexing, a join and an op of two outputs between layers, and a
    functional model used as a layer."""
    from keras import layers, ops

    keras.utils.set_random_seed(3)
    inner = keras.Input((5, 4))
    submodel = keras.Model(inner, layers.Dense(4)(inner) * 0.5, name="submodel")  # a model used as a layer
    x = keras.Input((5, 4))
    a = submodel(x)
    b = a + x
    c = ops.mean(b, axis=1)
    d = b[:, 0]
    e = ops.concatenate([c, d * 2.0, ops.exp(-d)], axis=-1)
    f, g = ops.split(e, 2, axis=-1)
    model = keras.Model(x, layers.Dense(3)(ops.tanh(f - g) / 2.0 + 1.0))
    model.compile(optimizer=keras.optimizers.SGD(LR), loss="mse")
    return model


def _block_class(keras):
    from keras import layers, ops

    class TransformerBlock(layers.Layer):
        """keras.io's Transformer block (attention, feed-forward Sequential, two layer norms, dropout), with a
        weight of its own."""

        def __init__(self, dim, heads, hidden, rate=0.0, **kwargs):
            super().__init__(**kwargs)
            self.att = layers.MultiHeadAttention(num_heads=heads, key_dim=dim)
            self.ffn = keras.Sequential([layers.Dense(hidden, activation="relu"), layers.Dense(dim)])
            self.norm1 = layers.LayerNormalization(epsilon=1e-6)
            self.norm2 = layers.LayerNormalization(epsilon=1e-6)
            self.drop1, self.drop2 = layers.Dropout(rate), layers.Dropout(rate)

        def build(self, shape):
            self.gain = self.add_weight(shape=(shape[-1],), initializer="ones", name="gain")

        def call(self, inputs, training=None):
            attended = self.drop1(self.att(inputs, inputs), training=training)
            h = self.norm1(inputs + attended)
            return self.norm2(h + self.drop2(self.ffn(h), training=training)) * ops.softplus(self.gain)

    return TransformerBlock


def _transformer(keras):
    """A Transformer classifier as keras.io writes it: a custom block, pooled with keras.ops."""
    from keras import layers, ops

    keras.utils.set_random_seed(4)
    x = keras.Input((5, 4))
    h = _block_class(keras)(4, 2, 8, name="block")(x)
    model = keras.Model(x, layers.Dense(3)(ops.mean(h, axis=1)))
    model.compile(optimizer=keras.optimizers.SGD(LR), loss="mse")
    return model


def _sequential(keras):
    """A custom block inside a Sequential model."""
    from keras import layers

    keras.utils.set_random_seed(5)
    model = keras.Sequential([keras.Input((5, 4)), _block_class(keras)(4, 1, 6), layers.Flatten(), layers.Dense(3)])
    model.compile(optimizer=keras.optimizers.SGD(LR), loss="mse")
    return model


def _two_ways(keras, loss=("mse", "sparse_categorical_crossentropy"), **compile_arguments):
    """Two named inputs merged, two outputs (a regression head and a classifier)."""
    from keras import layers, ops

    keras.utils.set_random_seed(6)
    a, b = keras.Input((5, 4), name="a"), keras.Input((3,), name="b")
    h = layers.Dense(5, activation="tanh")(layers.Concatenate()([ops.mean(a, axis=1), b]))
    model = keras.Model([a, b], [layers.Dense(2, name="score")(h),
                                 layers.Dense(3, activation="softmax", name="kind")(h + b[:, :1])])
    model.compile(optimizer=keras.optimizers.SGD(LR), loss=list(loss) if isinstance(loss, tuple) else loss,
                  **compile_arguments)
    return model


MODELS = {"operations": _operations, "transformer": _transformer, "sequential": _sequential}


@pytest.mark.parametrize("n_devices", [1, 2], ids=lambda n: f"{n}dev")
def test_imported_graphs_compute_what_keras_computes(keras, backend, n_devices):
    for factory in MODELS.values():
        model = factory(keras)
        trainer = toolkit.DataParallel(toolkit.from_keras(model), backend, n_devices, toolkit.optim.SGD(LR),
                                       dtype="float64")
        np.testing.assert_allclose(trainer.predict(SEQUENCES), np.asarray(model(SEQUENCES, training=False)),
                                   rtol=0, atol=_tolerance(keras))


@pytest.mark.parametrize("n_devices", [1, 2], ids=lambda n: f"{n}dev")
def test_models_of_several_inputs_and_outputs_compute_what_keras_computes(keras, backend, n_devices):
    """Inputs by their Input layers' names, outputs as Keras' list."""
    model = _two_ways(keras, loss_weights=[0.5, 2.0])
    x = {"a": SEQUENCES, "b": SEQUENCES[:, 0, :3]}
    trainer = toolkit.DataParallel(toolkit.from_keras(model), backend, n_devices, toolkit.optim.SGD(LR),
                                   dtype="float64")
    outputs, expected = trainer.predict(x), model([x["a"], x["b"]], training=False)
    assert len(outputs) == len(expected) == 2
    for ours, theirs in zip(outputs, expected):
        np.testing.assert_allclose(ours, np.asarray(theirs), rtol=0, atol=_tolerance(keras))


def test_a_graph_of_unknown_length_predicts_any_length(keras, backend):
    """``Input(shape=(None, 4))`` through layers and keras.ops: one imported model, one trainer, two lengths."""
    from keras import layers, ops

    keras.utils.set_random_seed(7)
    x = keras.Input((None, 4))
    model = keras.Model(x, layers.Dense(2)(ops.max(layers.Dense(3, activation="tanh")(x), axis=1)))
    trainer = toolkit.DataParallel(toolkit.from_keras(model, loss="mse"), backend, 1, toolkit.optim.SGD(LR),
                                   dtype="float64")
    for length in (5, 3):
        np.testing.assert_allclose(trainer.predict(SEQUENCES[:, :length]),
                                   np.asarray(model(SEQUENCES[:, :length], training=False)), rtol=0,
                                   atol=_tolerance(keras))


def test_a_custom_block_fits_like_keras_fit(keras, backend):
    """Two SGD steps of the Transformer block on two devices equal Keras' own fit, written back with to_keras."""
    if keras.backend.backend() != "tensorflow":
        pytest.skip(f"Keras' {keras.backend.backend()} backend does not train (compared with Keras on TensorFlow)")
    model = _transformer(keras)
    trainer = toolkit.DataParallel(toolkit.from_keras(model), backend, 2, toolkit.optim.SGD(LR), dtype="float64")
    assert "block/gain" in trainer.params()  # the block's own weight is a trained parameter
    history = trainer.fit(SEQUENCES, TARGETS, epochs=1, batch_size=2, shuffle=False, verbose=0)
    keras_history = model.fit(SEQUENCES, TARGETS, epochs=1, batch_size=2, shuffle=False, verbose=0)
    assert abs(history.history["loss"][0] - keras_history.history["loss"][0]) <= TOLERANCE
    fitted = [np.asarray(w) for w in model.get_weights()]
    toolkit.to_keras(trainer.params(), model, trainer.state())
    assert max(np.abs(a - b).max() for a, b in zip(model.get_weights(), fitted)) <= TOLERANCE


def _refused(keras, body, message: str, masked: bool = False):
    """``body(inputs) -> outputs`` built into a model, whose import raises a KerasImportError saying ``message``."""
    x = keras.Input((5,), dtype="int32") if masked else keras.Input((5, 4))
    model = keras.Model(x, body(x))
    with pytest.raises(toolkit.KerasImportError, match=message):
        toolkit.from_keras(model, loss="mse")


def test_what_several_outputs_cannot_take_is_refused(keras):
    with pytest.raises(toolkit.KerasImportError, match="one per output"):
        toolkit.from_keras(_two_ways(keras, loss="mse"))  # Keras would apply it to the list of outputs as one
    with pytest.raises(toolkit.KerasImportError, match=r"\['nope'\], which are not outputs"):
        toolkit.from_keras(_two_ways(keras, loss={"score": "mse", "nope": "mse"}))
    with pytest.raises(toolkit.KerasImportError, match="one entry per output"):
        toolkit.from_keras(_two_ways(keras, metrics=["mae"]))  # several outputs: one entry each, as Keras 3


def test_what_cannot_be_traced_is_refused(keras):
    from keras import layers, ops

    class ValueBranch(layers.Layer):  # Keras builds it from its output shape, without running call
        def call(self, x):
            return x if ops.mean(x) > 0 else -x

        def compute_output_shape(self, shape):
            return shape

    class TrainingBranch(layers.Layer):
        def call(self, x, training=None):
            return x * 2.0 if training else x

    class Positions(layers.Layer):  # a sub-layer called on a constant other than keras.ops.arange's
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.positions = layers.Embedding(5, 4)

        def call(self, x):
            return x + self.positions(ops.ones((ops.shape(x)[1],), dtype="int32"))

    class Tied(layers.Layer):
        def __init__(self, transpose, **kwargs):
            super().__init__(**kwargs)
            self.dense, self.transpose = layers.Dense(4), transpose

        def build(self, shape):
            self.dense.build(shape)

        def call(self, x):
            kernel = ops.transpose(self.dense.kernel) if self.transpose else self.dense.kernel
            return ops.matmul(self.dense(x), kernel)

    class Unused(layers.Layer):
        def build(self, shape):
            self.unused = self.add_weight(shape=(), name="unused")

        def call(self, x):
            return x * 2.0

    class AddsLoss(layers.Layer):
        def call(self, x):
            self.add_loss(ops.sum(x))
            return x

    class Counts(layers.Layer):
        def build(self, shape):
            self.count = self.add_weight(shape=(), initializer="zeros", trainable=False, name="count")

        def call(self, x):
            self.count.assign_add(1.0)
            return x * self.count

    class Plain(layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.supports_masking = True  # Keras passes the mask on through it

        def call(self, x):
            return x * 2.0

    _refused(keras, lambda x: ops.pinv(x[:, :4]), r"keras\.ops\.pinv.*toolkit's ops do not have")
    _refused(keras, ValueBranch(name="value_branch"), r"'value_branch'.*cannot be traced")
    _refused(keras, TrainingBranch(name="training_branch"), r"'training_branch'.*branch on training")
    _refused(keras, Positions(name="positions"), r"'positions'.*constant from weights")
    _refused(keras, Tied(True, name="tied"), r"'tied'.*constant from weights")
    _refused(keras, Tied(False, name="tied_directly"), r"reads the weight .*kernel.* directly")
    _refused(keras, AddsLoss(name="adds_loss"), r"'adds_loss'.*cannot be traced.*add_loss")
    _refused(keras, Counts(name="counts"), r"'counts'.*cannot be traced.*assign_add")
    _refused(keras, Unused(name="unused"), r"'unused'.*\['unused/unused'\] are not read by its graph")
    _refused(keras, lambda x: Plain(name="plain")(layers.Embedding(9, 4, mask_zero=True)(x)),
             r"'plain'.*mask reaches", masked=True)
    _refused(keras, Plain(name="regularized", activity_regularizer="l2"), r"'regularized'.*activity_regularizer")
