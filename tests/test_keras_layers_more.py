"""The Keras layers published examples use, imported by from_keras: each in a small model built as Keras users
build them, whose predictions equal Keras' own (float64, within 1e-10) on every backend, and whose SGD steps equal
Keras' ``train_on_batch`` for the models with weights (losses and weights, written back by to_keras). Several layers
share a model so that the Theano family compiles few graphs; a failure names the model, and the layers are listed in
its builder. Noise layers are identities in inference, and in training draw the toolkit's per-example noise (the same
on 1 and 2 devices)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import toolkit
from tests.helpers import keras_in_float64
from toolkit.keras.activations import ACTIVATIONS

pytestmark = pytest.mark.skipif(importlib.util.find_spec("keras") is None,
                                reason='needs keras (pip install "multigpu-toolkit[tensorflow]")')

RNG = np.random.default_rng(29)
#: Keras rounds its learning rate to float32: a power of two is the same number in float64.
LR = 2.0 ** -4
TOLERANCE = 1e-10
STEPS = 2
#: Keras' activations that its TensorFlow backend computes through float32 in a float64 model, and how close it then
#: is: ``leaky_relu``'s slope 0.2 is an op attribute TensorFlow keeps in float32 (measured: 1.5e-8 relative), and its
#: exact ``gelu`` is 5e-9 off the closed form (docs/FACTS). The toolkit computes both in float64.
FLOAT32_IN_KERAS = {"leaky_relu": {"rtol": 1e-7}, "gelu": {"atol": 1e-8}}


@pytest.fixture(scope="module")
def keras():
    if importlib.util.find_spec("tensorflow") is not None:
        toolkit.get_backend("tensorflow")  # its logical devices, before Keras starts TensorFlow
    import keras

    with keras_in_float64(keras):
        yield keras


def _predict(model, x) -> np.ndarray:
    """Keras' inference, compiled by XLA: TensorFlow's CPU kernels have no channels-first convolution and no float64
    3-D average pooling, XLA's have both."""
    import keras

    if keras.backend.backend() != "tensorflow":
        return np.asarray(model(x, training=False))
    import tensorflow as tf

    return np.asarray(tf.function(lambda v: model(v, training=False), jit_compile=True)(x))


def _compare(keras, backend, model, x, y, train: bool = True, tolerance: float = TOLERANCE):
    """The imported model's predictions, and (``train``) ``STEPS`` SGD steps, against Keras' own."""
    trainer = toolkit.DataParallel(toolkit.from_keras(model), backend, 1, toolkit.optim.SGD(LR), dtype="float64")
    np.testing.assert_allclose(trainer.predict(x), _predict(model, x), rtol=0, atol=tolerance,
                               err_msg=f"{model.name}: predict")
    if not train:
        return trainer
    losses = [trainer.step(x, y) for _ in range(STEPS)]
    keras_losses = [float(model.train_on_batch(x, y)) for _ in range(STEPS)]
    np.testing.assert_allclose(losses, keras_losses, rtol=0, atol=tolerance, err_msg=f"{model.name}: losses")
    trained = [np.asarray(w) for w in model.weights]
    toolkit.to_keras(trainer.params(), model, trainer.state())  # Keras' weights replaced by the toolkit's
    for weight, theirs in zip(model.weights, trained):
        np.testing.assert_allclose(np.asarray(weight), theirs, rtol=0, atol=tolerance,
                                   err_msg=f"{model.name}: {weight.path} after {STEPS} steps")
    return trainer


def _sequential(keras, name, shape, layers, head: int | None = 2):
    keras.utils.set_random_seed(9)
    model = keras.Sequential([keras.Input(shape), *layers,
                              *([keras.layers.Flatten(), keras.layers.Dense(head)] if head else [])], name=name)
    # XLA: Keras' training step has the channels-first convolutions of the models too (see _predict)
    model.compile(optimizer=keras.optimizers.SGD(LR), loss="mse", jit_compile=True)
    return model


