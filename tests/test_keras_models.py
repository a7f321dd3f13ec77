"""Issue 28's done-when module: models of the kinds published Keras examples build (Sequential, functional, custom
layers), shrunk to the smallest shapes but not in layer types, each imported as written (its compiled loss, no
argument changed). On every backend and 1 and 2 devices: predict equals Keras' within 1e-10 (float64), ``fit``
equals Keras' own ``fit`` (its loss and every weight after the steps), and the trained weights go back to Keras
with ``to_keras`` so that Keras computes what the trainer does and imports again as they were.

Dropout layers are kept with rate 0 (their masks are the toolkit's own by design); batch normalization is
synchronized, which on one Keras device is plain batch normalization and on the toolkit's two devices the full
batch's statistics. Class weights, constraints and regularizers are given as Keras users give them. The models
whose Theano-family compiles cost most are marked ``slow`` (:data:`SLOW`)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

import numpy as np
import pytest

import toolkit

pytestmark = pytest.mark.skipif(importlib.util.find_spec("keras") is None
                                or importlib.util.find_spec("tensorflow") is None,
                                reason='needs keras on TensorFlow (pip install "multigpu-toolkit[tensorflow]")')

#: Keras rounds its learning rate to float32: a power of two is the same number in float64.
LR = 2.0 ** -4
#: Keras' L2 coefficient, rounded to float32 by Keras on TensorFlow: a power of two is exact.
L2 = 2.0 ** -7
#: float64 agreement with Keras on TensorFlow: the same formulas, summed in possibly different orders.
TOLERANCE = 1e-10
#: Examples per model and per fit batch: two fit steps, split 2 + 2 on two devices.
EXAMPLES, BATCH = 8, 4
#: The length variable-length models also predict at (they train at their data's).
SHORTER = 4


# --- the models, as keras.io's examples write them (sizes shrunk) --------------------------------------------------
def _compile(model, loss):
    import keras

    model.compile(optimizer=keras.optimizers.SGD(LR), loss=loss)
    return model


def _mnist_convnet(keras, rng):
    """keras.io "Simple MNIST convnet": Rescaling, Conv2D/MaxPooling2D twice, Flatten, Dropout, softmax Dense,
    categorical cross-entropy on one-hot labels."""
    layers = keras.layers
    model = keras.Sequential([
        keras.Input((10, 10, 1)), layers.Rescaling(1.0 / 255),
        layers.Conv2D(4, kernel_size=(3, 3), activation="relu"), layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Conv2D(4, kernel_size=(3, 3), activation="relu"), layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Flatten(), layers.Dropout(0.0), layers.Dense(3, activation="softmax")])
    x = rng.integers(0, 256, size=(EXAMPLES, 10, 10, 1)).astype(np.float64)
    return _compile(model, "categorical_crossentropy"), x, np.eye(3)[rng.integers(0, 3, EXAMPLES)]


def _xception_block(keras, rng):
    """keras.io "Image classification from scratch" (a small Xception): strided Conv2D entry, SeparableConv2D pairs
    with batch normalization, a strided 1x1 Conv2D residual added back, global average pooling, one logit."""
    layers = keras.layers
    inputs = keras.Input((8, 8, 3))
    x = layers.Rescaling(1.0 / 255)(inputs)
    x = layers.Conv2D(4, 3, strides=2, padding="same")(x)
    x = layers.BatchNormalization(synchronized=True)(x)
    x = layers.Activation("relu")(x)
    previous = x
    x = layers.Activation("relu")(x)
    x = layers.SeparableConv2D(6, 3, padding="same")(x)
    x = layers.BatchNormalization(synchronized=True)(x)
    x = layers.Activation("relu")(x)
    x = layers.SeparableConv2D(6, 3, padding="same")(x)
    x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
    residual = layers.Conv2D(6, 1, strides=2, padding="same")(previous)
    x = layers.add([x, residual])
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dropout(0.0)(x)
    model = keras.Model(inputs, layers.Dense(1, activation=None)(x))
    x = rng.uniform(0, 255, size=(EXAMPLES, 8, 8, 3))
    return _compile(model, keras.losses.BinaryCrossentropy(from_logits=True)), x, \
        rng.integers(0, 2, (EXAMPLES, 1)).astype(np.float64)


def _resnet_block(keras, rng):
    """keras.io's CIFAR ResNet v1 (ResNet-20's block): Conv2D-BN-ReLU with L2 kernel regularizers, a residual
    block, average pooling, softmax; sparse labels of shape (N, 1) as keras.datasets.cifar10 gives them."""
    layers, l2 = keras.layers, keras.regularizers.l2(L2)

    def conv_bn(x, filters, activation=True):
        x = layers.Conv2D(filters, 3, padding="same", kernel_initializer="he_normal", kernel_regularizer=l2)(x)
        x = layers.BatchNormalization(synchronized=True)(x)
        return layers.Activation("relu")(x) if activation else x

    inputs = keras.Input((6, 6, 3))
    x = conv_bn(inputs, 4)
    y = conv_bn(conv_bn(x, 4), 4, activation=False)
    x = layers.Activation("relu")(layers.add([x, y]))
    x = layers.Flatten()(layers.AveragePooling2D(pool_size=3)(x))
    model = keras.Model(inputs, layers.Dense(3, activation="softmax", kernel_initializer="he_normal")(x))
    return _compile(model, "sparse_categorical_crossentropy"), rng.normal(size=(EXAMPLES, 6, 6, 3)), \
        rng.integers(0, 3, (EXAMPLES, 1))


def _transformer_text(keras, rng):
    """keras.io "Text classification with Transformer": custom TokenAndPositionEmbedding and TransformerBlock
    layers (MultiHeadAttention, a feed-forward Sequential, two layer norms, dropout), average pooling, softmax."""
    layers, ops = keras.layers, keras.ops

    class TransformerBlock(layers.Layer):
        def __init__(self, embed_dim, num_heads, ff_dim, rate=0.0, **kwargs):
            super().__init__(**kwargs)
            self.att = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
            self.ffn = keras.Sequential([layers.Dense(ff_dim, activation="relu"), layers.Dense(embed_dim)])
            self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
            self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
            self.dropout1, self.dropout2 = layers.Dropout(rate), layers.Dropout(rate)

        def call(self, inputs, training=False):
            attn_output = self.dropout1(self.att(inputs, inputs), training=training)
            out1 = self.layernorm1(inputs + attn_output)
            ffn_output = self.dropout2(self.ffn(out1), training=training)
            return self.layernorm2(out1 + ffn_output)

    class TokenAndPositionEmbedding(layers.Layer):  # as keras.io writes it: an Embedding of arange positions
        def __init__(self, maxlen, vocab_size, embed_dim, **kwargs):
            super().__init__(**kwargs)
            self.token_emb = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
            self.pos_emb = layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

        def call(self, x):
            maxlen = ops.shape(x)[-1]
            positions = ops.arange(start=0, stop=maxlen, step=1)
            positions = self.pos_emb(positions)
            x = self.token_emb(x)
            return x + positions

    inputs = layers.Input(shape=(5,), dtype="int32")
    x = TokenAndPositionEmbedding(5, 12, 4)(inputs)
    x = TransformerBlock(4, 2, 6)(x)
    x = layers.GlobalAveragePooling1D()(x)
    x = layers.Dense(5, activation="relu")(layers.Dropout(0.0)(x))
    model = keras.Model(inputs, layers.Dense(2, activation="softmax")(layers.Dropout(0.0)(x)))
    return _compile(model, "sparse_categorical_crossentropy"), rng.integers(0, 12, (EXAMPLES, 5)), \
        rng.integers(0, 2, EXAMPLES)


def _bidirectional_lstm(keras, rng):
    """keras.io "Bidirectional LSTM on IMDB": variable-length integer sequences (Input(shape=(None,))), Embedding,
    two Bidirectional LSTMs, a sigmoid unit."""
    layers = keras.layers
    inputs = keras.Input(shape=(None,), dtype="int32")
    x = layers.Embedding(12, 4)(inputs)
    x = layers.Bidirectional(layers.LSTM(3, return_sequences=True))(x)
    x = layers.Bidirectional(layers.LSTM(3))(x)
    model = keras.Model(inputs, layers.Dense(1, activation="sigmoid")(x))
    return _compile(model, "binary_crossentropy"), rng.integers(0, 12, (EXAMPLES, 5)), \
        rng.integers(0, 2, (EXAMPLES, 1)).astype(np.float64)


def _conv1d_text(keras, rng):
    """keras.io "Text classification from scratch": Embedding, Dropout, Conv1D, GlobalMaxPooling1D, Dense, a
    sigmoid unit (binary cross-entropy on labels of shape (N,))."""
    layers = keras.layers
    inputs = keras.Input(shape=(None,), dtype="int64")
    x = layers.Dropout(0.0)(layers.Embedding(12, 4)(inputs))
    x = layers.Conv1D(4, 3, padding="valid", activation="relu", strides=1)(x)
    x = layers.GlobalMaxPooling1D()(x)
    x = layers.Dropout(0.0)(layers.Dense(4, activation="relu")(x))
    model = keras.Model(inputs, layers.Dense(1, activation="sigmoid", name="predictions")(x))
    return _compile(model, "binary_crossentropy"), rng.integers(0, 12, (EXAMPLES, 7)), \
        rng.integers(0, 2, EXAMPLES).astype(np.float64)


def _conv1d_series(keras, rng):
    """keras.io "Timeseries classification from scratch": Conv1D-BatchNormalization-ReLU blocks, global average
    pooling, softmax."""
    layers = keras.layers
    inputs = keras.Input((9, 1))
    x = inputs
    for _ in range(2):
        x = layers.Conv1D(filters=4, kernel_size=3, padding="same")(x)
        x = layers.ReLU()(layers.BatchNormalization(synchronized=True)(x))
    x = layers.GlobalAveragePooling1D()(x)
    model = keras.Model(inputs, layers.Dense(2, activation="softmax")(x))
    return _compile(model, "sparse_categorical_crossentropy"), rng.normal(size=(EXAMPLES, 9, 1)), \
        rng.integers(0, 2, EXAMPLES)


def _series_transformer(keras, rng):
    """keras.io "Timeseries classification with a Transformer model": encoder blocks of LayerNormalization,
    MultiHeadAttention, a residual ``x + inputs``, 1x1 Conv1D feed-forward; channels-last average pooling, an MLP
    head, softmax."""
    layers = keras.layers

    def transformer_encoder(inputs, head_size, num_heads, ff_dim, dropout=0.0):
        x = layers.LayerNormalization(epsilon=1e-6)(inputs)
        x = layers.MultiHeadAttention(key_dim=head_size, num_heads=num_heads, dropout=dropout)(x, x)
        x = layers.Dropout(dropout)(x)
        res = x + inputs
        x = layers.LayerNormalization(epsilon=1e-6)(res)
        x = layers.Conv1D(filters=ff_dim, kernel_size=1, activation="relu")(x)
        x = layers.Dropout(dropout)(x)
        x = layers.Conv1D(filters=inputs.shape[-1], kernel_size=1)(x)
        return x + res

    inputs = keras.Input(shape=(6, 2))
    x = transformer_encoder(inputs, head_size=4, num_heads=2, ff_dim=3)
    x = layers.GlobalAveragePooling1D(data_format="channels_last")(x)
    x = layers.Dropout(0.0)(layers.Dense(4, activation="relu")(x))
    model = keras.Model(inputs, layers.Dense(2, activation="softmax")(x))
    return _compile(model, "sparse_categorical_crossentropy"), rng.normal(size=(EXAMPLES, 6, 2)), \
        rng.integers(0, 2, EXAMPLES)


def _lstm_forecaster(keras, rng):
    """keras.io "Timeseries forecasting for weather prediction": LSTM, one Dense output, mse on targets of shape
    (N,) (Keras brings them to the output's rank)."""
    inputs = keras.layers.Input(shape=(7, 3))
    model = keras.Model(inputs, keras.layers.Dense(1)(keras.layers.LSTM(4)(inputs)))
    return _compile(model, "mse"), rng.normal(size=(EXAMPLES, 7, 3)), rng.normal(size=EXAMPLES)


def _tabular_mlp(keras, rng):
    """keras.io "Imbalanced classification: credit card fraud detection": Dense-ReLU layers, Dropout, a sigmoid
    unit, binary cross-entropy, fit with class weights (powers of two: Keras computes them in float32)."""
    layers = keras.layers
    model = keras.Sequential([
        keras.Input(shape=(6,)), layers.Dense(8, activation="relu"), layers.Dense(8, activation="relu"),
        layers.Dropout(0.0), layers.Dense(8, activation="relu"), layers.Dropout(0.0),
        layers.Dense(1, activation="sigmoid")])
    y = np.array([[0], [1], [0], [0], [0], [1], [0], [0]], np.float64)
    return _compile(model, "binary_crossentropy"), rng.normal(size=(EXAMPLES, 6)), y, \
        {"class_weight": {0: 0.5, 1: 4.0}}


def _transfer_learning(keras, rng):
    """keras.io "Transfer learning & fine-tuning": a base model (convolutions with batch normalization) frozen
    with ``base_model.trainable = False`` and called with ``training=False``, a new head on top."""
    layers = keras.layers
    base_model = keras.Sequential([
        keras.Input((6, 6, 2)), layers.Conv2D(4, 3, padding="same"), layers.BatchNormalization(),
        layers.Activation("relu"), layers.Conv2D(4, 3)], name="base_model")
    base_model.layers[1].set_weights([w + rng.normal(size=w.shape) * 0.1 + (1.0 if i == 3 else 0.0)
                                      for i, w in enumerate(base_model.layers[1].get_weights())])
    base_model.trainable = False
    inputs = keras.Input(shape=(6, 6, 2))
    x = base_model(inputs, training=False)
    x = layers.Dropout(0.0)(layers.GlobalAveragePooling2D()(x))
    model = keras.Model(inputs, layers.Dense(1)(x))
    return _compile(model, keras.losses.BinaryCrossentropy(from_logits=True)), rng.normal(size=(EXAMPLES, 6, 6, 2)), \
        rng.integers(0, 2, (EXAMPLES, 1)).astype(np.float64)


def _regularized(keras, rng):
    """Every kind of regularizer Keras' examples use (L2 and L1L2 on kernels, L1 on a bias, an activity
    regularizer, an ActivityRegularization layer) with constraints that bind (MaxNorm on a kernel, NonNeg on a
    bias), and a Dense without bias."""
    layers, regularizers = keras.layers, keras.regularizers
    model = keras.Sequential([
        keras.Input(shape=(5,)),
        layers.Dense(6, activation="tanh", kernel_regularizer=regularizers.L1L2(l1=2.0 ** -8, l2=L2),
                     bias_regularizer=regularizers.L1(2.0 ** -6), activity_regularizer=regularizers.L2(2.0 ** -9),
                     kernel_constraint=keras.constraints.MaxNorm(0.5), bias_constraint=keras.constraints.NonNeg()),
        layers.ActivityRegularization(l1=2.0 ** -10),
        layers.Dense(3, use_bias=False, kernel_regularizer=regularizers.L2(L2))])
    return _compile(model, "mse"), rng.normal(size=(EXAMPLES, 5)), rng.normal(size=(EXAMPLES, 3))


#: Each model: how it is made, from (keras, rng) to (compiled model, x, y) or (compiled model, x, y, what else
#: fit takes, as Keras' fit and the trainer's name it).
MODELS = {"mnist_convnet": _mnist_convnet, "xception_block": _xception_block, "resnet_block": _resnet_block,
          "transformer_text": _transformer_text, "bidirectional_lstm": _bidirectional_lstm,
          "conv1d_text": _conv1d_text, "conv1d_series": _conv1d_series, "series_transformer": _series_transformer,
          "lstm_forecaster": _lstm_forecaster, "tabular_mlp": _tabular_mlp, "transfer_learning": _transfer_learning,
          "regularized": _regularized}


@dataclass
class Reference:
    """A Keras model and what Keras computed with it: its outputs before training, and its loss and weights after
    its own ``fit`` (two steps); ``imported`` is the model from_keras made of it before the fit. A model of
    variable-length inputs (``Input(shape=(None,))``) also has ``shorter``: shorter inputs and Keras' outputs."""

    model: object
    imported: toolkit.Model
    x: np.ndarray
    y: np.ndarray
    outputs: np.ndarray
    shorter: tuple | None
    losses: list
    weights: list
    fit: dict


_REFERENCES: dict[str, Reference] = {}


def _reference(keras, name: str) -> Reference:
    """Each model's Keras side, made once per process (the tests of every backend and device count share it)."""
    if name not in _REFERENCES:
        keras.utils.set_random_seed(sum(map(ord, name)))
        model, x, y, *fit = MODELS[name](keras, np.random.default_rng(len(name)))
        fit = fit[0] if fit else {}
        imported = toolkit.from_keras(model)
        outputs = np.asarray(model(x, training=False))
        shorter = None
        if model.inputs[0].shape[1] is None:
            shorter = (x[:, :SHORTER], np.asarray(model(x[:, :SHORTER], training=False)))
        history = model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0, **fit)
        _REFERENCES[name] = Reference(model, imported, x, y, outputs, shorter, history.history["loss"],
                                      [np.array(w) for w in model.get_weights()], fit)
    return _REFERENCES[name]


