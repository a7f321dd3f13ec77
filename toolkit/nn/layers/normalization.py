"""Normalization layers that keep no state: layer normalization (Keras ``LayerNormalization``)."""

from __future__ import annotations

import numpy as np

#: Keras' LayerNormalization epsilon.
LAYER_NORM_EPSILON = 1e-3


def layer_norm_init(rng: np.random.Generator, features: int, prefix: str = "layer_norm") -> dict[str, np.ndarray]:
    """Keras ``LayerNormalization``'s weights over the last axis: ``gamma`` ones, ``beta`` zeros (``rng`` is unused:
    nothing is random)."""
    return {f"{prefix}/gamma": np.ones(features), f"{prefix}/beta": np.zeros(features)}


def layer_norm(ops, params, x, prefix: str = "layer_norm", epsilon: float = LAYER_NORM_EPSILON):
    """Normalise each example over its last axis, then scale and shift::

        mean, var = moments(x, axes=-1)
        y = (x - mean) / sqrt(var + epsilon) * gamma + beta
    """
    mean, variance = ops.moments(x, axes=-1, keepdims=True)
    return (x - mean) / ops.sqrt(variance + epsilon) * params[f"{prefix}/gamma"] + params[f"{prefix}/beta"]
