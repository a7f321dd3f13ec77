"""Normalization layers: layer normalization (Keras ``LayerNormalization``) and batch normalization (Keras
``BatchNormalization``, with moving statistics kept as model state)."""

from __future__ import annotations

import numpy as np

from toolkit.nn.model import State
from toolkit.ops.training import record_layer

#: Keras' LayerNormalization and BatchNormalization epsilon.
LAYER_NORM_EPSILON = 1e-3
BATCH_NORM_EPSILON = 1e-3
#: Keras' BatchNormalization momentum: the moving statistics keep this share of their value at each step.
BATCH_NORM_MOMENTUM = 0.99


def layer_norm_init(rng: np.random.Generator, features: int, prefix: str = "layer_norm") -> dict[str, np.ndarray]:
    """Keras ``LayerNormalization``'s weights over the last axis: ``gamma`` ones, ``beta`` zeros.

    Args:
        rng: unused (nothing is random); taken so that every ``*_init`` is called alike.
        features: the size of the normalized (last) axis.
        prefix: the layer's name in the flat parameter dict.

    Returns:
        ``{f"{prefix}/gamma": [features], f"{prefix}/beta": [features]}``, float64 NumPy arrays.
    """
    return {f"{prefix}/gamma": np.ones(features), f"{prefix}/beta": np.zeros(features)}


def layer_norm(ops, params, x, prefix: str = "layer_norm", epsilon: float = LAYER_NORM_EPSILON):
    """Normalise each example over its last axis, then scale and shift::

        mean, var = moments(x, axes=-1)
        y = (x - mean) / sqrt(var + epsilon) * gamma + beta

    Args:
        ops: the :class:`~toolkit.ops.Ops` running the model.
        params: the model's parameters, holding :func:`layer_norm_init`'s names for ``prefix``.
        x: ``[..., features]``.
        prefix: the layer's name given to :func:`layer_norm_init`.
        epsilon: added to the variance (Keras' default, :data:`LAYER_NORM_EPSILON`).

    Returns:
        A tensor of ``x``'s shape, recorded as ``prefix`` (``ops.record``).
    """
    mean, variance = ops.moments(x, axes=-1, keepdims=True)
    return record_layer(ops, prefix, (x - mean) / ops.sqrt(variance + epsilon) * params[f"{prefix}/gamma"] +
                        params[f"{prefix}/beta"])


def batch_norm_init(rng: np.random.Generator, features: int, prefix: str = "batch_norm") -> dict:
    """Keras ``BatchNormalization``'s weights over the last axis: ``gamma`` ones and ``beta`` zeros (parameters),
    ``moving_mean`` zeros and ``moving_variance`` ones (model state, :class:`~toolkit.State`).

    Args:
        rng: unused (nothing is random); taken so that every ``*_init`` is called alike.
        features: the size of the normalized (last) axis.
        prefix: the layer's name in the flat parameter dict.

    Returns:
        The four arrays by ``f"{prefix}/gamma"`` and the like, each ``[features]``; the moving statistics wrapped
        in :class:`~toolkit.State`.
    """
    return {f"{prefix}/gamma": np.ones(features), f"{prefix}/beta": np.zeros(features),
            f"{prefix}/moving_mean": State(np.zeros(features)), f"{prefix}/moving_variance": State(np.ones(features))}


def batch_norm(ops, params, x, prefix: str = "batch_norm", momentum: float = BATCH_NORM_MOMENTUM,
               epsilon: float = BATCH_NORM_EPSILON, synchronized: bool = False):
    """Normalise each feature (the last axis) over every other axis, then scale and shift::

        training:   mean, var = moments(x, axes=all but the last)            (the batch's, biased variance)
                    moving_mean     <- moving_mean * momentum + mean * (1 - momentum)
                    moving_variance <- moving_variance * momentum + var * (1 - momentum)
        inference:  mean, var = moving_mean, moving_variance
        y = (x - mean) / sqrt(var + epsilon) * gamma + beta

    Under data parallelism the statistics are by default each replica's (what ``MirroredStrategy`` gives without
    ``synchronized=True``); the trainer then averages the replicas' new moving statistics, weighted by their share of
    the batch. With ``synchronized=True`` (Keras' ``BatchNormalization(synchronized=True)``) they are the whole
    global batch's, whatever the device count and split (``ops.moments(..., synchronized=True)``: two cross-replica
    sums), so N devices train as one. With one device both are Keras' ``BatchNormalization``.

    Args:
        ops: the :class:`~toolkit.ops.Ops` running the model; ``ops.training`` chooses the batch's or the moving
            statistics.
        params: the model's parameters and state, holding :func:`batch_norm_init`'s names for ``prefix``.
        x: ``[..., features]``.
        prefix: the layer's name given to :func:`batch_norm_init`.
        momentum: the share of the moving statistics kept at each training step (:data:`BATCH_NORM_MOMENTUM`).
        epsilon: added to the variance (:data:`BATCH_NORM_EPSILON`).
        synchronized: the whole global batch's statistics under data parallelism, instead of each replica's.

    Returns:
        A tensor of ``x``'s shape, recorded as ``prefix`` (``ops.record``). In training the new moving statistics
        are given to ``ops.update_state``.
    """
    gamma, beta = params[f"{prefix}/gamma"], params[f"{prefix}/beta"]
    moving_mean, moving_variance = params[f"{prefix}/moving_mean"], params[f"{prefix}/moving_variance"]
    if ops.training:
        axes = tuple(range(len(ops.shape(x)) - 1))
        mean, variance = ops.moments(x, axes=axes, synchronized=synchronized)
        ops.update_state(f"{prefix}/moving_mean", moving_mean * momentum + mean * (1.0 - momentum))
        ops.update_state(f"{prefix}/moving_variance", moving_variance * momentum + variance * (1.0 - momentum))
    else:
        mean, variance = moving_mean, moving_variance
    return record_layer(ops, prefix, (x - mean) / ops.sqrt(variance + epsilon) * gamma + beta)
