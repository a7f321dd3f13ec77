"""Initialisers and the core layers: dense, embedding, flatten.

Each layer is an ``*_init(rng, ...)`` returning a dict of NumPy arrays (Keras' default initialisers and Keras'
parameter shapes, so weights move between Keras and the toolkit unchanged) and a function ``layer(ops, params, x)``
written with :class:`~toolkit.nn.ops.Ops`. Parameter dicts are flat; ``prefix`` keeps several layers' names apart.
"""

from __future__ import annotations

import numpy as np

#: Keras' Embedding initialiser: uniform in this range.
EMBEDDING_INIT_RANGE = 0.05


def fans(shape: tuple[int, ...]) -> tuple[int, int]:
    """Fan-in and fan-out of a kernel as Keras counts them: the last two axes, times the product of the others (a
    convolution's window; for a multi-head attention kernel ``(model, heads, depth)``, the model width)."""
    receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    return (shape[-2] * receptive, shape[-1] * receptive) if len(shape) > 1 else (shape[0], shape[0])


def glorot_uniform(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int | None = None,
                   fan_out: int | None = None) -> np.ndarray:
    """Keras' default kernel initialiser: uniform in ``±sqrt(6 / (fan_in + fan_out))``, fans from :func:`fans`
    unless given."""
    default_in, default_out = fans(shape)
    limit = np.sqrt(6.0 / ((fan_in or default_in) + (fan_out or default_out)))
    return rng.uniform(-limit, limit, size=shape)


def orthogonal(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """Keras' recurrent initialiser: a random orthogonal matrix (QR of a Gaussian, signs fixed)."""
    a = rng.normal(size=(max(rows, cols), min(rows, cols)))
    q, r = np.linalg.qr(a)
    q = q * np.sign(np.diag(r))
    return q if rows >= cols else q.T


def activate(ops, y, activation: str | None):
    """``activation`` names an op (``"relu"``, ``"gelu"``, ...) or is None (linear)."""
    return getattr(ops, activation)(y) if activation else y


# --- dense --------------------------------------------------------------------------------------------------------

def dense_init(rng: np.random.Generator, inputs: int, units: int, prefix: str = "dense") -> dict[str, np.ndarray]:
    return {f"{prefix}/kernel": glorot_uniform(rng, (inputs, units)), f"{prefix}/bias": np.zeros(units)}


def dense(ops, params, x, prefix: str = "dense", activation: str | None = None):
    """``activation(x @ kernel + bias)`` over the last axis (Keras ``Dense``, any number of leading axes)."""
    return activate(ops, ops.matmul(x, params[f"{prefix}/kernel"]) + params[f"{prefix}/bias"], activation)


# --- embedding ----------------------------------------------------------------------------------------------------

def embedding_init(rng: np.random.Generator, input_dim: int, output_dim: int,
                   prefix: str = "embedding") -> dict[str, np.ndarray]:
    """Keras ``Embedding``: one row of ``output_dim`` per id, uniform in ``±0.05``."""
    return {f"{prefix}/embeddings": rng.uniform(-EMBEDDING_INIT_RANGE, EMBEDDING_INIT_RANGE,
                                                size=(input_dim, output_dim))}


def embedding(ops, params, ids, prefix: str = "embedding"):
    """The rows of the table at integer ``ids`` (any shape): ``[..., output_dim]``; the gradient adds into the
    rows looked up (``ops.take``)."""
    return ops.take(params[f"{prefix}/embeddings"], ids, axis=0)


# --- shapes -------------------------------------------------------------------------------------------------------

def flatten(ops, x):
    """Every axis but the batch axis in one (Keras ``Flatten``, channels last)."""
    size = int(np.prod(ops.shape(x)[1:]))
    return ops.reshape(x, (-1, size))