def _conv1d(keras):
    L = keras.layers
    return [L.Conv1D(4, 3, padding="causal", dilation_rate=2, activation="relu"),
            L.SeparableConv1D(4, 3, padding="same", depth_multiplier=2),
            L.DepthwiseConv1D(3, depth_multiplier=2, activation="tanh"), L.Conv1DTranspose(4, 3, strides=2),
            L.ZeroPadding1D((1, 2)), L.Cropping1D((2, 1)), L.UpSampling1D(2),
            L.AveragePooling1D(3, strides=2, padding="same"), L.Conv1D(4, 2, groups=2),
            L.Conv1D(4, 2, data_format="channels_first", use_bias=False), L.MaxPooling1D(2),
            L.GlobalMaxPooling1D(keepdims=True)]


def _conv2d(keras):
    L = keras.layers
    return [L.SeparableConv2D(4, 3, padding="same", activation="selu"), L.DepthwiseConv2D(2, strides=2, padding="same"),
            L.Conv2DTranspose(4, 3, strides=2, output_padding=1), L.ZeroPadding2D(((1, 0), (0, 2))),
            L.Cropping2D(((0, 1), (2, 0))), L.UpSampling2D((1, 2)),
            L.Conv2D(4, 2, groups=2, data_format="channels_first"), L.MaxPooling2D(2, data_format="channels_first"),
            L.AveragePooling2D(2, padding="same"), L.GlobalAveragePooling2D(keepdims=True)]


def _conv3d(keras):
    L = keras.layers
    return [L.Conv3D(3, 2, padding="same", activation="elu"), L.Conv3DTranspose(2, 2, strides=(1, 2, 1)),
            L.ZeroPadding3D(1), L.Cropping3D(((1, 0), (0, 1), (1, 1))), L.UpSampling3D((1, 1, 2)),
            L.AveragePooling3D(2, data_format="channels_first"), L.GlobalAveragePooling3D()]


def _reshaping_and_activations(keras):
    L = keras.layers
    return [L.Dense(4), L.Reshape((4, -1)), L.Permute((2, 1)), L.Flatten(), L.RepeatVector(4),
            L.Rescaling(0.5, offset=0.25), L.Identity(), L.Softmax(axis=(1, 2)), L.LeakyReLU(0.125),
            L.PReLU(shared_axes=[1], alpha_initializer=keras.initializers.Constant(0.25)), L.ELU(0.5),
            L.ReLU(max_value=0.75, negative_slope=0.125, threshold=0.0625), L.Activation("mish"),
            L.ActivityRegularization(2.0 ** -4, 2.0 ** -5), L.UnitNormalization(axis=[1, 2]),
            L.GroupNormalization(groups=2, axis=1), L.Softmax()]


#: Models of several layers each, in the order Keras calls them: (builder, input shape).
SEQUENTIAL = {"conv1d": (_conv1d, (12, 4)), "conv2d": (_conv2d, (7, 6, 4)), "conv3d": (_conv3d, (5, 4, 4, 2)),
              "reshaping_and_activations": (_reshaping_and_activations, (6, 4))}


@pytest.mark.parametrize("name", list(SEQUENTIAL))
def test_layers_predict_and_train_as_keras(keras, backend, name):
    """Convolutions (causal, dilated, grouped, channels first, depthwise, separable, transposed), pooling, padding,
    cropping and upsampling in 1, 2 and 3 dimensions; reshaping, rescaling and activation layers; unit and group
    normalization and an activity penalty."""
    build, shape = SEQUENTIAL[name]
    model = _sequential(keras, name, shape, build(keras))
    _compare(keras, backend, model, RNG.normal(size=(4, *shape)), RNG.normal(size=(4, 2)))


