"""How :func:`toolkit.from_keras` translates each Keras layer: :data:`SUPPORTED` maps a Keras layer class name to its
translator, and :data:`OPTIONS` lists the constructor arguments (``layer.get_config()`` keys) each translator reads
and applies (or refuses, with a :class:`~toolkit.KerasImportError` naming the argument). Any other argument given a
value other than its default is refused by the importer (:func:`toolkit.nn.keras_import.check_config`), so a Keras
argument this module does not know never changes Keras' numbers without changing the toolkit's.

A translator takes one call of a layer in the model's graph (:class:`_Call`) and returns the layer's weights (by
toolkit name, in Keras' order: ``<layer name>/<weight>``) and ``apply(ops, params, arguments) -> Flow``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from toolkit.errors import KerasImportError
from toolkit.nn import layers
from toolkit.nn.model import State

#: Keras activation names and the ops that compute them (``None``: linear).
ACTIVATIONS = {"linear": None, "relu": "relu", "tanh": "tanh", "sigmoid": "sigmoid", "softmax": "softmax",
               "gelu": "gelu", "silu": "silu", "swish": "silu", "softplus": "softplus"}


class Flow(NamedTuple):
    """A tensor of the imported graph as ``forward`` computes it: its value and its Keras mask (None: no mask)."""

    value: Any
    mask: Any


class _Slot(NamedTuple):
    """Where a Keras node's call reads a tensor of the program: its number."""

    index: int


class _MaskOf(NamedTuple):
    """Where a Keras node's call reads the Keras mask of a tensor of the program (Keras passes it as ``mask=``)."""

    index: int


class _Call(NamedTuple):
    """One call of a Keras layer in the model's graph: the layer, its (first) input's shape, its arguments bound by
    name to the layer's ``call`` signature (tensors as :class:`_Slot`), and whether Keras gave any input a mask.
    Its output is the program's next tensor.

    A translator takes a ``_Call`` and returns the layer's weights (by toolkit name, in Keras' order) and
    ``apply(ops, params, arguments) -> Flow``, which ``forward`` calls with the arguments' tensors as
    :class:`Flow`."""

    layer: Any
    shape: tuple
    arguments: dict
    masked: bool = False


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


def _require(layer, condition: bool, what: str) -> None:
    if not condition:
        raise KerasImportError(f"layer {layer.name!r} ({type(layer).__name__}): {what} is not supported")


def _and(ops, masks):
    """Attention's rule where masks meet: a position stays where every mask keeps it (None: no mask at all)."""
    masks = [m for m in masks if m is not None]
    return functools.reduce(ops.logical_and, masks) if masks else None


# --- one-input layers: (layer, input shape) -> (weights, (ops, params, x, mask) -> (y, mask)) -----------------------
def _unary(translate):
    """A translator for a layer called on one tensor: its first ``call`` argument, and an optional explicit
    ``mask``. Keras passes a mask on only through layers that support masking. ``training`` is not read: the
    trainer sets the mode (training steps, or inference for predict and evaluate)."""

    def translator(call: _Call):
        layer, (first, *rest) = call.layer, call.arguments
        extra = [name for name in rest if name not in ("mask", "training")]
        _require(layer, not extra and isinstance(call.arguments[first], _Slot),
                 f"calling it with {extra or 'nested inputs'}")
        weights, step = translate(layer, call.shape)
        passes_mask = layer.supports_masking

        def apply(ops, p, args):
            x = args[first]
            mask = args["mask"].value if isinstance(args.get("mask"), Flow) else x.mask
            y, out = step(ops, p, x.value, mask)
            return Flow(y, None if out is mask and not passes_mask else out)

        return weights, apply

    return translator


def _dense(layer, shape):
    _require(layer, layer.use_bias, "use_bias=False")
    activation, prefix = _activation(layer), layer.name
    kernel, bias = layer.get_weights()
    return {f"{prefix}/kernel": kernel, f"{prefix}/bias": bias}, \
        lambda ops, p, x, mask: (_activate(ops, layers.dense(ops, p, x, prefix), activation), mask)


def _conv2d(layer, shape):
    _require(layer, layer.use_bias, "use_bias=False")
    _require(layer, layer.data_format == "channels_last", "data_format='channels_first'")
    _require(layer, getattr(layer, "groups", 1) == 1, "groups > 1")
    activation, prefix = _activation(layer), layer.name
    strides, padding, dilation = tuple(layer.strides), layer.padding, tuple(layer.dilation_rate)
    kernel, bias = layer.get_weights()

    def step(ops, p, x, mask):
        y = layers.conv2d(ops, p, x, prefix, padding=padding, strides=strides, dilation_rate=dilation)
        return _activate(ops, y, activation), mask

    return {f"{prefix}/kernel": kernel, f"{prefix}/bias": bias}, step


