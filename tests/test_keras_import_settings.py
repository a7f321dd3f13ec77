"""Nothing silent: every setting of every Keras layer from_keras supports is applied as Keras applies it (the same
numbers as Keras' own training, float64, within 1e-10) or refused with a KerasImportError naming the layer and the
setting. Frozen layers (``trainable = False``, a frozen base), regularizers, Keras' rank rule for losses,
and a walk over every constructor argument of every supported layer."""

from __future__ import annotations

import contextlib
import importlib.util
import inspect

import numpy as np
import pytest

import toolkit
from tests import keras_walk_more as more
from toolkit.keras.layers import SUPPORTED

pytestmark = pytest.mark.skipif(importlib.util.find_spec("keras") is None,
                                reason='needs keras (pip install "multigpu-toolkit[tensorflow]")')

RNG = np.random.default_rng(28)
#: Eight examples: every device count of the tests splits them evenly.
IMAGES, LABELS = RNG.normal(size=(8, 6, 6, 2)), RNG.integers(0, 3, size=8)
FEATURES, TARGETS = RNG.normal(size=(8, 5)), RNG.normal(size=8)
#: Keras rounds its learning rate and (on TensorFlow) regularization coefficients to float32: powers of two are the
#: same numbers in float64.
LR = 2.0 ** -4
TOLERANCE = 1e-10
STEPS = 3


def _worst_weight(keras, trainer, model) -> tuple[float, str]:
    """The largest difference between the trainer's parameters and state, written into a clone of ``model`` by
    to_keras, and ``model``'s own weights, and the weight where it is (``layer/weight``)."""
    clone = keras.models.clone_model(model)
    toolkit.to_keras(trainer.params(), clone, trainer.state())
    return max((float(np.max(np.abs(a - b))), "/".join(w.path.split("/")[-2:]))
               for a, b, w in zip(clone.get_weights(), model.get_weights(), model.weights))


def _weights_diff(keras, trainer, model) -> float:
    return _worst_weight(keras, trainer, model)[0]


def layer_weights(model) -> dict[str, np.ndarray]:
    """A Keras model's weights by layer and weight name (``dense/kernel``), as from_keras names its layers' own."""
    return {"/".join(w.path.split("/")[-2:]): np.asarray(w.numpy()) for w in model.weights}


def _train_both(keras_model, backend, n_devices, x, y, steps=STEPS, optimizer=None):
    """The toolkit's SGD steps on the imported model and Keras' own train_on_batch steps: both losses per step, and
    the trainer."""
    trainer = toolkit.DataParallel(toolkit.from_keras(keras_model), backend, n_devices,
                                   optimizer or toolkit.optim.SGD(LR), dtype="float64")
    losses = [trainer.step(x, y) for _ in range(steps)]
    keras_losses = [float(keras_model.train_on_batch(x, y)) for _ in range(steps)]
    return losses, keras_losses, trainer


@contextlib.contextmanager
def _raised_in_the_step(error: type, words: str):
    """The trainer reports an error raised while its step is traced as a ComputeError naming the device, with the
    error as its cause and in its message."""
    with pytest.raises(toolkit.ComputeError, match=f"{error.__name__}: .*{words}") as raised:
        yield
    assert isinstance(raised.value.__cause__, error)


def _regularized(keras):
    keras.utils.set_random_seed(5)
    reg = keras.regularizers
    model = keras.Sequential([
        keras.Input((6, 6, 2)),
        keras.layers.Conv2D(3, 3, activation="relu", kernel_regularizer=reg.L2(2.0 ** -4),
                            bias_regularizer=reg.L1(2.0 ** -5), name="conv"),
        keras.layers.BatchNormalization(gamma_regularizer=reg.L1L2(2.0 ** -6, 2.0 ** -5), synchronized=True,
                                        name="norm"),
        keras.layers.Flatten(),
        keras.layers.Dense(4, activation="tanh", activity_regularizer=reg.L1L2(2.0 ** -3, 2.0 ** -4), name="hidden"),
        keras.layers.Dense(3, activation="softmax", kernel_regularizer=reg.L2(2.0 ** -2), name="out"),
    ])
    model.compile(optimizer=keras.optimizers.SGD(LR), loss="sparse_categorical_crossentropy")
    return model