def test_normalization_and_dot_predict_and_train_as_keras(keras, backend):
    """An adapted ``Normalization`` (its mean, variance and count are model state, written back unchanged), one
    given its mean and variance and inverted, and ``Dot`` merges (normalized, and over the last axes)."""
    L = keras.layers
    keras.utils.set_random_seed(10)
    adapted = L.Normalization(axis=-1)
    adapted.adapt(RNG.normal(size=(20, 6, 4)) * 3 + 1)
    inputs = keras.Input((6, 4))
    a = adapted(inputs)
    b = L.Normalization(mean=[1.0, 2.0, 3.0, 4.0], variance=[1.0, 4.0, 9.0, 0.25], invert=True)(
        L.Dense(4)(inputs))
    d = L.Dot(axes=(1, 1), normalize=True)([a, b])
    e = L.Dot(axes=-1)([L.Flatten()(a), L.Flatten()(b)])
    model = keras.Model(inputs, L.Dense(2)(L.Concatenate()([L.Flatten()(d), e])), name="normalization_dot")
    model.compile(optimizer=keras.optimizers.SGD(LR), loss="mse")
    trainer = _compare(keras, backend, model, RNG.normal(size=(4, 6, 4)), RNG.normal(size=(4, 2)))
    for weight in adapted.weights:
        np.testing.assert_array_equal(trainer.state()[f"{adapted.name}/{weight.name}"], np.asarray(weight))


def _masked_text(keras):
    """Padded token ids (Embedding(mask_zero=True)): a bidirectional SimpleRNN over every step, a GRU's every step
    read backwards, self-attention on its outputs (the query's and value's masks), a bidirectional LSTM's last
    outputs summed."""
    L = keras.layers
    inputs = keras.Input((6,), dtype="int32")
    steps = L.Bidirectional(L.SimpleRNN(3, return_sequences=True))(L.Embedding(10, 4, mask_zero=True)(inputs))
    steps = L.GRU(3, return_sequences=True, go_backwards=True)(steps)
    attended = L.Attention(use_scale=True)([steps, steps])
    return inputs, L.Dense(2)(L.Bidirectional(L.LSTM(3), merge_mode="sum")(attended))


def _sequence(keras):
    """Every step through a Dense (TimeDistributed), a SimpleRNN read backwards, causal concat attention, a
    bidirectional LSTM over every step (multiplied), and a bidirectional GRU (averaged)."""
    L = keras.layers
    inputs = keras.Input((5, 3))
    steps = L.SimpleRNN(4, go_backwards=True, return_sequences=True, activation="relu")(
        L.TimeDistributed(L.Dense(4, activation="tanh"))(inputs))
    attended = L.Attention(score_mode="concat")([steps, steps], use_causal_mask=True)
    steps = L.Bidirectional(L.LSTM(3, return_sequences=True), merge_mode="mul")(attended)
    return inputs, L.Dense(2)(L.Bidirectional(L.GRU(2), merge_mode="ave")(steps))


#: Functional models of recurrent layers, wrappers and attention: (builder, inputs).
RECURRENT = {"masked_text": (_masked_text, lambda: np.array([[3, 1, 4, 1, 0, 0], [5, 9, 2, 6, 5, 3], [7, 0, 0, 0, 0, 0],
                                                             [2, 7, 1, 0, 0, 0]], np.int32)),
             "sequence": (_sequence, lambda: RNG.normal(size=(4, 5, 3)))}


@pytest.mark.parametrize("name", list(RECURRENT))
def test_recurrent_wrappers_and_attention_predict_and_train_as_keras(keras, backend, name):
    build, data = RECURRENT[name]
    keras.utils.set_random_seed(13)
    model = keras.Model(*build(keras), name=name)
    model.compile(optimizer=keras.optimizers.SGD(LR), loss="mse")
    _compare(keras, backend, model, data(), RNG.normal(size=(4, 2)))


def _sparsemax(x):
    """Sparsemax over the last axis (Martins and Astudillo, 2016): Keras' TensorFlow backend computes the threshold
    from the sum of the partial sums instead of the last one in the support, and is no reference."""
    z = -np.sort(-x, axis=-1)
    k = np.arange(1, x.shape[-1] + 1)
    cumulative = np.cumsum(z, axis=-1)
    support = np.sum(1 + k * z > cumulative, axis=-1, keepdims=True)
    tau = (np.take_along_axis(cumulative, support - 1, axis=-1) - 1) / support
    return np.maximum(x - tau, 0.0)


