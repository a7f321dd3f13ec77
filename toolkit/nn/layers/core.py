"""Initialisers and the core layers: dense, embedding, flatten.

Each layer is an ``*_init(rng, ...)`` returning a dict of NumPy arrays (Keras' default initialisers and Keras'
parameter shapes, so weights move between Keras and the toolkit unchanged) and a function ``layer(ops, params, x)``
written with :class:`~toolkit.ops.Ops`. Parameter dicts are flat; ``prefix`` keeps several layers' names apart.
"""

from __future__ import annotations

import numpy as np

from toolkit.ops.training import record_layer

#: Keras' Embedding initialiser: uniform in this range.
EMBEDDING_INIT_RANGE = 0.05


def fans(shape: tuple[int, ...]) -> tuple[int, int]:
    """Fan-in and fan-out of a kernel as Keras counts them: the last two axes, times the product of the others (a
    convolution's window; for a multi-head attention kernel ``(model, heads, depth)``, the model width).

    Args:
        shape: the kernel's shape; a 1-D shape ``(n,)`` counts ``n`` both ways.

    Returns:
        ``(fan_in, fan_out)`` as ints.
    """
    receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    return (shape[-2] * receptive, shape[-1] * receptive) if len(shape) > 1 else (shape[0], shape[0])


def glorot_uniform(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int | None = None,
                   fan_out: int | None = None) -> np.ndarray:
    """Keras' default kernel initialiser: uniform in ``±sqrt(6 / (fan_in + fan_out))``.

    Args:
        rng: the NumPy generator drawn from.
        shape: the kernel's shape.
        fan_in: overrides the input fan :func:`fans` counts from ``shape`` (None: counted).
        fan_out: overrides the output fan :func:`fans` counts from ``shape`` (None: counted).

    Returns:
        A float64 array of ``shape``.
    """
    default_in, default_out = fans(shape)
    limit = np.sqrt(6.0 / ((fan_in or default_in) + (fan_out or default_out)))
    return rng.uniform(-limit, limit, size=shape)


def orthogonal(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """Keras' recurrent initialiser: a random orthogonal matrix (QR of a Gaussian, signs fixed).

    Args:
        rng: the NumPy generator drawn from.
        rows: the matrix's rows.
        cols: the matrix's columns; the shorter side's vectors are orthonormal.

    Returns:
        A float64 ``[rows, cols]`` array.
    """
    a = rng.normal(size=(max(rows, cols), min(rows, cols)))
    q, r = np.linalg.qr(a)
    q = q * np.sign(np.diag(r))
    return q if rows >= cols else q.T


def activate(ops, y, activation: str | None):
    """``y`` through the activation op named ``activation``.

    Args:
        ops: the :class:`~toolkit.ops.Ops` running the model.
        y: a tensor.
        activation: the name of a one-argument op (``"relu"``, ``"gelu"``, ``"tanh"``, ...), or None for linear.

    Returns:
        ``getattr(ops, activation)(y)``, or ``y`` itself when ``activation`` is None.
    """
    return getattr(ops, activation)(y) if activation else y


# --- dense --------------------------------------------------------------------------------------------------------

def dense_init(rng: np.random.Generator, inputs: int, units: int, prefix: str = "dense") -> dict[str, np.ndarray]:
    """Keras ``Dense``'s weights: a Glorot-uniform ``[inputs, units]`` kernel and a zero bias.

    Args:
        rng: the NumPy generator drawn from.
        inputs: the size of the input's last axis.
        units: the size of the output's last axis.
        prefix: the layer's name in the flat parameter dict.

    Returns:
        ``{f"{prefix}/kernel": [inputs, units], f"{prefix}/bias": [units]}``, float64 NumPy arrays.
    """
    return {f"{prefix}/kernel": glorot_uniform(rng, (inputs, units)), f"{prefix}/bias": np.zeros(units)}


def dense(ops, params, x, prefix: str = "dense", activation: str | None = None):
    """``activation(x @ kernel + bias)`` over the last axis (Keras ``Dense``, any number of leading axes).

    Args:
        ops: the :class:`~toolkit.ops.Ops` running the model.
        params: the model's parameters, holding :func:`dense_init`'s names for ``prefix``.
        x: ``[..., inputs]``.
        prefix: the layer's name given to :func:`dense_init`.
        activation: see :func:`activate` (None: linear).

    Returns:
        ``[..., units]``, recorded as ``prefix`` (``ops.record``).
    """
    return record_layer(ops, prefix, activate(ops, ops.matmul(x, params[f"{prefix}/kernel"]) +
                                              params[f"{prefix}/bias"], activation))


# --- embedding ----------------------------------------------------------------------------------------------------

def embedding_init(rng: np.random.Generator, input_dim: int, output_dim: int,
                   prefix: str = "embedding") -> dict[str, np.ndarray]:
    """Keras ``Embedding``'s table: one row of ``output_dim`` per id, uniform in ``±0.05``.

    Args:
        rng: the NumPy generator drawn from.
        input_dim: the number of ids (the vocabulary size).
        output_dim: the size of each id's vector.
        prefix: the layer's name in the flat parameter dict.

    Returns:
        ``{f"{prefix}/embeddings": [input_dim, output_dim]}``, a float64 NumPy array.
    """
    return {f"{prefix}/embeddings": rng.uniform(-EMBEDDING_INIT_RANGE, EMBEDDING_INIT_RANGE,
                                                size=(input_dim, output_dim))}


def embedding(ops, params, ids, prefix: str = "embedding"):
    """The rows of the table at integer ``ids`` (Keras ``Embedding``); the gradient adds into the rows looked up
    (``ops.take``).

    Args:
        ops: the :class:`~toolkit.ops.Ops` running the model.
        params: the model's parameters, holding :func:`embedding_init`'s table for ``prefix``.
        ids: integer ids in ``[0, input_dim)``, any shape.
        prefix: the layer's name given to :func:`embedding_init`.

    Returns:
        ``[*ids.shape, output_dim]``, recorded as ``prefix`` (``ops.record``).
    """
    return record_layer(ops, prefix, ops.take(params[f"{prefix}/embeddings"], ids, axis=0))


# --- shapes -------------------------------------------------------------------------------------------------------

def flatten(ops, x):
    """Every axis but the batch axis in one (Keras ``Flatten``, channels last).

    Args:
        ops: the :class:`~toolkit.ops.Ops` running the model.
        x: ``[batch, ...]`` with static trailing axes.

    Returns:
        ``[batch, product of the other axes]``.
    """
    size = int(np.prod(ops.shape(x)[1:]))
    return ops.reshape(x, (-1, size))