def test_a_regularized_model_trains_like_keras(keras, backend, n_devices):
    """Weight penalties (L1, L2, L1L2 on kernels, biases and a BatchNormalization's gamma) and an activity penalty
    (divided by the batch size, as Keras divides it) are in the loss and its gradients: three SGD steps on 1, 2 and 4
    devices equal Keras' own on one (batch normalization synchronized, so that its statistics are the batch's on
    every device count)."""
    model = _regularized(keras)
    model(IMAGES[:2], training=True)
    assert float(sum(model.losses)) > 0.1  # the penalties weigh: a model without them would differ by that much
    losses, keras_losses, trainer = _train_both(model, backend, n_devices, IMAGES, LABELS)
    assert np.max(np.abs(np.subtract(losses, keras_losses))) <= TOLERANCE, (losses, keras_losses)
    assert _weights_diff(keras, trainer, model) <= TOLERANCE


def test_evaluate_refuses_a_regularized_model_rather_than_leave_the_penalties_out(keras, backend):
    trainer = toolkit.DataParallel(toolkit.from_keras(_regularized(keras)), backend, 1, toolkit.optim.SGD(LR),
                                   dtype="float64")
    with _raised_in_the_step(toolkit.KerasImportError, "regularizers' penalties"):
        trainer.evaluate(IMAGES, LABELS)


def _transfer(keras):
    """A frozen base (a Sequential model inside the model, ``base.trainable = False``: its convolution and its batch
    normalization with moved statistics) under a trainable head, as Keras' transfer-learning guide writes it."""
    keras.utils.set_random_seed(6)
    base = keras.Sequential([keras.Input((6, 6, 2)), keras.layers.Conv2D(4, 3, activation="relu", name="base_conv"),
                             keras.layers.BatchNormalization(name="base_norm"),
                             keras.layers.GlobalAveragePooling2D(name="base_pool")], name="base")
    base.get_layer("base_norm").set_weights([w + RNG.normal(size=w.shape) * 0.1 + (1.0 if i == 3 else 0.0)
                                             for i, w in enumerate(base.get_layer("base_norm").get_weights())])
    base.trainable = False
    model = keras.Sequential([keras.Input((6, 6, 2)), base, keras.layers.Dense(8, activation="relu", name="top"),
                              keras.layers.BatchNormalization(synchronized=True, name="top_norm"),
                              keras.layers.Dense(3, activation="softmax", name="classes")])
    model.compile(optimizer=keras.optimizers.SGD(LR), loss="sparse_categorical_crossentropy")
    return model


def test_a_frozen_base_trains_like_keras_and_stays_as_it_was(keras, backend, n_devices):
    """Keras' transfer learning: the frozen base's weights are model state nothing updates (exactly as they were,
    after every step, on every device count), its batch normalization runs on its moving statistics (Keras 3's
    rule), and the head trains as Keras' fit trains it."""
    model = _transfer(keras)
    frozen = {k: v for k, v in layer_weights(model).items() if k.startswith("base_")}
    losses, keras_losses, trainer = _train_both(model, backend, n_devices, IMAGES, LABELS)
    assert np.max(np.abs(np.subtract(losses, keras_losses))) <= TOLERANCE, (losses, keras_losses)
    assert _weights_diff(keras, trainer, model) <= TOLERANCE
    assert not any(name.startswith("base_") for name in trainer.params())
    for name, value in frozen.items():
        np.testing.assert_array_equal(trainer.state()[name], value, err_msg=name)
    # the head's batch normalization trains: its statistics moved
    assert np.max(np.abs(trainer.state()["top_norm/moving_mean"])) > 0


def test_frozen_weights_get_no_optimizer_slots_and_go_back_unchanged(keras, backend):
    model = _transfer(keras)
    before = layer_weights(model)
    trainer = toolkit.DataParallel(toolkit.from_keras(model), backend, 2, toolkit.optim.Adam(0.01), dtype="float64")
    trainer.step(IMAGES, LABELS)
    slots = trainer.optimizer_state()
    assert slots and all(set(values) == set(trainer.params()) for values in slots.values())
    assert not any(name.startswith("base_") for values in slots.values() for name in values)
    toolkit.to_keras(trainer.params(), model, trainer.state())
    after = layer_weights(model)
    for name in before:
        if name.startswith("base_"):
            np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    np.testing.assert_allclose(np.asarray(model(IMAGES, training=False)), trainer.predict(IMAGES), rtol=0,
                               atol=TOLERANCE)


