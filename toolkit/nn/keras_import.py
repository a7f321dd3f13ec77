"""Keras models imported as they are (:func:`from_keras`) and trained parameters written back (:func:`to_keras`).

A built Keras 3 ``Sequential`` model made of the layers in :data:`SUPPORTED` becomes a :class:`~toolkit.Model`
whose ``forward`` runs the toolkit's layers (``toolkit.layers``: Keras' formulas and parameter shapes) with the
Keras model's current weights, so it runs on every backend and device count. Parameters are named
``<keras layer name>/<weight>`` (``dense_1/kernel``); batch normalization's moving statistics are model state.
Keras is imported only when these functions are called.

What differs from Keras by design: dropout draws the toolkit's per-example masks (reproducible across backends and
device counts), not Keras' random ones, so training with dropout matches Keras only in distribution; inference is
identical.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from toolkit.errors import KerasImportError
from toolkit.nn import layers
from toolkit.nn.model import Model, State

#: Keras activation names and the ops that compute them (``None``: linear).
ACTIVATIONS = {"linear": None, "relu": "relu", "tanh": "tanh", "sigmoid": "sigmoid", "softmax": "softmax",
               "gelu": "gelu", "silu": "silu", "swish": "silu", "softplus": "softplus"}

Step = Callable[[Any, dict, Any, Any], tuple[Any, Any]]  # (ops, params, x, mask) -> (y, mask)


def _activation(layer) -> str | None:
    activation = getattr(layer, "activation", None)
    name = getattr(activation, "__name__", None) if activation is not None else "linear"
    if name not in ACTIVATIONS:
        raise KerasImportError(f"layer {layer.name!r} ({type(layer).__name__}): activation {name!r} is not "
                               f"supported; supported: {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def _activate(ops, y, activation: str | None):
    if activation == "gelu":
        return ops.gelu(y, approximate=False)  # Keras' gelu activation is the exact one by default
    return layers.activate(ops, y, activation)


def _input_shape(layer) -> tuple:
    inputs = layer.input
    return tuple((inputs[0] if isinstance(inputs, (list, tuple)) else inputs).shape)  # with a mask: [x, mask]


def _require(layer, condition: bool, what: str) -> None:
    if not condition:
        raise KerasImportError(f"layer {layer.name!r} ({type(layer).__name__}): {what} is not supported")


def _dense(layer):
    _require(layer, layer.use_bias, "use_bias=False")
    activation, prefix = _activation(layer), layer.name
    kernel, bias = layer.get_weights()
    return {f"{prefix}/kernel": kernel, f"{prefix}/bias": bias}, \
        lambda ops, p, x, mask: (_activate(ops, layers.dense(ops, p, x, prefix), activation), mask)


def _conv2d(layer):
    _require(layer, layer.use_bias, "use_bias=False")
    _require(layer, layer.data_format == "channels_last", "channels_first")
    _require(layer, getattr(layer, "groups", 1) == 1, "groups > 1")
    activation, prefix = _activation(layer), layer.name
    strides, padding, dilation = tuple(layer.strides), layer.padding, tuple(layer.dilation_rate)
    kernel, bias = layer.get_weights()

    def step(ops, p, x, mask):
        y = layers.conv2d(ops, p, x, prefix, padding=padding, strides=strides, dilation_rate=dilation)
        return _activate(ops, y, activation), mask

    return {f"{prefix}/kernel": kernel, f"{prefix}/bias": bias}, step


def _pooling(reduce):
    def translate(layer):
        _require(layer, layer.data_format == "channels_last", "channels_first")
        size, strides, padding = tuple(layer.pool_size), tuple(layer.strides), layer.padding
        return {}, lambda ops, p, x, mask: (reduce(ops, x, size, strides=strides, padding=padding), mask)
    return translate


def _global(reduce):
    def translate(layer):
        _require(layer, layer.data_format == "channels_last", "channels_first")
        _require(layer, not layer.keepdims, "keepdims=True")
        return {}, lambda ops, p, x, mask: (reduce(ops, x), None)
    return translate


def _batch_norm(layer):
    _require(layer, layer.axis in (-1, len(_input_shape(layer)) - 1), f"axis={layer.axis!r} (only the last axis)")
    _require(layer, layer.center and layer.scale, "center=False or scale=False")
    prefix, momentum, epsilon, synchronized = layer.name, layer.momentum, layer.epsilon, layer.synchronized
    gamma, beta, mean, variance = layer.get_weights()

    def step(ops, p, x, mask):
        return layers.batch_norm(ops, p, x, prefix, momentum=momentum, epsilon=epsilon,
                                 synchronized=synchronized), mask

    return {f"{prefix}/gamma": gamma, f"{prefix}/beta": beta, f"{prefix}/moving_mean": State(mean),
            f"{prefix}/moving_variance": State(variance)}, step


def _layer_norm(layer):
    axis = list(np.atleast_1d(layer.axis))
    _require(layer, axis in ([-1], [len(_input_shape(layer)) - 1]), f"axis={layer.axis!r} (only the last axis)")
    _require(layer, layer.center and layer.scale and not getattr(layer, "rms_scaling", False),
             "center=False, scale=False or rms_scaling")
    prefix, epsilon = layer.name, layer.epsilon
    gamma, beta = layer.get_weights()
    return {f"{prefix}/gamma": gamma, f"{prefix}/beta": beta}, \
        lambda ops, p, x, mask: (layers.layer_norm(ops, p, x, prefix, epsilon=epsilon), mask)


def _embedding(layer):
    prefix, mask_zero = layer.name, layer.mask_zero
    (table,) = layer.get_weights()
    return {f"{prefix}/embeddings": table}, \
        lambda ops, p, ids, mask: (layers.embedding(ops, p, ids, prefix), (ids != 0) if mask_zero else None)


def _recurrent(run, names):
    def translate(layer):
        _require(layer, not layer.return_sequences and not layer.return_state, "return_sequences or return_state")
        _require(layer, not layer.go_backwards and not layer.stateful, "go_backwards or stateful")
        _require(layer, layer.use_bias, "use_bias=False")
        cell = layer.cell
        _require(layer, getattr(cell.activation, "__name__", "") == "tanh" and
                 getattr(cell.recurrent_activation, "__name__", "") == "sigmoid", "non-default activations")
        _require(layer, getattr(cell, "reset_after", True), "reset_after=False")
        _require(layer, not cell.dropout and not cell.recurrent_dropout, "dropout inside the cell")
        steps = _input_shape(layer)[1]
        _require(layer, steps is not None, "a sequence length unknown when the model was built")
        prefix, units = layer.name, cell.units
        weights = dict(zip(names, layer.get_weights()))
        return {f"{prefix}/{k}": v for k, v in weights.items()}, \
            lambda ops, p, x, mask: (run(ops, p, x, steps=steps, units=units, prefix=prefix, mask=mask), None)
    return translate


def _dropout(layer):
    rate, noise_shape = layer.rate, layer.noise_shape
    return {}, lambda ops, p, x, mask: (layers.dropout(ops, x, rate, noise_shape=noise_shape), mask)


def _activation_layer(layer):
    activation = _activation(layer)
    return {}, lambda ops, p, x, mask: (_activate(ops, x, activation), mask)


def _relu(layer):
    _require(layer, layer.max_value is None and not layer.negative_slope and not layer.threshold,
             "max_value, negative_slope or threshold")
    return {}, lambda ops, p, x, mask: (ops.relu(x), mask)


def _flatten(layer):
    return {}, lambda ops, p, x, mask: (layers.flatten(ops, x), mask)


#: Keras layer class names and how each is translated.
SUPPORTED: dict[str, Callable] = {
    "Dense": _dense, "Conv2D": _conv2d, "MaxPooling2D": _pooling(layers.max_pool2d),
    "AveragePooling2D": _pooling(layers.average_pool2d),
    "GlobalAveragePooling2D": _global(layers.global_average_pool2d),
    "GlobalMaxPooling2D": _global(layers.global_max_pool2d), "Flatten": _flatten, "Dropout": _dropout,
    "BatchNormalization": _batch_norm, "LayerNormalization": _layer_norm, "Embedding": _embedding,
    "LSTM": _recurrent(layers.lstm, ("kernel", "recurrent", "bias")),
    "GRU": _recurrent(layers.gru, ("kernel", "recurrent", "bias")),
    "Activation": _activation_layer, "ReLU": _relu,
}


def _loss(keras_model, loss) -> Callable:
    """The toolkit loss for ``loss`` (a name or a Keras loss object), or the model's compiled loss."""
    import keras

    loss = getattr(keras_model, "loss", None) if loss is None else loss
    if loss is None:
        raise KerasImportError("the Keras model has no loss (it was not compiled with one): pass loss=, for example "
                               "'sparse_categorical_crossentropy'")
    from_logits = bool(getattr(loss, "from_logits", False))
    name = loss if isinstance(loss, str) else getattr(loss, "name", type(loss).__name__)
    if isinstance(loss, keras.losses.SparseCategoricalCrossentropy) or name == "sparse_categorical_crossentropy":
        def sparse_categorical_crossentropy(ops, outputs, y):
            if from_logits:
                log_p = ops.log_softmax(outputs, axis=-1)
            else:  # Keras: normalise, clip to [eps, 1 - eps], log
                log_p = ops.log(ops.clip(outputs / ops.sum(outputs, axis=-1, keepdims=True), 1e-7, 1 - 1e-7))
            picked = ops.take_along_axis(log_p, ops.expand_dims(ops.cast(y, "int32"), -1), axis=-1)
            return -ops.squeeze(picked, axis=-1)
        return sparse_categorical_crossentropy
    if isinstance(loss, keras.losses.MeanSquaredError) or name in ("mean_squared_error", "mse"):
        return lambda ops, outputs, y: ops.mean(ops.square(outputs - y), axis=-1)
    raise KerasImportError(f"loss {name!r} is not supported; supported: sparse_categorical_crossentropy "
                           "(from_logits or not), mean_squared_error")


