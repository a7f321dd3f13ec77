"""How :func:`toolkit.from_keras` translates Keras' ``UnitNormalization``, ``GroupNormalization`` and
``Normalization`` (adapted, or given its mean and variance), each as Keras' own ``call`` computes it. Registered by
:mod:`toolkit.keras.layers`; ``BatchNormalization`` and ``LayerNormalization`` are there.
"""

from __future__ import annotations

import numpy as np

from toolkit.keras.translation import layer_weights, require
from toolkit.nn.model import State

#: Keras' ``UnitNormalization`` divides by ``max(norm, UNIT_NORM_EPSILON)`` (its ``call`` passes 1e-12).
UNIT_NORM_EPSILON = 1e-12


def _unit_normalization(layer, shape):
    axis = tuple(layer.axis) if isinstance(layer.axis, (list, tuple)) else layer.axis
    return {}, lambda ops, p, x, mask: (ops.normalize(x, axis=axis, order=2, epsilon=UNIT_NORM_EPSILON), mask)


def _group_normalization(layer, shape):
    """Keras' ``GroupNormalization(groups, axis, epsilon, center, scale)``: the channels of ``axis`` in ``groups``
    groups, each example's group normalised by its own mean and variance, then scaled by ``gamma`` and shifted by
    ``beta`` per channel (Keras' order of operations)."""
    weights, prefix, groups, epsilon = layer_weights(layer), layer.name, layer.groups, float(layer.epsilon)
    rank = len(shape)
    axis = layer.axis % rank
    grouped = [*shape[1:axis], groups, shape[axis] // groups, *shape[axis + 1:]]
    reduce = tuple(a for a in range(1, rank + 1) if a != axis)  # every axis of an example but the group's
    broadcast = [1] * (rank + 1)
    broadcast[axis], broadcast[axis + 1] = groups, shape[axis] // groups
    gamma, beta = f"{prefix}/gamma" if layer.scale else None, f"{prefix}/beta" if layer.center else None

    def step(ops, p, x, mask):
        g = ops.reshape(x, (-1, *grouped))
        mean, variance = ops.moments(g, axes=reduce, keepdims=True)
        inv = 1.0 / ops.sqrt(variance + epsilon)
        if gamma is not None:
            inv = inv * ops.reshape(p[gamma], broadcast)
        shift = -mean * inv
        if beta is not None:
            shift = shift + ops.reshape(p[beta], broadcast)
        return ops.reshape(g * inv + shift, (-1, *shape[1:])), mask

    return weights, step


def _normalization(layer, shape):
    """Keras' ``Normalization(axis, mean, variance, invert)``: ``(x - mean) / max(sqrt(variance), epsilon)``, or
    ``mean + x * max(sqrt(variance), epsilon)`` inverted, ``epsilon`` Keras' ``backend.epsilon()``. An adapted layer's
    mean, variance and count are model state (nothing trains them; ``to_keras`` writes them back); a mean and
    variance given to the constructor are constants, as in Keras."""
    import keras

    require(layer, layer.built and layer.mean is not None, "a layer neither adapted nor given mean and variance")
    epsilon, invert, prefix = float(keras.config.epsilon()), bool(layer.invert), layer.name
    broadcast = tuple(layer._broadcast_shape)
    if layer.input_mean is None:
        weights = {k: State(v) for k, v in layer_weights(layer).items()}
        names = (f"{prefix}/mean", f"{prefix}/variance")
        require(layer, set(names) <= set(weights), f"weights other than {names}")
        constants = None
    else:
        weights, names = {}, None
        constants = (np.asarray(layer.mean, dtype=float), np.asarray(layer.variance, dtype=float))

    def step(ops, p, x, mask):
        if names is not None:
            mean, variance = (ops.reshape(p[n], broadcast) for n in names)
        else:
            mean, variance = constants
        scale = ops.maximum(ops.sqrt(variance), epsilon)
        x = ops.cast(x, ops.dtype)
        return (mean + x * scale if invert else (x - mean) / scale), mask

    return weights, step


#: Keras layer class names and their translators (unary: wrapped by :mod:`toolkit.keras.layers`).
UNARY = {"UnitNormalization": _unit_normalization, "GroupNormalization": _group_normalization,
         "Normalization": _normalization}

#: The constructor arguments each translator reads (see :data:`toolkit.keras.layers.OPTIONS`).
OPTIONS: dict[str, frozenset] = {
    "UnitNormalization": frozenset({"axis"}),
    "GroupNormalization": frozenset({"groups", "axis", "epsilon", "center", "scale"}),
    "Normalization": frozenset({"axis", "mean", "variance", "invert"}),
}