#: The models whose Theano-family compiles cost most (measured on PyTensor: 14 to 30 s of CPU each for its two device
#: counts, against 4 to 12 s for the others): marked ``slow``, for a session of their own.
SLOW = {"xception_block", "resnet_block", "transformer_text", "bidirectional_lstm", "conv1d_series",
        "series_transformer"}


@pytest.mark.parametrize("devices", [1, 2], ids=["1dev", "2dev"])
@pytest.mark.parametrize("name", [pytest.param(name, marks=[pytest.mark.slow] if name in SLOW else [])
                                  for name in MODELS])
def test_keras_model_predicts_fits_and_goes_back(keras, backend, name, devices):
    reference = _reference(keras, name)
    model = reference.model
    trainer = toolkit.DataParallel(reference.imported, backend, devices, toolkit.optim.SGD(LR), dtype="float64")
    np.testing.assert_allclose(trainer.predict(reference.x), reference.outputs, rtol=0, atol=TOLERANCE)
    if reference.shorter is not None:
        np.testing.assert_allclose(trainer.predict(reference.shorter[0]), reference.shorter[1], rtol=0,
                                   atol=TOLERANCE)
    history = trainer.fit(reference.x, reference.y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0,
                          **reference.fit)
    np.testing.assert_allclose(history.history["loss"], reference.losses, rtol=0, atol=TOLERANCE)
    # Every Keras weight is written back: anything to_keras left out would stay NaN.
    model.set_weights([np.full_like(w, np.nan) for w in model.get_weights()])
    toolkit.to_keras(trainer.params(), model, trainer.state())
    for written, keras_trained in zip(model.get_weights(), reference.weights):
        np.testing.assert_allclose(written, keras_trained, rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(np.asarray(model(reference.x, training=False)), trainer.predict(reference.x), rtol=0,
                               atol=TOLERANCE)
    # ... and imported again, they are the trainer's values exactly (parameters and model state alike).
    again = toolkit.from_keras(model).init(None)
    mine = {**trainer.params(), **trainer.state()}
    assert again.keys() == mine.keys()
    assert all(np.array_equal(getattr(again[k], "value", again[k]), mine[k]) for k in mine)
