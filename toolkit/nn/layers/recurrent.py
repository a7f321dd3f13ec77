"""Recurrent layers: an LSTM and a GRU (Keras ``LSTM`` and ``GRU``: their gates, initialisation, equations and
masking rule)."""

from __future__ import annotations

import numpy as np

from toolkit.nn.layers.core import glorot_uniform, orthogonal
from toolkit.ops.training import record_layer


def lstm_init(rng: np.random.Generator, inputs: int, units: int, prefix: str = "lstm") -> dict[str, np.ndarray]:
    """Keras' LSTM initialisation: Glorot-uniform input kernel, orthogonal recurrent kernel, zero bias except 1 for
    the forget gate (``unit_forget_bias``). Gates are packed in the order input, forget, cell, output.

    Args:
        rng: the NumPy generator drawn from.
        inputs: the size of each step's input (the last axis of ``x``).
        units: the size of the hidden and cell states.
        prefix: the layer's name in the flat parameter dict.

    Returns:
        ``{f"{prefix}/kernel": [inputs, 4 units], f"{prefix}/recurrent": [units, 4 units], f"{prefix}/bias":
        [4 units]}``, float64 NumPy arrays.
    """
    bias = np.zeros(4 * units)
    bias[units:2 * units] = 1.0
    return {f"{prefix}/kernel": glorot_uniform(rng, (inputs, 4 * units)),
            f"{prefix}/recurrent": orthogonal(rng, units, 4 * units),
            f"{prefix}/bias": bias}


def _time_major(ops, x, kernel, bias, mask):
    """What the loop scans: ``x W + b`` for every step at once (``[time, batch, gates]``: one large matmul instead of
    one per step), with the mask as ``[time, batch, 1]`` floats (None without a mask)."""
    inputs = ops.transpose(ops.matmul(x, kernel) + bias, (1, 0, 2))
    keep = None if mask is None else ops.expand_dims(ops.transpose(ops.cast(mask, ops.dtype)), -1)
    return inputs, keep


def _carry(old, new, keep):
    """Keras' masking rule for one step: the new state where the step is not masked, the old one where it is.
    Written ``old + keep * (new - old)``: the form ``keep * new + (1 - keep) * old`` made Aesara's rewrites blow up
    on long unrolled loops (measured: 24 s to compile 8 steps, past 15 minutes at 20; this form took 4.8 s at 8)."""
    return new if keep is None else old + keep * (new - old)


def lstm(ops, params, x, steps: int | None, units: int, prefix: str = "lstm", mask=None, unroll: bool = False):
    """An LSTM over ``steps`` time steps of ``x`` (``[batch, time, features]``); returns the last hidden state.

    The standard equations (Hochreiter and Schmidhuber; as Keras' ``LSTM`` with its default activations)::

        z_t = x_t W + h_{t-1} U + b            split into four blocks of ``units`` columns
        i_t = sigmoid(z_i)   f_t = sigmoid(z_f)   g_t = tanh(z_g)   o_t = sigmoid(z_o)
        c_t = f_t * c_{t-1} + i_t * g_t
        h_t = o_t * tanh(c_t)                  with h_0 = c_0 = 0

    ``mask`` (``[batch, time]``, booleans or 0/1; for example ``ids != 0`` for Keras' ``Embedding(mask_zero=True)``)
    skips steps as Keras does: at a masked step ``h`` and ``c`` carry over unchanged, so the result is the state
    after each sequence's last unmasked step. ``steps`` and ``units`` are fixed by the model. The time loop is one
    :meth:`~toolkit.ops.Ops.scan` (compile time does not grow with ``steps``); ``unroll=True`` (Keras' argument)
    unrolls it, which on TensorFlow makes short sequences' steps faster and tracing grow with ``steps``.

    Args:
        ops: the :class:`~toolkit.ops.Ops` running the model.
        params: the model's parameters, holding :func:`lstm_init`'s names for ``prefix``.
        x: ``[batch, time, inputs]`` with ``time >= steps``; only the first ``steps`` are read.
        steps: the number of time steps run (None: every step of ``x``, whatever its length).
        units: the hidden size given to :func:`lstm_init`.
        prefix: the layer's name given to :func:`lstm_init`.
        mask: ``[batch, time]`` booleans or 0/1, true where a step counts (None: every step).
        unroll: unroll the time loop instead of one scan.

    Returns:
        The last hidden state ``h``, ``[batch, units]``, recorded as ``prefix`` (``ops.record``).
    """
    kernel, recurrent, bias = (params[f"{prefix}/{k}"] for k in ("kernel", "recurrent", "bias"))
    inputs, keep = _time_major(ops, x[:, :steps, :], kernel, bias, mask if mask is None else mask[:, :steps])

    def step(state, xs):
        (h, c), (z, keep) = state, xs
        z = z + ops.matmul(h, recurrent)
        i, f = ops.sigmoid(z[:, :units]), ops.sigmoid(z[:, units:2 * units])
        g, o = ops.tanh(z[:, 2 * units:3 * units]), ops.sigmoid(z[:, 3 * units:])
        new_c = f * c + i * g
        return (_carry(h, o * ops.tanh(new_c), keep), _carry(c, new_c, keep)), None

    zeros = ops.zeros_like(inputs[0, :, :units])
    (h, _), _ = ops.scan(step, (zeros, zeros), (inputs, keep), unroll=unroll)
    return record_layer(ops, prefix, h)