def test_unsupported_regularizers_are_refused(keras):
    orthogonal = keras.Sequential([keras.Input((5,)), keras.layers.Dense(
        3, kernel_regularizer=keras.regularizers.OrthogonalRegularizer(0.1), name="orth")])
    custom = keras.Sequential([keras.Input((5,)), keras.layers.Dense(
        3, activity_regularizer=lambda y: keras.ops.sum(y), name="custom")])
    for model, words in [(orthogonal, "layer 'orth' .*kernel_regularizer=OrthogonalRegularizer"),
                         (custom, "layer 'custom' .*activity_regularizer=function")]:
        model.compile(loss="mse")
        with pytest.raises(toolkit.KerasImportError, match=words):
            toolkit.from_keras(model)


@pytest.mark.parametrize("loss, y", [("mse", TARGETS), ("mse", TARGETS[:, None]),
                                     ("sparse_categorical_crossentropy", LABELS[:, None])],
                         ids=["mse-N", "mse-N1", "sparse-N1"])
def test_losses_bring_targets_and_outputs_to_one_rank_as_keras(keras, backend, n_devices, loss, y):
    """Targets ``(N,)`` against outputs ``(N, 1)`` (Keras expands them; broadcasting would pair every target with
    every output), and sparse labels ``(N, 1)`` as keras.datasets gives them (Keras squeezes them)."""
    keras.utils.set_random_seed(7)
    units = 1 if loss == "mse" else 3
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(4, activation="tanh"),
                              keras.layers.Dense(units, activation=None if units == 1 else "softmax")])
    model.compile(optimizer=keras.optimizers.SGD(LR), loss=loss)
    losses, keras_losses, trainer = _train_both(model, backend, n_devices, FEATURES, y)
    assert np.max(np.abs(np.subtract(losses, keras_losses))) <= TOLERANCE, (losses, keras_losses)
    assert _weights_diff(keras, trainer, model) <= TOLERANCE


def test_targets_that_keras_rank_rule_cannot_reconcile_raise_a_shape_error(keras, backend):
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(1)])
    model.compile(loss="mse")
    trainer = toolkit.DataParallel(toolkit.from_keras(model), backend, 1, toolkit.optim.SGD(LR), dtype="float64")
    with _raised_in_the_step(toolkit.ShapeError, r"pass targets of the outputs' shape \(\w*, 1\)"):
        trainer.step(FEATURES, RNG.normal(size=(8, 2, 3)))
    sparse = keras.Sequential([keras.Input((5,)), keras.layers.Dense(3, activation="softmax")])
    sparse.compile(loss="sparse_categorical_crossentropy")
    trainer = toolkit.DataParallel(toolkit.from_keras(sparse), backend, 1, toolkit.optim.SGD(LR), dtype="float64")
    with _raised_in_the_step(toolkit.ShapeError, "one class index per output row"):
        trainer.step(FEATURES, np.zeros((8, 2), np.int64))


# --- the walk over every constructor argument ------------------------------------------------------------------
#: Inputs of the walk's models by kind: (shape without the batch, dtype). Six examples, as a fixed batch size
#: (stateful recurrent layers need one).
INPUTS = {"flat": ((5,), "float64"), "image": ((6, 6, 4), "float64"), "sequence": ((5, 3), "float64"),
          "ids": ((5,), "int32"), **more.INPUTS}
WALK_BATCH = 6


