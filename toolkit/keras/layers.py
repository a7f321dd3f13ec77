"""How :func:`toolkit.from_keras` translates each Keras layer: :data:`SUPPORTED` maps a Keras layer class name to its
translator, and :data:`OPTIONS` lists the constructor arguments (``layer.get_config()`` keys) each translator reads
and applies (or refuses, with a :class:`~toolkit.KerasImportError` naming the argument). Any other argument given a
value other than its default is refused by the importer (:func:`toolkit.keras.settings.check_config`), so a Keras
argument this module does not know never changes Keras' numbers without changing the toolkit's.

A translator takes one call of a layer in the model's graph (:class:`Call`) and returns the layer's weights (by
toolkit name, in Keras' order: ``<layer name>/<weight>``) and ``apply(ops, params, arguments) -> Flow``. The core
layers are here; the others are in ``layers_conv`` (convolution, pooling, padding, cropping, upsampling),
``layers_shape`` (reshaping, rescaling, ``Dot``), ``layers_activation``, ``layers_noise``,
``layers_normalization``, ``layers_attention`` (``Attention``) and ``layers_recurrent``
(``SimpleRNN``, ``LSTM``, ``GRU``, ``Bidirectional``, ``TimeDistributed``), each with its own ``OPTIONS``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from toolkit.keras import (
    layers_activation,
    layers_attention,
    layers_conv,
    layers_noise,
    layers_normalization,
    layers_recurrent,
    layers_shape,
)
from toolkit.keras.translation import Call, Flow, Slot, activate, activation_of, masks_and, require, unary
from toolkit.nn import layers
from toolkit.nn.model import State


# --- one-input layers: (layer, input shape) -> (weights, (ops, params, x, mask) -> (y, mask)) -----------------------
def _dense(layer, shape):
    activation, prefix = activation_of(layer), layer.name
    if not layer.use_bias:  # Keras' Dense(use_bias=False) has its kernel alone
        (kernel,) = layer.get_weights()
        return {f"{prefix}/kernel": kernel}, \
            lambda ops, p, x, mask: (activate(ops, ops.matmul(x, p[f"{prefix}/kernel"]), activation), mask)
    kernel, bias = layer.get_weights()
    return {f"{prefix}/kernel": kernel, f"{prefix}/bias": bias}, \
        lambda ops, p, x, mask: (activate(ops, layers.dense(ops, p, x, prefix), activation), mask)


def _last_axis(layer, axis, shape) -> None:
    axis = list(np.atleast_1d(axis))
    require(layer, axis in ([-1], [len(shape) - 1]), f"axis={layer.axis!r} (only the last axis)")


def _batch_norm(layer, shape):
    """Keras 3's ``BatchNormalization``; one with ``trainable = False`` (set on it or on a model holding it) runs in
    inference mode in training too: its moving statistics normalise, and nothing updates them."""
    _last_axis(layer, layer.axis, shape)
    require(layer, layer.center and layer.scale, "center=False or scale=False")
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
    require(layer, layer.center and layer.scale and not getattr(layer, "rms_scaling", False),
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


def _dropout(layer, shape):
    rate, noise_shape = layer.rate, layer.noise_shape
    return {}, lambda ops, p, x, mask: (layers.dropout(ops, x, rate, noise_shape=noise_shape), mask)


def _flatten(layer, shape):
    return {}, lambda ops, p, x, mask: (layers.flatten(ops, x), mask)


# --- layers of several tensors: (layer, input shape, call) -> (weights, apply) -----------------------------------
def _or(ops, masks):
    """Keras' rule for merged masks: None unless every input has one, then a position stays where any keeps it."""
    return None if any(m is None for m in masks) else functools.reduce(ops.logical_or, masks)


def _merge(combine, masks: bool = True):
    """Keras' merge layers, called on a list of tensors: their values combined in order, their masks ORed
    (``masks=False``: masked inputs refused)."""

    def translator(call: Call):
        layer, inputs = call.layer, call.arguments.get("inputs")
        require(layer, set(call.arguments) <= {"inputs", "training", "mask"} and isinstance(inputs, (list, tuple))
                 and all(isinstance(i, Slot) for i in inputs), "calling it on anything but a list of tensors")
        require(layer, masks or not call.masked, "masked inputs (a Keras mask reaching it)")
        axis = getattr(layer, "axis", None)

        def apply(ops, p, args):
            flows = args["inputs"]
            return Flow(combine(ops, [f.value for f in flows], axis), _or(ops, [f.mask for f in flows]))

        return {}, apply

    return translator


def _chain(op):
    return lambda ops, values, axis: functools.reduce(getattr(ops, op), values)