def _pooling(reduce):
    def translate(layer, shape):
        _require(layer, layer.data_format == "channels_last", "data_format='channels_first'")
        size, strides, padding = tuple(layer.pool_size), tuple(layer.strides), layer.padding
        return {}, lambda ops, p, x, mask: (reduce(ops, x, size, strides=strides, padding=padding), mask)
    return translate


def _global(reduce):
    def translate(layer, shape):
        _require(layer, layer.data_format == "channels_last", "data_format='channels_first'")
        _require(layer, not layer.keepdims, "keepdims=True")
        return {}, lambda ops, p, x, mask: (reduce(ops, x), None)
    return translate


def _global_average_1d(layer, shape):
    """Keras' ``GlobalAveragePooling1D``: the mean over the steps, only the unmasked ones where there is a mask."""
    _require(layer, layer.data_format == "channels_last", "data_format='channels_first'")
    _require(layer, not layer.keepdims, "keepdims=True")

    def step(ops, p, x, mask):
        if mask is None:
            return ops.mean(x, axis=1), None
        weight = ops.expand_dims(ops.cast(mask, ops.dtype_of(x)), -1)
        return ops.sum(x * weight, axis=1) / ops.sum(weight, axis=1), None

    return {}, step


def _last_axis(layer, axis, shape) -> None:
    axis = list(np.atleast_1d(axis))
    _require(layer, axis in ([-1], [len(shape) - 1]), f"axis={layer.axis!r} (only the last axis)")


def _batch_norm(layer, shape):
    """Keras 3's ``BatchNormalization``; one with ``trainable = False`` (set on it or on a model holding it) runs in
    inference mode in training too: its moving statistics normalise, and nothing updates them."""
    _last_axis(layer, layer.axis, shape)
    _require(layer, layer.center and layer.scale, "center=False or scale=False")
    prefix, momentum, epsilon, synchronized = layer.name, layer.momentum, layer.epsilon, layer.synchronized
    gamma, beta, mean, variance = layer.get_weights()
    frozen = not layer.trainable

    def step(ops, p, x, mask):
        if frozen:  # layers.batch_norm's inference formula, whatever ops.training says
            return (x - p[f"{prefix}/moving_mean"]) / ops.sqrt(p[f"{prefix}/moving_variance"] + epsilon) * \
                p[f"{prefix}/gamma"] + p[f"{prefix}/beta"], mask
        return layers.batch_norm(ops, p, x, prefix, momentum=momentum, epsilon=epsilon,
                                 synchronized=synchronized), mask

    return {f"{prefix}/gamma": gamma, f"{prefix}/beta": beta, f"{prefix}/moving_mean": State(mean),
            f"{prefix}/moving_variance": State(variance)}, step


def _layer_norm(layer, shape):
    _last_axis(layer, layer.axis, shape)
    _require(layer, layer.center and layer.scale and not getattr(layer, "rms_scaling", False),
             "center=False, scale=False or rms_scaling")
    prefix, epsilon = layer.name, layer.epsilon
    gamma, beta = layer.get_weights()
    return {f"{prefix}/gamma": gamma, f"{prefix}/beta": beta}, \
        lambda ops, p, x, mask: (layers.layer_norm(ops, p, x, prefix, epsilon=epsilon), mask)


def _embedding(layer, shape):
    prefix, mask_zero = layer.name, layer.mask_zero
    (table,) = layer.get_weights()
    return {f"{prefix}/embeddings": table}, \
        lambda ops, p, ids, mask: (layers.embedding(ops, p, ids, prefix), (ids != 0) if mask_zero else None)