def _layers(keras):
    """Each supported layer: (its input, how to make it from its required arguments and ``options``)."""
    layer = keras.layers

    def merge(kind):
        return "flat", lambda **o: getattr(layer, kind)(**o)

    return {
        "Dense": ("flat", lambda **o: layer.Dense(**{"units": 3, **o})),
        "Conv2D": ("image", lambda **o: layer.Conv2D(**{"filters": 4, "kernel_size": 3, **o})),
        "MaxPooling2D": ("image", lambda **o: layer.MaxPooling2D(**o)),
        "AveragePooling2D": ("image", lambda **o: layer.AveragePooling2D(**{"pool_size": 2, **o})),
        "GlobalAveragePooling2D": ("image", lambda **o: layer.GlobalAveragePooling2D(**o)),
        "GlobalMaxPooling2D": ("image", lambda **o: layer.GlobalMaxPooling2D(**o)),
        "GlobalAveragePooling1D": ("sequence", lambda **o: layer.GlobalAveragePooling1D(**o)),
        "Flatten": ("image", lambda **o: layer.Flatten(**o)),
        # Rate 0: Keras' dropout masks are not the toolkit's (by design), so the walk's training step has none.
        "Dropout": ("flat", lambda **o: layer.Dropout(**{"rate": 0.0, **o})),
        "BatchNormalization": ("flat", lambda **o: layer.BatchNormalization(**o)),
        "LayerNormalization": ("flat", lambda **o: layer.LayerNormalization(**o)),
        "Embedding": ("ids", lambda **o: layer.Embedding(**{"input_dim": 10, "output_dim": 4, **o})),
        "LSTM": ("sequence", lambda **o: layer.LSTM(**{"units": 4, **o})),
        "GRU": ("sequence", lambda **o: layer.GRU(**{"units": 4, **o})),
        "Activation": ("flat", lambda **o: layer.Activation(**{"activation": "relu", **o})),
        "ReLU": ("flat", lambda **o: layer.ReLU(**o)),
        **{kind: merge(kind) for kind in ("Add", "Subtract", "Multiply", "Maximum", "Minimum", "Average",
                                          "Concatenate")},
        # key_dim 4 and 16: Keras scales by 1/sqrt(key_dim) rounded to float32, exact for these.
        "MultiHeadAttention": ("sequence", lambda **o: layer.MultiHeadAttention(**{"num_heads": 2, "key_dim": 4,
                                                                                   **o})),
        **more.layers(keras),
    }


