"""Recurrent layers: an LSTM (Keras ``LSTM``'s gates, initialisation and equations)."""

from __future__ import annotations

import numpy as np

from toolkit.nn.layers.core import glorot_uniform, orthogonal


def lstm_init(rng: np.random.Generator, inputs: int, units: int, prefix: str = "lstm") -> dict[str, np.ndarray]:
    """Keras' LSTM initialisation: Glorot-uniform input kernel, orthogonal recurrent kernel, zero bias except 1 for
    the forget gate (``unit_forget_bias``). Gates are packed in the order input, forget, cell, output."""
    bias = np.zeros(4 * units)
    bias[units:2 * units] = 1.0
    return {f"{prefix}/kernel": glorot_uniform(rng, (inputs, 4 * units)),
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