def test_every_keras_activation_predicts_as_keras(keras, backend):
    """Each Keras activation by name (``Activation(name)``, as ``activation=name`` resolves it), side by side in one
    model: each block of its output equals Keras' (sparsemax: the formula, see :func:`_sparsemax`)."""
    L = keras.layers
    keras.utils.set_random_seed(11)
    names = list(ACTIVATIONS)
    inputs = keras.Input((6,))
    hidden = L.Dense(6, name="hidden")(inputs)
    model = keras.Model(inputs, L.Concatenate()([L.Activation(n, name=n)(hidden) for n in names]),
                        name="activations")
    x = RNG.normal(size=(5, 6)) * 3
    trainer = toolkit.DataParallel(toolkit.from_keras(model, loss="mse"), backend, 1, toolkit.optim.SGD(LR),
                                   dtype="float64")
    ours, theirs = trainer.predict(x), np.asarray(model(x, training=False))
    pre = np.asarray(model.get_layer("hidden")(x))
    start = 0
    for name in names:
        width = 3 if name == "glu" else 6
        expected = _sparsemax(pre) if name == "sparsemax" else theirs[:, start:start + width]
        tolerance = {"rtol": 0, "atol": TOLERANCE, **FLOAT32_IN_KERAS.get(name, {})}
        np.testing.assert_allclose(ours[:, start:start + width], expected, **tolerance, err_msg=name)
        start += width


def test_activations_keras_cannot_name_are_refused_with_the_layer(keras):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation=lambda x: x * 2, name="custom")])
    with pytest.raises(toolkit.KerasImportError, match="layer 'custom' \\(Dense\\): activation .* is not supported"):
        toolkit.from_keras(model, loss="mse")


def test_max_pooling_3d_predicts_as_keras(keras, backend):
    """TensorFlow has no float64 3-D max pooling (not even under XLA): Keras' is computed in float32 on inputs that
    float32 holds exactly, where a maximum is exact too."""
    keras.utils.set_random_seed(12)
    L = keras.layers
    pooled = keras.Sequential([keras.Input((4, 6, 4, 2), dtype="float32"), L.MaxPooling3D((2, 3, 1), padding="same",
                                                                                          dtype="float32"),
                               L.GlobalMaxPooling3D(keepdims=True, dtype="float32")])
    x = RNG.normal(size=(3, 4, 6, 4, 2)).astype(np.float32)
    model = _sequential(keras, "max_pooling_3d", (4, 6, 4, 2), [L.MaxPooling3D((2, 3, 1), padding="same"),
                                                                 L.GlobalMaxPooling3D(keepdims=True)], head=None)
    model.add(keras.layers.Dense(2))  # a parameter for the trainer
    model.layers[-1].set_weights([np.eye(2), np.zeros(2)])
    trainer = toolkit.DataParallel(toolkit.from_keras(model), backend, 1, toolkit.optim.SGD(LR), dtype="float64")
    np.testing.assert_array_equal(trainer.predict(x.astype(np.float64)), np.asarray(pooled(x), np.float64))


def _noise_model(keras):
    """Three noise layers side by side on one input: (GaussianNoise(0.5), GaussianDropout(0.2), SpatialDropout1D(0.5))
    concatenated on the last axis."""
    L = keras.layers
    inputs = keras.Input((8, 16))
    branches = [L.GaussianNoise(0.5)(inputs), L.GaussianDropout(0.2)(inputs), L.SpatialDropout1D(0.5)(inputs)]
    return keras.Model(inputs, L.Concatenate()(branches), name="noise")