def _non_default(keras) -> dict[str, dict]:
    """A value other than the default for every constructor argument of every supported layer."""
    reg, con, init = keras.regularizers, keras.constraints, keras.initializers
    shared = {"name": "renamed", "trainable": False, "dtype": "mixed_float16",
              "activity_regularizer": reg.L1L2(2.0 ** -3, 2.0 ** -4)}
    dense_like = {"activation": "tanh", "use_bias": False, "kernel_initializer": "he_normal",
                  "bias_initializer": init.Constant(0.5), "kernel_regularizer": reg.L2(2.0 ** -4),
                  "bias_regularizer": reg.L1(2.0 ** -3), "kernel_constraint": con.MaxNorm(0.5),
                  "bias_constraint": con.NonNeg()}
    pooling = {"pool_size": 3, "strides": 1, "padding": "same", "data_format": "channels_first"}
    global_ = {"data_format": "channels_first", "keepdims": True}
    normalization = {"axis": 0, "epsilon": 2.0 ** -5, "center": False, "scale": False,
                     "beta_initializer": init.Constant(0.25), "gamma_initializer": init.Constant(1.5),
                     "beta_regularizer": reg.L2(2.0 ** -3), "gamma_regularizer": reg.L1(2.0 ** -4),
                     "beta_constraint": con.NonNeg(), "gamma_constraint": con.UnitNorm()}
    recurrent = {"units": 2, "activation": "relu", "recurrent_activation": "hard_sigmoid", "use_bias": False,
                 "kernel_initializer": "he_normal", "recurrent_initializer": "glorot_normal",
                 "bias_initializer": init.Constant(0.5), "kernel_regularizer": reg.L2(2.0 ** -4),
                 "recurrent_regularizer": reg.L1(2.0 ** -5), "bias_regularizer": reg.L2(2.0 ** -3),
                 "kernel_constraint": con.MaxNorm(1.0), "recurrent_constraint": con.NonNeg(),
                 "bias_constraint": con.UnitNorm(), "dropout": 0.25, "recurrent_dropout": 0.25, "seed": 3,
                 "return_sequences": True, "return_state": True, "go_backwards": True, "stateful": True,
                 "unroll": True, "use_cudnn": False, "zero_output_for_mask": True}
    values = {
        "Dense": {"units": 4, **dense_like, "lora_rank": 2, "lora_alpha": 4.0,
                  "quantization_config": keras.quantizers.Int8QuantizationConfig()},
        "Conv2D": {"filters": 2, "kernel_size": 2, "strides": 2, "padding": "same",
                   "data_format": "channels_first", "dilation_rate": 2, "groups": 2, **dense_like},
        "MaxPooling2D": pooling, "AveragePooling2D": pooling,
        "GlobalAveragePooling2D": global_, "GlobalMaxPooling2D": global_, "GlobalAveragePooling1D": global_,
        "Flatten": {"data_format": "channels_first"},
        "Dropout": {"rate": 0.5, "noise_shape": (1, 5), "seed": 3},
        "BatchNormalization": {**normalization, "momentum": 0.5, "moving_mean_initializer": init.Constant(0.25),
                               "moving_variance_initializer": init.Constant(2.0), "renorm": True,
                               "renorm_clipping": {"rmax": 2.0}, "renorm_momentum": 0.5, "synchronized": True},
        "LayerNormalization": {**normalization, "axis": 0, "rms_scaling": True},
        "Embedding": {"input_dim": 12, "output_dim": 2, "embeddings_initializer": "he_normal",
                      "embeddings_regularizer": reg.L2(2.0 ** -4), "embeddings_constraint": con.MaxNorm(1.0),
                      "mask_zero": True, "weights": [RNG.normal(size=(10, 4))], "lora_rank": 2, "lora_alpha": 4.0,
                      "quantization_config": keras.quantizers.Int8QuantizationConfig()},
        "LSTM": {**recurrent, "unit_forget_bias": False},
        "GRU": {**recurrent, "reset_after": False},
        "Activation": {"activation": "tanh"},
        "ReLU": {"max_value": 0.5, "negative_slope": 0.25, "threshold": 0.125},
        **{kind: {} for kind in ("Add", "Subtract", "Multiply", "Maximum", "Minimum", "Average")},
        "Concatenate": {"axis": 1},
        "MultiHeadAttention": {"num_heads": 1, "key_dim": 16, "value_dim": 2, "dropout": 0.25, "use_bias": False,
                               "output_shape": (2,), "attention_axes": (2,), "sliding_window": 2,
                               "flash_attention": False, "kernel_initializer": "he_normal",
                               "bias_initializer": init.Constant(0.5), "kernel_regularizer": reg.L2(2.0 ** -4),
                               "bias_regularizer": reg.L1(2.0 ** -3), "kernel_constraint": con.MaxNorm(0.5),
                               "bias_constraint": con.NonNeg(), "use_gate": True, "seed": 3},
    }
    return {**{kind: {**shared, **options} for kind, options in values.items()}, **more.values(keras, shared)}


#: Arguments that change training only: the walk trains one step with them, and predicts with the others.
TRAINING = ("trainable", "momentum", "_regularizer", "_constraint")
#: Arguments whose training step runs on TensorFlow only: the importer turns them into the model's constraints,
#: which tests/test_constraints.py checks on every backend and path.
TENSORFLOW_TRAINING = ("_constraint",)
#: The walk's outcomes that are refusals, by layer: every other argument is honoured, with Keras' numbers.
REFUSED = {
    "Dense": {"dtype", "lora_rank", "quantization_config"},
    "Conv2D": {"dtype"},
    "MaxPooling2D": {"dtype"}, "AveragePooling2D": {"dtype"},
    "GlobalAveragePooling2D": {"dtype"}, "GlobalMaxPooling2D": {"dtype"}, "GlobalAveragePooling1D": {"dtype"},
    "Flatten": {"dtype", "data_format"}, "Dropout": {"dtype"},
    "BatchNormalization": {"dtype", "axis", "center", "scale", "renorm", "renorm_clipping", "renorm_momentum"},
    "LayerNormalization": {"dtype", "axis", "center", "scale", "rms_scaling"},
    "Embedding": {"dtype", "lora_rank", "quantization_config"},
    **{kind: {"dtype", "activation", "recurrent_activation",
              "return_state", "stateful"} |
       ({"reset_after"} if kind == "GRU" else set())
       for kind in ("LSTM", "GRU")},
    "Activation": {"dtype"}, "ReLU": {"dtype"},
    **{kind: {"dtype"} for kind in ("Add", "Subtract", "Multiply", "Maximum", "Minimum", "Average", "Concatenate")},
    "MultiHeadAttention": {"dtype", "activity_regularizer", "output_shape", "attention_axes",
                           "sliding_window", "use_gate"},
    **more.ALL_REFUSED,
}


