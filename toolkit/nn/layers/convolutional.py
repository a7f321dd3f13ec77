"""Convolution and pooling layers, channels last (Keras ``Conv2D``, ``MaxPooling2D``, ``AveragePooling2D`` and the
global poolings)."""

from __future__ import annotations

import numpy as np

from toolkit.nn.layers.core import activate, glorot_uniform


def conv2d_init(rng: np.random.Generator, in_channels: int, filters: int, kernel: int | tuple[int, int],
                prefix: str = "conv") -> dict[str, np.ndarray]:
    """Keras ``Conv2D``'s weights: a Glorot-uniform ``[kernel_h, kernel_w, in_channels, filters]`` kernel, zero
    bias."""
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    return {f"{prefix}/kernel": glorot_uniform(rng, (kh, kw, in_channels, filters)),
            f"{prefix}/bias": np.zeros(filters)}


def conv2d(ops, params, x, prefix: str = "conv", padding: str = "valid", activation: str | None = None,
           strides=1, dilation_rate=1):
    """``activation(conv(x, kernel) + bias)`` (Keras ``Conv2D``): see :meth:`~toolkit.nn.ops.Ops.conv` for
    ``strides``, ``padding`` and ``dilation_rate``."""
    y = ops.conv(x, params[f"{prefix}/kernel"], strides=strides, padding=padding, dilation_rate=dilation_rate)
    return activate(ops, y + params[f"{prefix}/bias"], activation)


def max_pool2d(ops, x, pool_size=2, strides=None, padding: str = "valid"):
    """Keras ``MaxPooling2D`` (strides default to the pool size)."""
    return ops.max_pool(x, pool_size, strides=strides, padding=padding)


def average_pool2d(ops, x, pool_size=2, strides=None, padding: str = "valid"):
    """Keras ``AveragePooling2D``; with "same" padding a window averages only the entries inside the input."""
    return ops.average_pool(x, pool_size, strides=strides, padding=padding)


def global_max_pool2d(ops, x):
    """``[batch, height, width, channels] -> [batch, channels]`` (Keras ``GlobalMaxPooling2D``)."""
    return ops.max(x, axis=(1, 2))


def global_average_pool2d(ops, x):
    """``[batch, height, width, channels] -> [batch, channels]`` (Keras ``GlobalAveragePooling2D``)."""
    return ops.mean(x, axis=(1, 2))
