"""Shape arithmetic and argument checks of the window ops (convolution, pooling) and matmul, written once for every
backend: how TensorFlow places "same" padding, how many positions an axis keeps, Keras' transposed-convolution
padding, and what is refused (typed errors that name the argument, what was given and what is accepted)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from toolkit.errors import ArgumentError, ShapeError

PADDINGS = ("valid", "same")
#: Keras' data formats; None means Keras' default, channels last.
DATA_FORMATS = ("channels_last", "channels_first")
#: The spatial ranks of the window ops: 1-D, 2-D and 3-D.
SPATIAL_RANKS = (1, 2, 3)


def same_padding(size: int, kernel: int, stride: int = 1, dilation: int = 1) -> tuple[int, int]:
    """Zeros before and after an axis of ``size`` for "same" padding, as TensorFlow places them: the output has
    ``ceil(size / stride)`` positions, and an odd total puts the extra zero after."""
    span = (kernel - 1) * dilation + 1
    total = max((math.ceil(size / stride) - 1) * stride + span - size, 0)
    return total // 2, total - total // 2


def output_size(size: int, kernel: int, stride: int, dilation: int, padding: str) -> int:
    """Positions along an axis of ``size`` after a window op (convolution, pooling)."""
    if padding == "same":
        return math.ceil(size / stride)
    return (size - (kernel - 1) * dilation - 1) // stride + 1


def padded_output_sizes(sizes, kernel: Sequence[int], strides: Sequence[int], dilation: Sequence[int],
                        padding) -> list:
    """Positions along each spatial axis of ``sizes`` after a window op with explicit (before, after) ``padding``;
    the sizes may be a framework's symbolic integers (the arithmetic is the same)."""
    return [(n + a + b - (k - 1) * d - 1) // s + 1
            for n, k, s, d, (a, b) in zip(sizes, kernel, strides, dilation, padding)]


def explicit_padding(sizes: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                     dilation: Sequence[int], padding: str) -> tuple[tuple[int, int], ...]:
    """"valid" or "same" as (before, after) zeros per spatial axis (TensorFlow's placement)."""
    if padding == "valid":
        return tuple((0, 0) for _ in sizes)
    return tuple(same_padding(*axis) for axis in zip(sizes, kernel, strides, dilation))