def _recurrent(run, names):
    def translate(layer, shape):
        _require(layer, not layer.return_sequences and not layer.return_state, "return_sequences or return_state")
        _require(layer, not layer.go_backwards and not layer.stateful, "go_backwards or stateful")
        _require(layer, layer.use_bias, "use_bias=False")
        cell = layer.cell
        _require(layer, getattr(cell.activation, "__name__", "") == "tanh", "an activation other than tanh")
        _require(layer, getattr(cell.recurrent_activation, "__name__", "") == "sigmoid",
                 "a recurrent_activation other than sigmoid")
        _require(layer, getattr(cell, "reset_after", True), "reset_after=False")
        _require(layer, not cell.dropout and not cell.recurrent_dropout, "dropout or recurrent_dropout in the cell")
        steps = shape[1]
        _require(layer, steps is not None, "a sequence length unknown when the model was built")
        prefix, units, unroll = layer.name, cell.units, bool(layer.unroll)
        weights = dict(zip(names, layer.get_weights()))
        return {f"{prefix}/{k}": v for k, v in weights.items()}, \
            lambda ops, p, x, mask: (run(ops, p, x, steps=steps, units=units, prefix=prefix, mask=mask,
                                         unroll=unroll), None)
    return translate


def _dropout(layer, shape):
    rate, noise_shape = layer.rate, layer.noise_shape
    return {}, lambda ops, p, x, mask: (layers.dropout(ops, x, rate, noise_shape=noise_shape), mask)


def _activation_layer(layer, shape):
    activation = _activation(layer)
    return {}, lambda ops, p, x, mask: (_activate(ops, x, activation), mask)


def _relu(layer, shape):
    _require(layer, layer.max_value is None and not layer.negative_slope and not layer.threshold,
             "max_value, negative_slope or threshold")
    return {}, lambda ops, p, x, mask: (ops.relu(x), mask)


def _flatten(layer, shape):
    return {}, lambda ops, p, x, mask: (layers.flatten(ops, x), mask)


# --- layers of several tensors: (layer, input shape, call) -> (weights, apply) -----------------------------------
def _or(ops, masks):
    """Keras' rule for merged masks: None unless every input has one, then a position stays where any keeps it."""
    return None if any(m is None for m in masks) else functools.reduce(ops.logical_or, masks)


def _merge(combine, masks: bool = True):
    """Keras' merge layers, called on a list of tensors: their values combined in order, their masks ORed
    (``masks=False``: masked inputs refused)."""

    def translator(call: _Call):
        layer, inputs = call.layer, call.arguments.get("inputs")
        _require(layer, set(call.arguments) <= {"inputs", "training", "mask"} and isinstance(inputs, (list, tuple))
                 and all(isinstance(i, _Slot) for i in inputs), "calling it on anything but a list of tensors")
        _require(layer, masks or not call.masked, "masked inputs (a Keras mask reaching it)")
        axis = getattr(layer, "axis", None)

        def apply(ops, p, args):
            flows = args["inputs"]
            return Flow(combine(ops, [f.value for f in flows], axis), _or(ops, [f.mask for f in flows]))

        return {}, apply

    return translator


def _chain(op):
    return lambda ops, values, axis: functools.reduce(getattr(ops, op), values)


def _attention(c: _Call):
    """Keras' ``MultiHeadAttention`` called as ``(query, value, key=None, attention_mask=None,
    use_causal_mask=False)``; the query's, value's and key's Keras masks are ANDed into the attention mask as Keras
    does (query ``[B, T, 1]``, value and key ``[B, 1, S]``), and the output keeps the query's mask."""
    layer, call = c.layer, c.arguments
    _require(layer, not layer.dropout, f"dropout={layer.dropout} (attention dropout)")
    _require(layer, layer.use_bias, "use_bias=False")
    _require(layer, getattr(layer, "_output_shape", None) is None, "output_shape")
    _require(layer, layer.attention_axes in (None, (1,), [1]), f"attention_axes={layer.attention_axes!r}")
    _require(layer, not getattr(layer, "_use_gate", False), "use_gate=True")
    _require(layer, getattr(layer, "_sliding_window", None) is None, "sliding_window")
    _require(layer, getattr(layer, "_activity_regularizer", None) is None,
             "activity_regularizer (Keras gives it to the query, key, value and output projections inside)")
    extra = set(call) - {"query", "value", "key", "attention_mask", "use_causal_mask", "training",
                         "return_attention_scores"}
    _require(layer, not extra and not call.get("return_attention_scores"),
             f"calling it with {sorted(extra) or 'return_attention_scores'}")
    causal = call.get("use_causal_mask", False)
    _require(layer, isinstance(causal, bool), "a use_causal_mask that is not a Python bool")
    prefix = layer.name
    names = [f"{prefix}/{part}/{w}" for part in ("query", "key", "value", "attention_output")
             for w in ("kernel", "bias")]

    def apply(ops, p, args):
        query, value, key = args["query"], args["value"], args.get("key")
        given = args.get("attention_mask")
        auto = _and(ops, [None if query.mask is None else ops.expand_dims(query.mask, -1),
                          None if value.mask is None else ops.expand_dims(value.mask, -2),
                          None if key is None or key.mask is None else ops.expand_dims(key.mask, -2),
                          None if given is None else ops.cast(given.value, "bool")])
        y = layers.multi_head_attention(ops, p, query.value, value.value, None if key is None else key.value,
                                        attention_mask=auto, use_causal_mask=causal, prefix=prefix)
        return Flow(y, query.mask)

    return dict(zip(names, layer.get_weights())), apply