def _arguments(keras, kind: str) -> set[str]:
    """Every constructor argument of a supported layer class: its ``__init__`` parameters and its config keys."""
    cls = getattr(keras.layers, kind)
    source, make = _layers(keras)[kind]
    parameters = {name for name, p in inspect.signature(cls.__init__).parameters.items()
                  if name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
    shared = {"name", "trainable", "dtype", "activity_regularizer"} - more.NOT_ARGUMENTS.get(kind, set())
    return parameters | set(make().get_config()) | shared


def test_the_walk_covers_every_constructor_argument(keras):
    """A Keras release that adds an argument to a supported layer fails here until the walk gives it a value (and
    from_keras refuses it meanwhile: see the walk)."""
    values = _non_default(keras)
    assert set(values) == set(SUPPORTED) == set(REFUSED)
    for kind in SUPPORTED:
        assert _arguments(keras, kind) <= set(values[kind]), (kind, _arguments(keras, kind) - set(values[kind]))


def _walk_model(keras, kind: str, cases: dict):
    """Input, then for each ``key: value`` of ``cases`` a branch of its own: the layer with ``key=value`` (named
    ``walked``, or ``walked_<i>`` where there are several), flattened, and a trainable Dense head of two units (so
    that every case has a parameter to train); the heads' outputs side by side, two columns a case, in the order of
    ``cases``. Compiled with MSE and SGD. The branches share nothing but the input, so each case computes, trains and
    is penalised as it would alone (MSE over the columns is their mean of the cases' own)."""
    source, make = _layers(keras)[kind]
    shape, dtype = INPUTS[source]
    inputs = keras.Input(shape, batch_size=WALK_BATCH, dtype=dtype)
    heads, names = [], []
    for i, (key, value) in enumerate(cases.items()):
        tag = "" if len(cases) == 1 else f"_{i}"
        try:
            layer = make(**({key: value} if key == "name" else {"name": f"walked{tag}", key: value}))
        except (ValueError, TypeError, NotImplementedError) as error:  # the walk's value is not one Keras takes
            raise AssertionError(f"Keras refuses {kind}({key}={value!r}): {error}") from error
        if kind in _MERGES:
            x = layer([inputs, keras.layers.Dense(5, name=f"other{tag}")(inputs)])
        else:
            x = layer(inputs, inputs) if kind == "MultiHeadAttention" else \
                layer([inputs, inputs]) if kind == "Attention" else layer(inputs)
        x = x[0] if isinstance(x, (list, tuple)) else x  # return_state: the output, then the states
        x = keras.layers.Flatten(name=f"flat_head{tag}")(x) if len(x.shape) > 2 else x
        heads.append(keras.layers.Dense(2, name=f"head{tag}")(x))
        names.append(layer.name)
    outputs = heads[0] if len(heads) == 1 else keras.layers.Concatenate(name="heads")(heads)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.SGD(LR), loss="mse", jit_compile=kind in more.KERAS_TRAINS_WITH_XLA)
    return model, names


_MERGES = ("Add", "Subtract", "Multiply", "Maximum", "Minimum", "Average", "Concatenate", "Dot")


def _keras_predict(model, x) -> np.ndarray:
    """Keras' inference; compiled by XLA where TensorFlow's CPU kernels cannot run it (channels-first convolutions,
    float64 3-D average pooling)."""
    import tensorflow as tf

    try:
        return np.asarray(model(x, training=False))
    except (tf.errors.UnimplementedError, tf.errors.NotFoundError, tf.errors.InvalidArgumentError):
        return np.asarray(tf.function(lambda v: model(v, training=False), jit_compile=True)(x))


def _walk_input(source: str) -> np.ndarray:
    shape, dtype = INPUTS[source]
    if dtype == "int32":
        return RNG.integers(0, 10, size=(WALK_BATCH, *shape)).astype(np.int32)
    return RNG.normal(size=(WALK_BATCH, *shape))