def transpose_padding(kernel: Sequence[int], strides: Sequence[int], dilation: Sequence[int], padding: str,
                      output_padding) -> tuple[tuple[int, int], ...]:
    """Keras' ``conv_transpose`` padding as (before, after) per spatial axis of the input dilated by the strides
    (``keras/src/backend/common/backend_utils.py``, the JAX form): "valid" gives ``(size - 1) * stride +
    max(span, stride)`` positions, "same" ``size * stride``; ``output_padding`` adds positions after."""
    extra = spatial(output_padding, len(kernel), "output_padding", "conv_transpose", minimum=0) \
        if output_padding is not None else (None,) * len(kernel)
    pads = []
    for k, s, d, more in zip(kernel, strides, dilation, extra):
        if more is not None and more >= s:
            raise ArgumentError(f"ops.conv_transpose: output_padding {output_padding!r} must be smaller than the "
                                f"strides {tuple(strides)} along every axis")
        span = (k - 1) * d + 1
        if padding == "valid":
            before, after = span - 1, span - 1 + (max(span, s) - span if more is None else more)
        else:
            total = s + span - 2 if more is None else span + span % 2 - 2 + more
            before = min(total // 2 + total % 2, span - 1)
            after = total - before
        pads.append((before, after))
    return tuple(pads)


def spatial(value, rank: int, name: str, op: str, minimum: int = 1) -> tuple[int, ...]:
    """``value`` (an int, or a sequence of ``rank`` ints) as ``rank`` ints >= ``minimum``, one per spatial axis."""
    values = (value,) * rank if is_int(value) else tuple(value) if isinstance(value, (tuple, list)) else None
    if values is None or len(values) != rank or not all(is_int(v) and v >= minimum for v in values):
        raise ArgumentError(f"ops.{op}: {name} must be an int >= {minimum} or {rank} of them (one per spatial "
                            f"axis), got {value!r}")
    return tuple(int(v) for v in values)


def is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def check_data_format(data_format, op: str) -> str:
    """Keras' ``data_format``: None means channels last."""
    data_format = "channels_last" if data_format is None else data_format
    if data_format not in DATA_FORMATS:
        raise ArgumentError(f"ops.{op}: data_format must be one of {DATA_FORMATS} or None, got {data_format!r}")
    return data_format


def check_window_rank(shape: Sequence[int | None], op: str, name: str = "inputs") -> int:
    """The spatial rank of a window op's input ``[batch, *spatial, channels]`` (1, 2 or 3)."""
    if len(shape) - 2 not in SPATIAL_RANKS:
        raise ShapeError(f"ops.{op} takes {name} of rank 3, 4 or 5 ([batch, *spatial, channels] with 1 to 3 spatial "
                         f"axes), got shape {tuple(shape)}")
    return len(shape) - 2


def check_kernel(input_shape, kernel_shape, op: str, name: str = "kernel") -> int:
    """A kernel ``[*spatial, in, out]`` of the input's rank, with a static shape. Returns the spatial rank."""
    rank = len(input_shape) - 2
    if len(kernel_shape) != len(input_shape):
        raise ShapeError(f"ops.{op}: a {len(kernel_shape)}-D {name} needs {len(kernel_shape)}-D inputs "
                         f"[batch, *spatial, channels] (the same rank), got {name} shape {tuple(kernel_shape)} and "
                         f"inputs shape {tuple(input_shape)}")
    if None in kernel_shape:
        raise ShapeError(f"ops.{op} needs a {name} of static shape, got {tuple(kernel_shape)}")
    return rank


def check_groups(channels: int | None, kernel_in: int, op: str) -> int:
    """The number of groups of a grouped convolution: the input channels over the kernel's input channels."""
    if channels is None:
        raise ShapeError(f"ops.{op} needs inputs whose channel axis has a static size")
    if kernel_in < 1 or channels % kernel_in:
        raise ShapeError(f"ops.{op}: the inputs' {channels} channels must be a multiple of the kernel's {kernel_in} "
                         "input channels (a grouped convolution)")
    return channels // kernel_in


def check_conv(input_rank: int, kernel_rank: int, strides, dilation_rate, padding: str):
    """Checked arguments of a channels-last 2-D convolution (the bench's natives and FLOP counts), strides and
    dilation not both above 1 (TensorFlow refuses that). Returns the strides and dilation pairs and the padding."""
    if input_rank != 4 or kernel_rank != 4:
        raise ShapeError(f"ops.conv takes 4-D inputs [batch, height, width, channels] and a 4-D kernel, got ranks "
                         f"{input_rank} and {kernel_rank}")
    strides, dilations = spatial(strides, 2, "strides", "conv"), spatial(dilation_rate, 2, "dilation_rate", "conv")
    check_strides_dilation(strides, dilations, "conv")
    return strides, dilations, check_padding(padding)


def check_strides_dilation(strides: Sequence[int], dilation: Sequence[int], op: str) -> None:
    if max(strides) > 1 and max(dilation) > 1:
        raise ArgumentError(f"ops.{op}: strides {tuple(strides)} and dilation_rate {tuple(dilation)} above 1 together "
                            "are not supported (TensorFlow refuses them, and Keras on TensorFlow); use one or the "
                            "other")


def check_matmul(shape1: Sequence[int | None], shape2: Sequence[int | None]) -> None:
    """Refuse, while the model is traced, a product whose inner sizes differ (one error on every backend, where
    TensorFlow would raise its own and JAX would fail only when the compiled function runs)."""
    if not shape1 or not shape2:
        raise ShapeError(f"ops.matmul needs arrays of rank >= 1, got shapes {tuple(shape1)} and {tuple(shape2)}")
    inner1, inner2 = shape1[-1], shape2[-2] if len(shape2) > 1 else shape2[0]
    if None not in (inner1, inner2) and inner1 != inner2:
        raise ShapeError(f"ops.matmul: shapes {tuple(shape1)} and {tuple(shape2)} do not align ({inner1} != "
                         f"{inner2})")


def check_padding(padding: str, op: str | None = None) -> str:
    if not isinstance(padding, str) or padding.lower() not in PADDINGS:
        where = f"ops.{op}: " if op else ""
        raise ArgumentError(f"{where}padding must be one of {PADDINGS}, got {padding!r}")
    return padding.lower()


def check_pool_size(size: int) -> int:
    if not is_int(size) or size < 1:
        raise ArgumentError(f"pool size must be an int >= 1, got {size!r}")
    return int(size)


def window(pool_size, strides, padding, rank: int = 2, op: str = "max_pool"):
    """Checked pooling arguments, as Keras reads them (``strides`` None means ``pool_size``): the window and strides,
    ``rank`` ints each, and the padding."""
    size = spatial(pool_size, rank, "pool_size", op)
    return size, spatial(size if strides is None else strides, rank, "strides", op), check_padding(padding, op)