#: Keras layer class names and how each is translated.
SUPPORTED: dict[str, Callable] = {
    **{name: _unary(translate) for name, translate in {
        "Dense": _dense, "Conv2D": _conv2d, "MaxPooling2D": _pooling(layers.max_pool2d),
        "AveragePooling2D": _pooling(layers.average_pool2d),
        "GlobalAveragePooling2D": _global(layers.global_average_pool2d),
        "GlobalMaxPooling2D": _global(layers.global_max_pool2d), "GlobalAveragePooling1D": _global_average_1d,
        "Flatten": _flatten, "Dropout": _dropout, "BatchNormalization": _batch_norm,
        "LayerNormalization": _layer_norm, "Embedding": _embedding,
        "LSTM": _recurrent(layers.lstm, ("kernel", "recurrent", "bias")),
        "GRU": _recurrent(layers.gru, ("kernel", "recurrent", "bias")),
        "Activation": _activation_layer, "ReLU": _relu}.items()},
    "Add": _merge(_chain("add")), "Subtract": _merge(lambda ops, values, axis: ops.subtract(*values)),
    "Multiply": _merge(_chain("multiply")), "Maximum": _merge(_chain("maximum")),
    "Minimum": _merge(_chain("minimum")),
    "Average": _merge(lambda ops, values, axis: _chain("add")(ops, values, axis) / float(len(values))),
    "Concatenate": _merge(lambda ops, values, axis: ops.concatenate(values, axis=axis), masks=False),
    "MultiHeadAttention": _attention,
}

_POOLING = frozenset({"pool_size", "strides", "padding", "data_format"})
_GLOBAL = frozenset({"data_format", "keepdims"})
_RECURRENT = frozenset({"units", "activation", "recurrent_activation", "use_bias", "return_sequences",
                        "return_state", "go_backwards", "stateful", "unroll", "dropout", "recurrent_dropout"})
#: The constructor arguments each translator reads, beyond those every layer shares (its name, ``trainable``, dtype
#: policy, initializers, regularizers and constraints: see :mod:`toolkit.nn.keras_import`). Shape arguments
#: (``units``, ``filters``, ``kernel_size``, ``num_heads``, ...) are read from the weights' shapes.
OPTIONS: dict[str, frozenset] = {
    "Dense": frozenset({"units", "activation", "use_bias"}),
    "Conv2D": frozenset({"filters", "kernel_size", "strides", "padding", "data_format", "dilation_rate", "groups",
                         "activation", "use_bias"}),
    "MaxPooling2D": _POOLING, "AveragePooling2D": _POOLING,
    "GlobalAveragePooling2D": _GLOBAL, "GlobalMaxPooling2D": _GLOBAL, "GlobalAveragePooling1D": _GLOBAL,
    "Flatten": frozenset(),
    # Dropout's masks are the toolkit's own by design (the module docstring of keras_import), so its seed is not used.
    "Dropout": frozenset({"rate", "noise_shape", "seed"}),
    "BatchNormalization": frozenset({"axis", "momentum", "epsilon", "center", "scale", "synchronized"}),
    "LayerNormalization": frozenset({"axis", "epsilon", "center", "scale", "rms_scaling"}),
    "Embedding": frozenset({"input_dim", "output_dim", "mask_zero"}),
    "LSTM": _RECURRENT, "GRU": _RECURRENT | {"reset_after"},
    "Activation": frozenset({"activation"}), "ReLU": frozenset({"max_value", "negative_slope", "threshold"}),
    **{name: frozenset() for name in ("Add", "Subtract", "Multiply", "Maximum", "Minimum", "Average")},
    "Concatenate": frozenset({"axis"}),
    "MultiHeadAttention": frozenset({"num_heads", "key_dim", "value_dim", "dropout", "use_bias", "use_gate",
                                     "output_shape", "attention_axes", "sliding_window"}),
}
