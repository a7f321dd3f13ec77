"""The building blocks of :func:`toolkit.from_keras`' layer translators (:mod:`toolkit.keras.layers` and the
``layers_*`` modules): how a call of a Keras layer reaches its translator (:class:`Call`), what ``forward``
passes between layers (:class:`Flow`), the wrapper of one-input layers (:func:`unary`), and refusals naming the
layer (:func:`require`).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

from toolkit.errors import KerasImportError
from toolkit.keras import activations as keras_activations


class Flow(NamedTuple):
    """A tensor of the imported graph as ``forward`` computes it: its value and its Keras mask (None: no mask)."""

    value: Any
    mask: Any


class Slot(NamedTuple):
    """Where a Keras node's call reads a tensor of the program: its number."""

    index: int


class MaskOf(NamedTuple):
    """Where a Keras node's call reads the Keras mask of a tensor of the program (Keras passes it as ``mask=``)."""

    index: int


class Call(NamedTuple):
    """One call of a Keras layer in the model's graph: the layer, its (first) input's shape, its arguments bound by
    name to the layer's ``call`` signature (tensors as :class:`Slot`), and whether Keras gave any input a mask.
    Its output is the program's next tensor.

    A translator takes a ``Call`` and returns the layer's weights (by toolkit name, in Keras' order) and
    ``apply(ops, params, arguments) -> Flow``, which ``forward`` calls with the arguments' tensors as
    :class:`Flow`."""

    layer: Any
    shape: tuple
    arguments: dict
    masked: bool = False


def activation_of(layer, activation: Any = "from the layer"):
    """``(ops, x) -> y`` for the layer's ``activation`` (or the one given): see
    :mod:`toolkit.keras.activations`."""
    return keras_activations.resolve(layer, getattr(layer, "activation", None) if activation == "from the layer"
                                     else activation)


def activate(ops, y, activation):
    return activation(ops, y)


def require(layer, condition: bool, what: str) -> None:
    if not condition:
        raise KerasImportError(f"layer {layer.name!r} ({type(layer).__name__}): {what} is not supported")


def layer_weights(layer) -> dict:
    """The layer's weights by toolkit name (``<layer name>/<Keras variable name>``), in Keras' order."""
    return {f"{layer.name}/{variable.name}": variable.numpy() for variable in layer.weights}


def masks_and(ops, masks):
    """Attention's rule where masks meet: a position stays where every mask keeps it (None: no mask at all)."""
    masks = [m for m in masks if m is not None]
    return functools.reduce(ops.logical_and, masks) if masks else None


def unary(translate):
    """A translator for a layer called on one tensor: its first ``call`` argument, and an optional explicit
    ``mask``. Keras passes a mask on only through layers that support masking. ``training`` is not read: the
    trainer sets the mode (training steps, or inference for predict and evaluate).

    ``translate(layer, input shape) -> (weights, step(ops, params, x, mask) -> (y, mask))``."""

    def translator(call: Call):
        layer, (first, *rest) = call.layer, call.arguments
        extra = [name for name in rest if name not in ("mask", "training")]
        require(layer, not extra and isinstance(call.arguments[first], Slot),
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