def gru_init(rng: np.random.Generator, inputs: int, units: int, prefix: str = "gru") -> dict[str, np.ndarray]:
    """Keras' GRU initialisation (``reset_after=True``, its default): Glorot-uniform input kernel, orthogonal
    recurrent kernel, zero biases ``[2, 3 * units]`` (input bias, recurrent bias). Gates in the order update, reset,
    candidate.

    Args:
        rng: the NumPy generator drawn from.
        inputs: the size of each step's input (the last axis of ``x``).
        units: the size of the hidden state.
        prefix: the layer's name in the flat parameter dict.

    Returns:
        ``{f"{prefix}/kernel": [inputs, 3 units], f"{prefix}/recurrent": [units, 3 units], f"{prefix}/bias": [2,
        3 units]}``, float64 NumPy arrays.
    """
    return {f"{prefix}/kernel": glorot_uniform(rng, (inputs, 3 * units)),
            f"{prefix}/recurrent": orthogonal(rng, units, 3 * units),
            f"{prefix}/bias": np.zeros((2, 3 * units))}


def gru(ops, params, x, steps: int | None, units: int, prefix: str = "gru", mask=None, unroll: bool = False):
    """A GRU over ``steps`` time steps of ``x`` (``[batch, time, features]``); returns the last hidden state.

    Keras' ``GRU`` with ``reset_after=True`` (Cho et al., the cuDNN variant)::

        a_t = x_t W + b_in                     split into update, reset, candidate blocks
        r_t' = h_{t-1} U + b_rec               split the same way
        z_t = sigmoid(a_z + r'_z)   r_t = sigmoid(a_r + r'_r)
        n_t = tanh(a_n + r_t * r'_n)
        h_t = z_t * h_{t-1} + (1 - z_t) * n_t  with h_0 = 0

    Args:
        ops: the :class:`~toolkit.ops.Ops` running the model.
        params: the model's parameters, holding :func:`gru_init`'s names for ``prefix``.
        x: ``[batch, time, inputs]`` with ``time >= steps``; only the first ``steps`` are read.
        steps: the number of time steps run (None: every step of ``x``, whatever its length).
        units: the hidden size given to :func:`gru_init`.
        prefix: the layer's name given to :func:`gru_init`.
        mask: ``[batch, time]`` booleans or 0/1, true where a step counts (None: every step); a masked step keeps
            ``h``, as in :func:`lstm`.
        unroll: unroll the time loop instead of one scan.

    Returns:
        The last hidden state ``h``, ``[batch, units]``, recorded as ``prefix`` (``ops.record``).
    """
    kernel, recurrent, bias = (params[f"{prefix}/{k}"] for k in ("kernel", "recurrent", "bias"))
    inputs, keep = _time_major(ops, x[:, :steps, :], kernel, bias[0], mask if mask is None else mask[:, :steps])

    def step(h, xs):
        a, keep = xs
        r_in = ops.matmul(h, recurrent) + bias[1]
        z = ops.sigmoid(a[:, :units] + r_in[:, :units])
        r = ops.sigmoid(a[:, units:2 * units] + r_in[:, units:2 * units])
        n = ops.tanh(a[:, 2 * units:] + r * r_in[:, 2 * units:])
        return _carry(h, z * h + (1.0 - z) * n, keep), None

    h, _ = ops.scan(step, ops.zeros_like(inputs[0, :, :units]), (inputs, keep), unroll=unroll)
    return record_layer(ops, prefix, h)