def from_keras(keras_model, loss: Any = None, name: str | None = None) -> Model:
    """A :class:`~toolkit.Model` computing what the built Keras ``Sequential`` model ``keras_model`` computes, with
    its current weights as the initial parameters, and its compiled loss (or ``loss``: a Keras loss name or
    object).

    Raises:
        KerasImportError: not a built Sequential model, a layer or option not in :data:`SUPPORTED` (named in the
            message), or no supported loss; nothing is imported.
    """
    import keras

    if not isinstance(keras_model, keras.Sequential):
        raise KerasImportError(f"from_keras takes a keras.Sequential model, got {type(keras_model).__name__} "
                               "(functional models are not supported yet)")
    if not keras_model.built:
        raise KerasImportError("the Keras model is not built: give it an Input or call it on data first")
    params, steps = {}, []
    for layer in keras_model.layers:
        kind = type(layer).__name__
        if kind not in SUPPORTED:
            raise KerasImportError(f"layer {layer.name!r} is a {kind}, which from_keras cannot translate; "
                                   f"supported: {', '.join(SUPPORTED)}")
        weights, step = SUPPORTED[kind](layer)
        params.update(weights)
        steps.append(step)
    score = _loss(keras_model, loss)
    initial = {k: State(np.array(v.value)) if isinstance(v, State) else np.array(v) for k, v in params.items()}

    def init(rng):
        return {k: State(np.array(v.value)) if isinstance(v, State) else np.array(v) for k, v in initial.items()}

    def forward(ops, p, x):
        mask = None
        for step in steps:
            x, mask = step(ops, p, x, mask)
        return x

    return Model(init, forward, score, name=name or keras_model.name)


