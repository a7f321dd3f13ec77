"""The building blocks of :func:`toolkit.from_keras`' layer translators (:mod:`toolkit.nn.keras_layers` and the
``keras_layers_*`` modules): how a call of a Keras layer reaches its translator (:class:`_Call`), what ``forward``
passes between layers (:class:`Flow`), the wrapper of one-input layers (:func:`_unary`), and refusals naming the
layer (:func:`_require`).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

from toolkit.errors import KerasImportError
from toolkit.nn import keras_activations


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


def _activation(layer, activation: Any = "from the layer"):
    """``(ops, x) -> y`` for the layer's ``activation`` (or the one given): see
    :mod:`toolkit.nn.keras_activations`."""
    return keras_activations.resolve(layer, getattr(layer, "activation", None) if activation == "from the layer"
                                     else activation)


def _activate(ops, y, activation):
    return activation(ops, y)


def _require(layer, condition: bool, what: str) -> None:
    if not condition:
        raise KerasImportError(f"layer {layer.name!r} ({type(layer).__name__}): {what} is not supported")


def _weights(layer) -> dict:
    """The layer's weights by toolkit name (``<layer name>/<Keras variable name>``), in Keras' order."""
    return {f"{layer.name}/{variable.name}": variable.numpy() for variable in layer.weights}


def _and(ops, masks):
    """Attention's rule where masks meet: a position stays where every mask keeps it (None: no mask at all)."""
    masks = [m for m in masks if m is not None]
    return functools.reduce(ops.logical_and, masks) if masks else None


def _unary(translate):
    """A translator for a layer called on one tensor: its first ``call`` argument, and an optional explicit
    ``mask``. Keras passes a mask on only through layers that support masking. ``training`` is not read: the
    trainer sets the mode (training steps, or inference for predict and evaluate).

    ``translate(layer, input shape) -> (weights, step(ops, params, x, mask) -> (y, mask))``."""

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
