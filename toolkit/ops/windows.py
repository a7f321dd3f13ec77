"""Convolution, pooling and attention: the window ops of :class:`~toolkit.ops.Ops` (``keras.ops.nn``'s ``conv``,
``depthwise_conv``, ``separable_conv``, ``conv_transpose``, ``max_pool``, ``average_pool``,
``dot_product_attention``), 1-D, 2-D and 3-D, channels last unless ``data_format`` says otherwise.

The public ops are written once, here: they check their arguments (typed errors, the same on every backend), bring
channels-first inputs to channels last and back, and call four channels-last primitives that a backend implements on
natives: :meth:`WindowOps._convolution` (a grouped, dilated convolution), :meth:`WindowOps._conv_transpose`,
:meth:`WindowOps._max_pool` and :meth:`WindowOps._average_pool`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np

from toolkit.errors import ArgumentError, ShapeError
from toolkit.ops.window_shapes import (
    check_data_format,
    check_groups,
    check_kernel,
    check_padding,
    check_pool_size,
    check_strides_dilation,
    check_window_rank,
    output_size,
    spatial,
    transpose_padding,
    window,
)

#: How each primitive's array arguments are converted (the letters of :data:`~toolkit.ops.interface.ARGUMENTS`): the
#: convolutions promote input and kernel to one floating dtype, the pools make their input floating.
ARGUMENTS: dict[str, str] = {"_convolution": "ff", "_conv_transpose": "ff", "_max_pool": "f", "_average_pool": "f"}


class WindowOps(ABC):
    """The window ops; mixed into :class:`~toolkit.ops.Ops`."""

    # --- the primitives (channels last: [batch, *spatial, channels]) ------------------------------------------------
    @abstractmethod
    def _convolution(self, inputs, kernel, strides, padding, dilation, groups):
        """Cross-correlation of ``inputs`` ``[batch, *spatial, channels]`` with ``kernel`` ``[*window,
        channels / groups, out_channels]`` (``lax.conv_general_dilated``'s ``feature_group_count``: output channel
        ``o`` sees the input channels of group ``o // (out_channels / groups)``). ``strides`` and ``dilation``: one
        int per spatial axis, both may be above 1; ``padding``: "valid" or "same" (TensorFlow's placement)."""

    @abstractmethod
    def _conv_transpose(self, inputs, kernel, strides, padding, dilation):
        """The transposed convolution of ``inputs`` ``[batch, *spatial, in_channels]`` with ``kernel`` ``[*window,
        out_channels, in_channels]``: ``lax.conv_transpose(..., transpose_kernel=True)``, the gradient of a
        convolution with respect to its input. ``padding``: (before, after) pairs per axis of the input dilated by
        ``strides`` (:func:`~toolkit.ops.window_shapes.transpose_padding`), ``dilation`` the kernel's."""

    @abstractmethod
    def _max_pool(self, inputs, pool_size, strides, padding):
        """Maximum over windows (``pool_size``, ``strides``: one int per spatial axis); "same" pads with minus
        infinity; a window holding NaN is NaN; a tied maximum's gradient goes to its first entry."""

    @abstractmethod
    def _average_pool(self, inputs, pool_size, strides, padding):
        """Mean over windows; with "same" padding a window's mean counts only the entries inside the input."""

    # --- convolution ---------------------------------------------------------------------------------------------
    def conv(self, inputs, kernel, strides=1, padding: str = "valid", data_format: str | None = None,
             dilation_rate=1):
        """General N-D cross-correlation (``keras.ops.conv``), 1-D, 2-D or 3-D.

        Args:
            inputs: ``[batch, *spatial, channels]`` (``[batch, channels, *spatial]`` with channels first).
            kernel: ``[*window, in_channels, out_channels]``. Input channels that are a multiple of
                ``in_channels`` make a grouped convolution (``channels / in_channels`` groups; ``out_channels`` a
                multiple of the groups).
            strides: an int or one per spatial axis.
            dilation_rate: an int or one per spatial axis.
            padding: ``"valid"`` (no padding) or ``"same"`` (zeros so an axis keeps ``ceil(size / stride)``
                positions, the odd one after, as TensorFlow places them).
            data_format: ``"channels_last"`` (None) or ``"channels_first"``.

        Raises:
            ArgumentError: strides and dilation_rate both above 1 (Keras on TensorFlow refuses them); a padding,
                data_format, strides or dilation_rate Keras does not accept.
            ShapeError: inputs not of rank 3 to 5, a kernel of another rank or of unknown shape, input channels not
                a multiple of the kernel's, or an input smaller than the dilated kernel with "valid" padding.
        """
        fmt = check_data_format(data_format, "conv")
        x, rank = self._channels_last(inputs, fmt, "conv")
        x_shape, k_shape = self.shape(x), self.shape(kernel)
        check_kernel(x_shape, k_shape, "conv")
        strides, dilation = spatial(strides, rank, "strides", "conv"), spatial(dilation_rate, rank, "dilation_rate",
                                                                                "conv")
        padding = check_padding(padding, "conv")
        check_strides_dilation(strides, dilation, "conv")
        groups = check_groups(x_shape[-1], k_shape[-2], "conv")
        if k_shape[-1] % groups:
            raise ShapeError(f"ops.conv: the kernel's {k_shape[-1]} output channels must be a multiple of the "
                             f"{groups} groups (inputs {tuple(self.shape(inputs))}, kernel {tuple(k_shape)})")
        self._check_output(x_shape, k_shape[:-2], strides, dilation, padding, "conv")
        return self._channels_back(self._convolution(x, kernel, strides, padding, dilation, groups), fmt)

    def conv2d(self, x, kernel, padding: str = "valid"):
        """The toolkit's earlier name: :meth:`conv` with stride 1."""
        return self.conv(x, kernel, padding=padding)

    def depthwise_conv(self, inputs, kernel, strides=1, padding: str = "valid", data_format: str | None = None,
                       dilation_rate=1):
        """Depthwise convolution (``keras.ops.depthwise_conv``): each input channel convolved with its own
        ``multiplier`` filters, 1-D, 2-D or 3-D.

        Args:
            inputs: ``[batch, *spatial, channels]`` (channels first with ``data_format="channels_first"``).
            kernel: ``[*window, channels, multiplier]``; output channel ``c * multiplier + j`` is channel ``c``
                with filter ``j``.
            strides: an int or one per spatial axis (both it and ``dilation_rate`` may be above 1, as in Keras).
            dilation_rate: an int or one per spatial axis.
            padding: as in :meth:`conv`.
            data_format: as in :meth:`conv`.

        Raises:
            ArgumentError: a padding, data_format, strides or dilation_rate Keras does not accept.
            ShapeError: inputs not of rank 3 to 5, a kernel of another rank or whose ``channels`` differ from the
                input's, or an input smaller than the dilated kernel with "valid" padding.
        """
        fmt = check_data_format(data_format, "depthwise_conv")
        x, rank = self._channels_last(inputs, fmt, "depthwise_conv")
        x_shape, k_shape = self.shape(x), self.shape(kernel)
        check_kernel(x_shape, k_shape, "depthwise_conv")
        if x_shape[-1] != k_shape[-2]:
            raise ShapeError(f"ops.depthwise_conv: the kernel's {k_shape[-2]} input channels must equal the inputs' "
                             f"{x_shape[-1]} (inputs {tuple(self.shape(inputs))}, kernel {tuple(k_shape)})")
        strides = spatial(strides, rank, "strides", "depthwise_conv")
        dilation = spatial(dilation_rate, rank, "dilation_rate", "depthwise_conv")
        padding = check_padding(padding, "depthwise_conv")
        self._check_output(x_shape, k_shape[:-2], strides, dilation, padding, "depthwise_conv")
        grouped = self.reshape(kernel, (*k_shape[:-2], 1, k_shape[-2] * k_shape[-1]))
        return self._channels_back(self._convolution(x, grouped, strides, padding, dilation, x_shape[-1]), fmt)

    def separable_conv(self, inputs, depthwise_kernel, pointwise_kernel, strides=1, padding: str = "valid",
                       data_format: str | None = None, dilation_rate=1):
        """Separable convolution (``keras.ops.separable_conv``): :meth:`depthwise_conv` with ``depthwise_kernel``,
        then a stride-1 "valid" :meth:`conv` with ``pointwise_kernel`` ``[*ones, channels * multiplier, out]``.

        Raises:
            ArgumentError: as :meth:`depthwise_conv`.
            ShapeError: as :meth:`depthwise_conv`, or a pointwise kernel whose input channels are not
                ``channels * multiplier``.
        """
        depthwise = self.depthwise_conv(inputs, depthwise_kernel, strides, padding, data_format, dilation_rate)
        return self.conv(depthwise, pointwise_kernel, 1, "valid", data_format, dilation_rate)

    def conv_transpose(self, inputs, kernel, strides=1, padding: str = "valid", output_padding=None,
                       data_format: str | None = None, dilation_rate=1):
        """Transposed convolution (``keras.ops.conv_transpose``), 1-D, 2-D or 3-D: the gradient of :meth:`conv`
        with respect to its input, with Keras' output sizes.

        Args:
            inputs: ``[batch, *spatial, in_channels]`` (channels first with ``data_format="channels_first"``).
            kernel: ``[*window, out_channels, in_channels]``.
            strides: an int or one per spatial axis.
            dilation_rate: an int or one per spatial axis.
            padding: ``"valid"``: an axis of ``size`` gives ``(size - 1) * stride + max(span, stride)`` positions
                (``span`` the dilated kernel's size); ``"same"``: ``size * stride``.
            output_padding: None, or an int or one per axis (each below its stride): the output then has
                ``(size - 1) * stride + span - 2 * before + output_padding`` positions, as in Keras.
            data_format: as in :meth:`conv`.

        Raises:
            ArgumentError: an output_padding not below the strides; a padding, data_format, strides or
                dilation_rate Keras does not accept.
            ShapeError: inputs not of rank 3 to 5, a kernel of another rank or whose ``in_channels`` differ from the
                input's channels.
        """
        fmt = check_data_format(data_format, "conv_transpose")
        x, rank = self._channels_last(inputs, fmt, "conv_transpose")
        x_shape, k_shape = self.shape(x), self.shape(kernel)
        check_kernel(x_shape, k_shape, "conv_transpose")
        if x_shape[-1] != k_shape[-1]:
            raise ShapeError(f"ops.conv_transpose: the kernel's {k_shape[-1]} input channels (its last axis) must "
                             f"equal the inputs' {x_shape[-1]} (inputs {tuple(self.shape(inputs))}, kernel "
                             f"{tuple(k_shape)})")
        strides = spatial(strides, rank, "strides", "conv_transpose")
        dilation = spatial(dilation_rate, rank, "dilation_rate", "conv_transpose")
        pads = transpose_padding(k_shape[:-2], strides, dilation, check_padding(padding, "conv_transpose"),
                                 output_padding)
        return self._channels_back(self._conv_transpose(x, kernel, strides, pads, dilation), fmt)

    # --- pooling -------------------------------------------------------------------------------------------------
    def max_pool(self, inputs, pool_size, strides=None, padding: str = "valid", data_format: str | None = None):
        """Maximum over ``pool_size`` windows moved by ``strides`` (default ``pool_size``), 1-D, 2-D or 3-D
        (``keras.ops.max_pool``). "same" pads with minus infinity; a window holding NaN gives NaN (as NumPy's and
        XLA's maximum); integer and boolean inputs are pooled in the computation dtype.

        Raises:
            ArgumentError: a pool_size, strides, padding or data_format Keras does not accept.
            ShapeError: inputs not of rank 3 to 5, or smaller than the window with "valid" padding.
        """
        return self._pool(self._max_pool, "max_pool", inputs, pool_size, strides, padding, data_format)

    def average_pool(self, inputs, pool_size, strides=None, padding: str = "valid", data_format: str | None = None):
        """Mean over windows, 1-D, 2-D or 3-D (``keras.ops.average_pool``); with "same" padding a window's mean
        counts only the entries inside the input, as TensorFlow and Keras do.

        Raises:
            ArgumentError: a pool_size, strides, padding or data_format Keras does not accept.
            ShapeError: inputs not of rank 3 to 5, or smaller than the window with "valid" padding.
        """
        return self._pool(self._average_pool, "average_pool", inputs, pool_size, strides, padding, data_format)

    def max_pool2d(self, x, size: int):
        """The toolkit's earlier name: :meth:`max_pool` of ``size x size`` windows, stride ``size``, "valid"."""
        return self.max_pool(x, check_pool_size(size))

    def _pool(self, primitive, op: str, inputs, pool_size, strides, padding, data_format):
        fmt = check_data_format(data_format, op)
        x, rank = self._channels_last(inputs, fmt, op)
        size, strides, padding = window(pool_size, strides, padding, rank, op)
        self._check_output(self.shape(x), size, strides, (1,) * rank, padding, op)
        return self._channels_back(primitive(x, size, strides, padding), fmt)

    # --- layouts and checks --------------------------------------------------------------------------------------
    def _channels_last(self, inputs, data_format: str, op: str):
        """``inputs`` as ``[batch, *spatial, channels]``, and its spatial rank."""
        shape = self.shape(inputs)
        rank = check_window_rank(shape, op)
        if data_format == "channels_first":
            return self.transpose(inputs, (0, *range(2, rank + 2), 1)), rank
        return inputs, rank

    def _channels_back(self, outputs, data_format: str):
        if data_format == "channels_first":
            rank = len(self.shape(outputs)) - 2
            return self.transpose(outputs, (0, rank + 1, *range(1, rank + 1)))
        return outputs

    def _check_output(self, shape, window_size, strides, dilation, padding: str, op: str) -> None:
        """Refuse a "valid" window op whose dilated window is larger than its input (no output position)."""
        for size, k, s, d in zip(shape[1:-1], window_size, strides, dilation):
            if size is not None and output_size(size, k, s, d, padding) < 1:
                raise ShapeError(f"ops.{op}: inputs of spatial shape {tuple(shape[1:-1])} are smaller than the "
                                 f"window {tuple(window_size)} (dilation {tuple(dilation)}) with \"valid\" padding: "
                                 "no output position; use smaller windows or \"same\" padding")

    # --- attention -------------------------------------------------------------------------------------------------
    def dot_product_attention(self, query, key, value, bias=None, mask=None, scale: float | None = None,
                              is_causal: bool = False, flash_attention: bool | None = None,
                              attn_logits_soft_cap: float | None = None):
        """Scaled dot-product attention (``keras.ops.dot_product_attention``), with grouped-query attention.

        Args:
            query: ``[batch, target, heads, depth]``.
            key: ``[batch, source, kv_heads, depth]``, value: ``[batch, source, kv_heads, value_depth]``;
                ``heads`` a multiple of ``kv_heads``: query head ``h`` attends with key/value head
                ``h // (heads / kv_heads)`` (multi-query attention when ``kv_heads`` is 1).
            bias: added to the logits; broadcastable to ``[batch, heads, target, source]``.
            mask: broadcastable to ``[batch, heads, target, source]``: True (non-zero) where a query may attend.
            scale: default ``1 / sqrt(depth)``.
            is_causal: the query at position ``t`` attends only to sources ``0..t`` (aligned at the start, as Keras).
            flash_attention: None or False (there is no flash kernel here).
            attn_logits_soft_cap: None (Keras has it only for JAX on TPU).

        ``softmax(scale * q k^T + bias)`` over the sources, masked entries set to ``-0.7`` times the dtype's
        largest value first (a fully masked row attends uniformly, as in Keras), then times ``value``:
        ``[batch, target, heads, value_depth]``. Computed in the inputs' floating dtype (Keras rounds the softmax
        through float32; float64 stays float64 here).

        Raises:
            ArgumentError: flash_attention=True (no flash-attention kernel on any backend here), or an
                attn_logits_soft_cap (Keras supports it only for JAX on TPU).
            ShapeError: query, key or value not 4-D, key and value of different batch, length or heads, or
                heads not a multiple of the key's.
        """
        if flash_attention:
            raise ArgumentError(f"ops.dot_product_attention: flash_attention={flash_attention!r} is not supported "
                                "(no backend here has a flash-attention kernel); pass None or False")
        if attn_logits_soft_cap is not None:
            raise ArgumentError(f"ops.dot_product_attention: attn_logits_soft_cap={attn_logits_soft_cap!r} is not "
                                "supported (Keras has it only for JAX on TPU); pass None")
        shapes = {name: tuple(self.shape(x)) for name, x in (("query", query), ("key", key), ("value", value))}
        if any(len(s) != 4 for s in shapes.values()):
            raise ShapeError("ops.dot_product_attention needs [batch, sequence, heads, depth] arrays, got "
                             + ", ".join(f"{name} {s}" for name, s in shapes.items()))
        (_, target, heads, depth), (_, source, kv_heads, _) = shapes["query"], shapes["key"]
        if shapes["key"][:3] != shapes["value"][:3] or heads % kv_heads:
            raise ShapeError("ops.dot_product_attention: key and value need the same batch, length and heads, and "
                             "the query's heads a multiple of theirs; got "
                             + ", ".join(f"{name} {s}" for name, s in shapes.items()))
        dtype = self._result_dtype([query, key, value], floating=True)
        query, key, value = (self.wrap(self._native(x, dtype)) for x in (query, key, value))
        scale = 1.0 / math.sqrt(depth) if scale is None else float(scale)
        groups = heads // kv_heads
        q = self.transpose(query, (0, 2, 1, 3))  # [batch, heads, target, depth]
        k = self.transpose(key, (0, 2, 3, 1))  # [batch, kv_heads, depth, source]
        v = self.transpose(value, (0, 2, 1, 3))  # [batch, kv_heads, source, value_depth]
        if groups > 1:  # each key/value head serves `groups` query heads: one more (broadcast) batch axis
            q = self.reshape(q, (-1, kv_heads, groups, target, depth))
            k, v = self.expand_dims(k, 2), self.expand_dims(v, 2)
        logits = self.matmul(q, k) * scale
        if groups > 1:
            logits = self.reshape(logits, (-1, heads, target, source))
        if bias is not None:
            logits = logits + self.wrap(self._native(bias, dtype))
        allowed = None if mask is None else self.wrap(self._native(mask, "bool"))
        if is_causal:
            causal = np.tril(np.ones((target, source), bool))
            allowed = causal if allowed is None else self.logical_and(allowed, causal)
        if allowed is not None:
            logits = self.where(allowed, logits, -0.7 * float(np.finfo(dtype).max))
        weights = self.softmax(logits, axis=-1)
        if groups > 1:
            weights = self.reshape(weights, (-1, kv_heads, groups, target, source))
        out = self.matmul(weights, v)
        if groups > 1:
            out = self.reshape(out, (-1, heads, target, shapes["value"][3]))
        return self.transpose(out, (0, 2, 1, 3))