def to_keras(params: dict[str, np.ndarray], keras_model, state: dict[str, np.ndarray] | None = None) -> None:
    """Write ``params`` (and model ``state``, for batch normalization), named as :func:`from_keras` names them,
    into ``keras_model``'s weights (``set_weights``), for example ``to_keras(trainer.params(), model,
    trainer.state())``.

    Raises:
        KerasImportError: a name missing or left over, or a shape that differs; nothing is written.
    """
    values = {**params, **(state or {})}
    plan = []
    for layer in keras_model.layers:
        kind = type(layer).__name__
        if kind not in SUPPORTED:
            raise KerasImportError(f"layer {layer.name!r} is a {kind}, which from_keras cannot translate")
        names = list(SUPPORTED[kind](layer)[0])
        current = layer.get_weights()
        for key, old in zip(names, current):
            if key not in values:
                raise KerasImportError(f"to_keras: no value for {key!r}")
            if np.shape(values[key]) != np.shape(old):
                raise KerasImportError(f"to_keras: {key!r} has shape {np.shape(values[key])}, the Keras weight "
                                       f"{np.shape(old)}")
        plan.append((layer, [np.asarray(values[k]) for k in names]))
    used = {k for layer, _ in plan for k in SUPPORTED[type(layer).__name__](layer)[0]}
    if set(values) - used:
        raise KerasImportError(f"to_keras: {sorted(set(values) - used)} name no weight of this Keras model")
    for layer, weights in plan:
        if weights:
            layer.set_weights(weights)


__all__ = ["ACTIVATIONS", "SUPPORTED", "KerasImportError", "from_keras", "to_keras"]