@pytest.mark.parametrize("kind", sorted(SUPPORTED))
def test_every_constructor_argument_is_honoured_or_refused(keras, backend, kind):
    """Each argument of each supported layer set to a value other than its default, one at a time: from_keras
    either refuses it with a KerasImportError that names the layer and the argument, or the imported model computes
    what Keras computes with it (predict, and for the arguments that change training, a training step's loss,
    parameters and statistics), within 1e-10 (1e-6 where Keras computes in float32: its max pooling).

    One at a time, but not one model each: each refusal of :data:`REFUSED` is checked on a model of its own, the other
    arguments together on one model with a branch each (:func:`_walk_model`), which from_keras must import whole (a
    refusal would name the layer, so the argument) and whose every branch must compute what Keras computes; those
    that change training then train on one such model. (A Keras model, its variables, a trainer and a compiled
    predict and step per case were most of the walk's CPU.)

    On the Theano family only the arguments that change training are walked (the importer applies those itself:
    regularizers, frozen weights, batch normalization's momentum); the others are translated into the same ops on
    every backend, which TensorFlow's run shows equal to Keras and the op and layer tests show equal across backends,
    and from_keras, which runs no backend, refuses or takes them alike wherever TensorFlow's run shows it. One test per
    layer, so that the walk's cases spread over the test workers."""
    everything = backend.name == "tensorflow"
    walked = {key: value for key, value in _non_default(keras)[kind].items()
              if everything or (key.endswith(TRAINING) or key in TRAINING) and not key.endswith(TENSORFLOW_TRAINING)
              and kind not in more.TENSORFLOW_ONLY}
    for key in REFUSED[kind] & set(walked):
        keras.utils.set_random_seed(8)
        model, (name,) = _walk_model(keras, kind, {key: walked.pop(key)})
        with pytest.raises(toolkit.KerasImportError) as refused:
            toolkit.from_keras(model)
        assert f"layer {name!r}" in str(refused.value) and key in str(refused.value), (kind, key, str(refused.value))
    if not walked:
        return
    keras.utils.set_random_seed(8)
    model, names = _walk_model(keras, kind, walked)
    imported = toolkit.from_keras(model)  # every argument not refused above is honoured
    if kind in more.KERAS_CANNOT_RUN:
        return
    training = {key: value for key, value in walked.items() if key.endswith(TRAINING) or key in TRAINING}
    tolerance = 1e-6 if kind == "MaxPooling2D" else TOLERANCE
    x = _walk_input(_layers(keras)[kind][0])
    trainer = toolkit.DataParallel(imported, backend, 1, toolkit.optim.SGD(LR), dtype="float64")
    ours, theirs = trainer.predict(x), _keras_predict(model, x)
    for i, (key, value) in enumerate(walked.items()):  # two columns a case
        np.testing.assert_allclose(ours[:, 2 * i:2 * i + 2], theirs[:, 2 * i:2 * i + 2], rtol=0, atol=tolerance,
                                   err_msg=f"{kind} {key}={value!r}")
    if not training:
        return
    if training != walked:  # on the Theano family they are the same: the same model trains
        keras.utils.set_random_seed(8)
        model, names = _walk_model(keras, kind, training)
        trainer = toolkit.DataParallel(toolkit.from_keras(model), backend, 1, toolkit.optim.SGD(LR), dtype="float64")
    y = np.zeros((WALK_BATCH, 2 * len(training)))
    # Keras' one training step runs eagerly (tracing its tf.function cost more than the step), except where its
    # CPU kernels need XLA; set after the import, which refuses a model compiled to run eagerly.
    model.run_eagerly = kind not in more.KERAS_TRAINS_WITH_XLA
    loss, keras_loss = trainer.step(x, y), float(model.train_on_batch(x, y))
    worst, where = _worst_weight(keras, trainer, model)  # first: it names the layer, so the argument
    assert worst <= tolerance, (kind, where, worst, dict(zip(names, training)))  # layer name -> its argument
    assert abs(loss - keras_loss) <= tolerance, (kind, sorted(training), loss, keras_loss)