def test_noise_layers_are_identities_in_inference_and_draw_per_example_noise_in_training(keras, backend):
    """In inference each noise layer is the identity, as in Keras. In training, on inputs of ones, each draws what
    Keras draws in distribution: GaussianNoise(0.5) adds noise of variance 0.25, GaussianDropout(0.2) multiplies by
    noise of mean 1 and variance 0.2 / 0.8 = 0.25, SpatialDropout1D(0.5) drops whole channels (constant along the
    steps: variance 0) with probability 0.5 and doubles the others; and the draws are the same on 1 and 2 devices.
    The model outputs each example's four statistics times a probe of ones, so the gradient of the mean loss (their
    sum) with respect to the probe is their mean over the batch: one compiled step gives all four."""
    imported = toolkit.from_keras(_noise_model(keras), loss="mse")

    def statistics(ops, p, x):
        out = imported.forward(ops, {}, x)
        gauss, dropout, spatial = out[:, :, :16], out[:, :, 16:32], out[:, :, 32:]
        over_steps = ops.mean(ops.square(spatial - ops.mean(spatial, axis=1, keepdims=True)), axis=(1, 2))
        dropped = ops.mean(ops.cast(spatial == 0.0, ops.dtype), axis=(1, 2))
        values = [ops.mean(ops.square(gauss - 1.0), axis=(1, 2)), ops.mean(ops.square(dropout - 1.0), axis=(1, 2)),
                  over_steps, dropped]
        return ops.stack(values, axis=1) * p["probe"]

    x = np.ones((8, 8, 16))
    results = []
    for devices in (1, 2):
        model = toolkit.Model(lambda rng: {"probe": np.ones(4)}, statistics,
                              lambda ops, out, y: ops.sum(out, axis=1), name="noise_probe")
        trainer = toolkit.DataParallel(model, backend, devices, toolkit.optim.SGD(LR), dtype="float64")
        np.testing.assert_array_equal(trainer.predict(x), np.zeros((8, 4)))  # the identity: no noise, none dropped
        results.append(trainer.gradients(x, np.zeros(8))["probe"])
    np.testing.assert_allclose(results[1], results[0], rtol=0, atol=1e-12)
    gauss, dropout, over_steps, dropped = results[0]
    # 1024 draws each: the means' standard deviations are 0.011, 0.011 and (128 channels) 0.044; bounds at 5 of them
    assert abs(gauss - 0.25) < 0.06 and abs(dropout - 0.25) < 0.06, (gauss, dropout)
    assert over_steps == 0.0 and abs(dropped - 0.5) < 0.22, (over_steps, dropped)


def _attention_model(keras, rate: float):
    """Causal self-attention without biases under an Embedding's mask with attention dropout ``rate``
    (``key_dim=4``: Keras' float32 rounding of ``1/sqrt(key_dim)`` is exact)."""
    L = keras.layers
    keras.utils.set_random_seed(17)
    inputs = keras.Input((6,), dtype="int32")
    x = L.Embedding(10, 4, mask_zero=True)(inputs)
    x = L.MultiHeadAttention(num_heads=2, key_dim=4, dropout=rate, use_bias=False)(x, x,
                                                                                   use_causal_mask=True)
    model = keras.Model(inputs, L.Dense(2)(L.GlobalAveragePooling1D()(x)), name=f"attention_dropout_{rate}")
    model.compile(optimizer=keras.optimizers.SGD(LR), loss="mse")
    return model


def test_attention_dropout_trains_as_keras_and_draws_per_example(keras, backend):
    """MultiHeadAttention(dropout=...) takes Keras' own path for it (scores masked with -1e9, softmax, dropout of the
    probabilities). At a rate of 1e-12 nothing is dropped in either (with overwhelming probability) and the scale
    1 / (1 - rate) is the same, so Keras' predict and train_on_batch check that path's numbers; at 0.5 training
    draws (the toolkit's per-example masks, the same on any device count: see the noise layers' test): its loss is
    not the inference loss."""
    ids = np.array([[3, 1, 4, 1, 0, 0], [5, 9, 2, 6, 5, 3], [7, 2, 0, 0, 0, 0], [2, 7, 1, 0, 0, 0]], np.int32)
    # its own targets, not the module's RNG (whose draws depend on which tests ran before in the worker): the margin
    # below is checked for these draws
    y = np.random.default_rng(17).normal(size=(4, 2))
    _compare(keras, backend, _attention_model(keras, 1e-12), ids, y)
    imported = toolkit.from_keras(_attention_model(keras, 0.5))
    trainer = toolkit.DataParallel(imported, backend, 1, toolkit.optim.SGD(LR), dtype="float64")
    training, inference = trainer.loss(ids, y), trainer.evaluate(ids, y)["loss"]
    assert abs(training - inference) > 1e-3, (training, inference)


