"""Convolution and pooling layers, channels last (Keras ``Conv2D``, ``MaxPooling2D``, ``AveragePooling2D`` and the
global poolings)."""

from __future__ import annotations

import numpy as np

from toolkit.nn.layers.core import activate, glorot_uniform
from toolkit.ops.training import record_layer


def conv2d_init(rng: np.random.Generator, in_channels: int, filters: int, kernel: int | tuple[int, int],
                prefix: str = "conv") -> dict[str, np.ndarray]:
    """Keras ``Conv2D``'s weights: a Glorot-uniform ``[kernel_h, kernel_w, in_channels, filters]`` kernel, zero
    bias.

    Args:
        rng: the NumPy generator drawn from.
        in_channels: the input's channels (its last axis).
        filters: the output's channels.
        kernel: the window, ``k`` for ``k x k`` or ``(kernel_h, kernel_w)``.
        prefix: the layer's name in the flat parameter dict.

    Returns:
        ``{f"{prefix}/kernel": [kernel_h, kernel_w, in_channels, filters], f"{prefix}/bias": [filters]}``, float64
        NumPy arrays.
    """
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    return {f"{prefix}/kernel": glorot_uniform(rng, (kh, kw, in_channels, filters)),
            f"{prefix}/bias": np.zeros(filters)}


def conv2d(ops, params, x, prefix: str = "conv", padding: str = "valid", activation: str | None = None,
           strides=1, dilation_rate=1):
    """``activation(conv(x, kernel) + bias)`` (Keras ``Conv2D``, channels last).

    Args:
        ops: the :class:`~toolkit.ops.Ops` running the model.
        params: the model's parameters, holding :func:`conv2d_init`'s names for ``prefix``.
        x: ``[batch, height, width, in_channels]``.
        prefix: the layer's name given to :func:`conv2d_init`.
        padding: ``"valid"`` or ``"same"``.
        activation: see :func:`~toolkit.nn.layers.activate` (None: linear).
        strides: an int or one per spatial axis, as :meth:`~toolkit.ops.Ops.conv` takes them.
        dilation_rate: an int or one per spatial axis, as :meth:`~toolkit.ops.Ops.conv` takes them.

    Returns:
        ``[batch, out_height, out_width, filters]``, recorded as ``prefix`` (``ops.record``).

    Raises:
        ArgumentError: strides and dilation_rate both above 1, or a padding, strides or dilation_rate Keras does not
            accept (:meth:`~toolkit.ops.Ops.conv`).
        ShapeError: ``x`` not of rank 4, channels that do not match the kernel's, or an input smaller than the
            dilated kernel with ``"valid"`` padding.
    """
    y = ops.conv(x, params[f"{prefix}/kernel"], strides=strides, padding=padding, dilation_rate=dilation_rate)
    return record_layer(ops, prefix, activate(ops, y + params[f"{prefix}/bias"], activation))


def max_pool2d(ops, x, pool_size=2, strides=None, padding: str = "valid"):
    """The largest value of each window (Keras ``MaxPooling2D``, channels last).

    Args:
        ops: the :class:`~toolkit.ops.Ops` running the model.
        x: ``[batch, height, width, channels]``.
        pool_size: the window, an int or ``(height, width)``.
        strides: the window's step; None: the pool size.
        padding: ``"valid"`` or ``"same"``.

    Returns:
        ``[batch, out_height, out_width, channels]``.
    """
    return ops.max_pool(x, pool_size, strides=strides, padding=padding)


def average_pool2d(ops, x, pool_size=2, strides=None, padding: str = "valid"):
    """The mean of each window (Keras ``AveragePooling2D``, channels last); with ``"same"`` padding a window
    averages only the entries inside the input.

    Args:
        ops: the :class:`~toolkit.ops.Ops` running the model.
        x: ``[batch, height, width, channels]``.
        pool_size: the window, an int or ``(height, width)``.
        strides: the window's step; None: the pool size.
        padding: ``"valid"`` or ``"same"``.

    Returns:
        ``[batch, out_height, out_width, channels]``.
    """
    return ops.average_pool(x, pool_size, strides=strides, padding=padding)


def global_max_pool2d(ops, x):
    """The largest value of each channel (Keras ``GlobalMaxPooling2D``).

    Args:
        ops: the :class:`~toolkit.ops.Ops` running the model.
        x: ``[batch, height, width, channels]``.

    Returns:
        ``[batch, channels]``.
    """
    return ops.max(x, axis=(1, 2))


def global_average_pool2d(ops, x):
    """The mean of each channel (Keras ``GlobalAveragePooling2D``).

    Args:
        ops: the :class:`~toolkit.ops.Ops` running the model.
        x: ``[batch, height, width, channels]``.

    Returns:
        ``[batch, channels]``.
    """
    return ops.mean(x, axis=(1, 2))
