"""Convolution, pooling and attention: the window ops of :class:`~toolkit.nn.ops.Ops` (``keras.ops.nn``'s ``conv``,
``max_pool``, ``average_pool``, ``dot_product_attention`` and their kin), channels last unless said otherwise.

A backend implements the primitives (abstract here) on natives; the composites are written once, here.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np

from toolkit.errors import ShapeError
from toolkit.nn.shapes import check_pool_size

#: How each primitive's array arguments are converted (the letters of :data:`toolkit.nn.ops.ARGUMENTS`).
ARGUMENTS: dict[str, str] = {"conv": "ff", "max_pool": "t", "average_pool": "t"}


class WindowOps(ABC):
    """The window ops; mixed into :class:`~toolkit.nn.ops.Ops`."""

    # --- convolution and pooling (channels last) -------------------------------------------------------------------
    @abstractmethod
    def conv(self, inputs, kernel, strides=1, padding: str = "valid", dilation_rate=1):
        """2-D cross-correlation (``keras.ops.conv``, channels last).

        Args:
            inputs: ``[batch, height, width, in_channels]``.
            kernel: ``[kernel_height, kernel_width, in_channels, out_channels]``.
            strides, dilation_rate: an int or a pair; strides and dilation above 1 together are refused, as
                TensorFlow refuses them.
            padding: ``"valid"`` (no padding) or ``"same"`` (zeros so the output has ``ceil(size / stride)``
                positions, the odd one after, as TensorFlow places them).
        """

    def conv2d(self, x, kernel, padding: str = "valid"):
        """The toolkit's earlier name: :meth:`conv` with stride 1."""
        return self.conv(x, kernel, padding=padding)

    @abstractmethod
    def max_pool(self, inputs, pool_size, strides=None, padding: str = "valid"):
        """Maximum over ``pool_size`` windows moved by ``strides`` (default ``pool_size``), channels last
        (``keras.ops.max_pool``); "same" pads with minus infinity."""

    @abstractmethod
    def average_pool(self, inputs, pool_size, strides=None, padding: str = "valid"):
        """Mean over windows (``keras.ops.average_pool``); with "same" padding a window's mean counts only the
        entries inside the input, as TensorFlow and Keras do."""

    def max_pool2d(self, x, size: int):
        """The toolkit's earlier name: :meth:`max_pool` of ``size x size`` windows, stride ``size``, "valid"."""
        return self.max_pool(x, check_pool_size(size))

    # --- attention -------------------------------------------------------------------------------------------------
    def dot_product_attention(self, query, key, value, mask=None, scale: float | None = None,
                              is_causal: bool = False):
        """Scaled dot-product attention (``keras.ops.dot_product_attention``).

        Args:
            query: ``[batch, target, heads, depth]``; key, value: ``[batch, source, heads, depth]``.
            mask: booleans broadcastable to ``[batch, heads, target, source]``: True where a query may attend.
            scale: default ``1 / sqrt(depth)``.
            is_causal: the query at position ``t`` attends only to sources ``0..t`` (aligned at the start, as Keras).

        ``softmax(scale * q k^T)`` over the sources, masked entries set to the dtype's lowest finite value before
        the softmax (a fully masked row attends uniformly, as in Keras), then times ``value``: ``[batch, target,
        heads, depth]``.
        """
        q_shape, k_shape = self.shape(query), self.shape(key)
        if len(q_shape) != 4 or len(k_shape) != 4:
            raise ShapeError(f"dot_product_attention needs [batch, sequence, heads, depth] arrays, got query "
                             f"{q_shape} and key {k_shape}")
        depth = q_shape[-1]
        scale = 1.0 / math.sqrt(depth) if scale is None else scale
        logits = self.matmul(self.transpose(query, (0, 2, 1, 3)), self.transpose(key, (0, 2, 3, 1))) * scale
        allowed = None if mask is None else self.wrap(self._native(mask, "bool"))
        if is_causal:
            target, source = q_shape[1], k_shape[1]
            causal = np.tril(np.ones((target, source), bool))
            allowed = causal if allowed is None else self.logical_and(allowed, causal)
        if allowed is not None:
            logits = self.where(allowed, logits, float(np.finfo(self._result_dtype([logits])).min))
        weights = self.softmax(logits, axis=-1)
        return self.transpose(self.matmul(weights, self.transpose(value, (0, 2, 1, 3))), (0, 2, 1, 3))