def _recurrent_dropout_model(keras, rate: float):
    """A SimpleRNN, a Bidirectional LSTM and two GRUs without biases (``use_bias=False``; the layers with biases
    are the other tests'), each with input ``dropout`` ``rate``, all but the last with ``recurrent_dropout`` too."""
    L = keras.layers
    keras.utils.set_random_seed(19)
    inputs = keras.Input((5, 3))
    x = L.SimpleRNN(4, dropout=rate, recurrent_dropout=rate, return_sequences=True, use_bias=False)(inputs)
    x = L.Bidirectional(L.LSTM(3, dropout=rate, recurrent_dropout=rate, return_sequences=True, use_bias=False))(x)
    x = L.GRU(3, dropout=rate, recurrent_dropout=rate, return_sequences=True, use_bias=False)(x)
    model = keras.Model(inputs, L.Dense(2)(L.GRU(2, dropout=rate, use_bias=False)(x)),
                        name=f"recurrent_dropout_{rate}")
    model.compile(optimizer=keras.optimizers.SGD(LR), loss="mse")
    return model


def test_recurrent_dropout_trains_as_keras_and_draws_per_example(keras, backend):
    """SimpleRNN, LSTM and GRU ``dropout``: Keras' one mask per sequence on the inputs (the same at every step);
    with ``recurrent_dropout``, Keras' cell of implementation 1 (a mask per gate on the inputs and on the previous
    output, drawn once per sequence). At a rate of 1e-12 nothing is dropped in either and two SGD steps equal Keras'
    train_on_batch (the scale 1 / (1 - rate) too, and implementation 1's products gate by gate); at 0.5 training
    draws (the toolkit's per-example masks, the same on any device count: see the noise layers' test): its loss is
    not the inference loss."""
    rng = np.random.default_rng(19)  # its own data: the margin below is checked for these draws
    x, y = rng.normal(size=(4, 5, 3)), rng.normal(size=(4, 2))
    _compare(keras, backend, _recurrent_dropout_model(keras, 1e-12), x, y)
    imported = toolkit.from_keras(_recurrent_dropout_model(keras, 0.5))
    trainer = toolkit.DataParallel(imported, backend, 1, toolkit.optim.SGD(LR), dtype="float64")
    training, inference = trainer.loss(x, y), trainer.evaluate(x, y)["loss"]
    assert abs(training - inference) > 1e-3, (training, inference)


def test_an_lstm_or_gru_cell_of_implementation_1_draws_a_dropout_mask_per_gate(keras):
    """``implementation=1`` (which ``recurrent_dropout`` sets, and a user may) makes Keras' cell draw one input mask
    per gate: the import takes the same path as with ``recurrent_dropout`` (whose masks every backend's comparison
    above checks), and at a rate of 1e-12 predicts and trains as Keras does; ``implementation=2`` shares one mask."""
    from toolkit.keras import layers_recurrent as keras_layers_recurrent

    def paths(implementation):
        L = keras.layers
        keras.utils.set_random_seed(23)
        inputs = keras.Input((4, 3))
        lstm = L.LSTM(3, dropout=1e-12, return_sequences=True, implementation=implementation, use_cudnn=False)
        gru = L.GRU(2, dropout=1e-12, implementation=implementation, use_cudnn=False)
        model = keras.Model(inputs, L.Dense(2)(gru(lstm(inputs))), name=f"implementation_{implementation}")
        model.compile(optimizer=keras.optimizers.SGD(LR), loss="mse")
        names = [keras_layers_recurrent._checked(layer, layer.name, (None, 4, 3))[1].__qualname__.split(".")[0]
                 for layer in (lstm, gru)]
        return model, names

    model, names = paths(1)
    assert names == ["_recurrent_dropped", "_recurrent_dropped"]
    assert paths(2)[1] == ["_checked", "_checked"]
    rng = np.random.default_rng(23)
    _compare(keras, "tensorflow", model, rng.normal(size=(4, 4, 3)), rng.normal(size=(4, 2)))