def _attention(c: Call):
    """Keras' ``MultiHeadAttention`` called as ``(query, value, key=None, attention_mask=None,
    use_causal_mask=False)``; the query's, value's and key's Keras masks are ANDed into the attention mask as Keras
    does (query ``[B, T, 1]``, value and key ``[B, 1, S]``), and the output keeps the query's mask. Its ``dropout``
    drops attention probabilities on the trainer's keys, as the toolkit's dropout layers do; without a bias
    (``use_bias=False``) it adds none, as Keras."""
    layer, call = c.layer, c.arguments
    require(layer, getattr(layer, "_output_shape", None) is None, "output_shape")
    require(layer, layer.attention_axes in (None, (1,), [1]), f"attention_axes={layer.attention_axes!r}")
    require(layer, not getattr(layer, "_use_gate", False), "use_gate=True")
    require(layer, getattr(layer, "_sliding_window", None) is None, "sliding_window")
    require(layer, getattr(layer, "_activity_regularizer", None) is None,
             "activity_regularizer (Keras gives it to the query, key, value and output projections inside)")
    extra = set(call) - {"query", "value", "key", "attention_mask", "use_causal_mask", "training",
                         "return_attention_scores"}
    require(layer, not extra and not call.get("return_attention_scores"),
             f"calling it with {sorted(extra) or 'return_attention_scores'}")
    causal = call.get("use_causal_mask", False)
    require(layer, isinstance(causal, bool), "a use_causal_mask that is not a Python bool")
    prefix, rate, biased = layer.name, float(layer.dropout), bool(layer.use_bias)
    parts = ("query", "key", "value", "attention_output")
    names = [f"{prefix}/{part}/{w}" for part in parts for w in (("kernel", "bias") if biased else ("kernel",))]

    def apply(ops, p, args):
        if not biased:  # zeros where Keras adds no bias: the same numbers, in the biases' shapes (a projection's
            # [heads, depth], the output's [query_dim]: the kernels' trailing axes)
            p = {**p, **{f"{prefix}/{part}/bias": ops.zeros_like(p[f"{prefix}/{part}/kernel"][(0, 0) if i == 3 else 0])
                         for i, part in enumerate(parts)}}
        query, value, key = args["query"], args["value"], args.get("key")
        given = args.get("attention_mask")
        auto = masks_and(ops, [None if query.mask is None else ops.expand_dims(query.mask, -1),
                          None if value.mask is None else ops.expand_dims(value.mask, -2),
                          None if key is None or key.mask is None else ops.expand_dims(key.mask, -2),
                          None if given is None else ops.cast(given.value, "bool")])
        y = layers.multi_head_attention(ops, p, query.value, value.value, None if key is None else key.value,
                                        attention_mask=auto, use_causal_mask=causal, prefix=prefix, dropout=rate)
        return Flow(y, query.mask)

    return dict(zip(names, layer.get_weights())), apply


#: Keras layer class names and how each is translated.
SUPPORTED: dict[str, Callable] = {
    **{name: unary(translate) for name, translate in {
        "Dense": _dense, "Flatten": _flatten, "Dropout": _dropout, "BatchNormalization": _batch_norm,
        "LayerNormalization": _layer_norm, "Embedding": _embedding,
        **layers_activation.UNARY, **layers_noise.UNARY, **layers_normalization.UNARY}.items()},
    "Add": _merge(_chain("add")), "Subtract": _merge(lambda ops, values, axis: ops.subtract(*values)),
    "Multiply": _merge(_chain("multiply")), "Maximum": _merge(_chain("maximum")),
    "Minimum": _merge(_chain("minimum")),
    "Average": _merge(lambda ops, values, axis: _chain("add")(ops, values, axis) / float(len(values))),
    "Concatenate": _merge(lambda ops, values, axis: ops.concatenate(values, axis=axis), masks=False),
    "MultiHeadAttention": _attention,
    **layers_conv.LAYERS, **layers_shape.LAYERS, **layers_attention.LAYERS,
    **layers_recurrent.LAYERS,
}

#: The constructor arguments each translator reads, beyond those every layer shares (its name, ``trainable``, dtype
#: policy, initializers, regularizers and constraints: see :mod:`toolkit.keras.importer`). Shape arguments
#: (``units``, ``filters``, ``kernel_size``, ``num_heads``, ...) are read from the weights' shapes.
OPTIONS: dict[str, frozenset] = {
    "Dense": frozenset({"units", "activation", "use_bias"}),
    "Flatten": frozenset(),
    # Dropout's masks are the toolkit's own by design (toolkit.keras.importer's docstring): its seed is not used.
    "Dropout": frozenset({"rate", "noise_shape", "seed"}),
    "BatchNormalization": frozenset({"axis", "momentum", "epsilon", "center", "scale", "synchronized"}),
    "LayerNormalization": frozenset({"axis", "epsilon", "center", "scale", "rms_scaling"}),
    "Embedding": frozenset({"input_dim", "output_dim", "mask_zero"}),
    **{name: frozenset() for name in ("Add", "Subtract", "Multiply", "Maximum", "Minimum", "Average")},
    "Concatenate": frozenset({"axis"}),
    "MultiHeadAttention": frozenset({"num_heads", "key_dim", "value_dim", "dropout", "use_bias", "use_gate",
                                     "output_shape", "attention_axes", "sliding_window"}),
    **layers_conv.OPTIONS, **layers_shape.OPTIONS, **layers_activation.OPTIONS,
    **layers_noise.OPTIONS, **layers_normalization.OPTIONS, **layers_attention.OPTIONS,
    **layers_recurrent.OPTIONS,
}
