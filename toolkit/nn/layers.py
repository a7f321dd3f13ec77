"""Layers written once with :class:`toolkit.nn.ops.Ops`: the same arithmetic on every backend.

Each layer is an ``*_init(rng, ...)`` returning a dict of NumPy arrays (Keras' default initialisers) and a function
``layer(ops, params, x)``. Parameter dicts are flat; ``prefix`` keeps the names of several layers apart.
"""

from __future__ import annotations

import numpy as np


def glorot_uniform(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int, fan_out: int) -> np.ndarray:
    """Keras' default kernel initialiser: uniform in ``±sqrt(6 / (fan_in + fan_out))``."""
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, size=shape)


def orthogonal(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """Keras' recurrent initialiser: a random orthogonal matrix (QR of a Gaussian, signs fixed)."""
    a = rng.normal(size=(max(rows, cols), min(rows, cols)))
    q, r = np.linalg.qr(a)
    q = q * np.sign(np.diag(r))
    return q if rows >= cols else q.T


# --- dense --------------------------------------------------------------------------------------------------------

def dense_init(rng: np.random.Generator, inputs: int, units: int, prefix: str = "dense") -> dict[str, np.ndarray]:
    return {f"{prefix}/kernel": glorot_uniform(rng, (inputs, units), inputs, units), f"{prefix}/bias": np.zeros(units)}


def dense(ops, params, x, prefix: str = "dense", activation: str | None = None):
    """``activation(x @ kernel + bias)``; ``activation`` names an op (``"relu"``, ``"tanh"``, ...) or is None."""
    y = ops.matmul(x, params[f"{prefix}/kernel"]) + params[f"{prefix}/bias"]
    return getattr(ops, activation)(y) if activation else y


# --- convolution --------------------------------------------------------------------------------------------------

def conv2d_init(rng: np.random.Generator, in_channels: int, filters: int, kernel: int,
                prefix: str = "conv") -> dict[str, np.ndarray]:
    fan_in, fan_out = kernel * kernel * in_channels, kernel * kernel * filters
    return {f"{prefix}/kernel": glorot_uniform(rng, (kernel, kernel, in_channels, filters), fan_in, fan_out),
            f"{prefix}/bias": np.zeros(filters)}


def conv2d(ops, params, x, prefix: str = "conv", padding: str = "valid", activation: str | None = None):
    """NHWC convolution, stride 1, plus bias and an optional activation (Keras ``Conv2D``)."""
    y = ops.conv2d(x, params[f"{prefix}/kernel"], padding=padding) + params[f"{prefix}/bias"]
    return getattr(ops, activation)(y) if activation else y


def global_max_pool2d(ops, x):
    """``[batch, height, width, channels] -> [batch, channels]`` (Keras ``GlobalMaxPooling2D``)."""
    return ops.max(x, axis=(1, 2))


# --- LSTM ---------------------------------------------------------------------------------------------------------

def lstm_init(rng: np.random.Generator, inputs: int, units: int, prefix: str = "lstm") -> dict[str, np.ndarray]:
    """Keras' LSTM initialisation: Glorot-uniform input kernel, orthogonal recurrent kernel, zero bias except 1 for
    the forget gate (``unit_forget_bias``). Gates are packed in the order input, forget, cell, output."""
    bias = np.zeros(4 * units)
    bias[units:2 * units] = 1.0
    return {f"{prefix}/kernel": glorot_uniform(rng, (inputs, 4 * units), inputs, 4 * units),
            f"{prefix}/recurrent": orthogonal(rng, units, 4 * units),
            f"{prefix}/bias": bias}


def lstm(ops, params, x, steps: int, units: int, prefix: str = "lstm"):
    """An LSTM over ``steps`` time steps of ``x`` (``[batch, time, features]``); returns the last hidden state.

    The standard equations (Hochreiter and Schmidhuber; as Keras' ``LSTM`` with its default activations)::

        z_t = x_t W + h_{t-1} U + b            split into four blocks of ``units`` columns
        i_t = sigmoid(z_i)   f_t = sigmoid(z_f)   g_t = tanh(z_g)   o_t = sigmoid(z_o)
        c_t = f_t * c_{t-1} + i_t * g_t
        h_t = o_t * tanh(c_t)                  with h_0 = c_0 = 0

    ``steps`` (the sequence length) and ``units`` are fixed by the model: the loop is unrolled into the graph.
    """
    kernel, recurrent, bias = (params[f"{prefix}/{k}"] for k in ("kernel", "recurrent", "bias"))
    h = c = None
    for t in range(steps):
        z = ops.matmul(x[:, t, :], kernel) + bias
        if h is None:
            h = c = ops.zeros_like(z[:, :units])
        z = z + ops.matmul(h, recurrent)
        i, f = ops.sigmoid(z[:, :units]), ops.sigmoid(z[:, units:2 * units])
        g, o = ops.tanh(z[:, 2 * units:3 * units]), ops.sigmoid(z[:, 3 * units:])
        c = f * c + i * g
        h = o * ops.tanh(c)
    return h

