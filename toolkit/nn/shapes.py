"""Shape arithmetic and argument checks of the window ops (convolution, pooling) and matmul, written once for every
backend: how TensorFlow places "same" padding, how many positions an axis keeps, and what is refused."""

from __future__ import annotations

import math
from collections.abc import Sequence

from toolkit.errors import ShapeError

PADDINGS = ("valid", "same")


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


def _pair(value: int | Sequence[int], name: str) -> tuple[int, int]:
    pair = (value, value) if isinstance(value, int) and not isinstance(value, bool) else tuple(value)
    if len(pair) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in pair):
        raise ValueError(f"{name} must be an int >= 1 or a pair of them, got {value!r}")
    return pair  # type: ignore[return-value]


def check_conv(input_rank: int, kernel_rank: int, strides, dilation_rate, padding: str):
    """Checked convolution arguments: the convolutions every backend runs the same, 2-D and channels last, with
    strides and dilation not both above 1 (TensorFlow refuses that). Returns the strides and dilation pairs and the
    padding."""
    strides, dilations = _pair(strides, "strides"), _pair(dilation_rate, "dilation_rate")
    if input_rank != 4 or kernel_rank != 4:
        raise ShapeError(f"ops.conv takes 4-D inputs [batch, height, width, channels] and a 4-D kernel, got ranks "
                         f"{input_rank} and {kernel_rank}")
    if max(strides) > 1 and max(dilations) > 1:
        raise ValueError(f"ops.conv: strides {strides} and dilation_rate {dilations} above 1 together are not "
                         "supported (TensorFlow refuses them); use one or the other")
    return strides, dilations, check_padding(padding)


def check_matmul(shape1: Sequence[int | None], shape2: Sequence[int | None]) -> None:
    """Refuse, while the model is traced, a product whose inner sizes differ (one error on every backend, where
    TensorFlow would raise its own and JAX would fail only when the compiled function runs)."""
    if not shape1 or not shape2:
        raise ShapeError(f"ops.matmul needs arrays of rank >= 1, got shapes {tuple(shape1)} and {tuple(shape2)}")
    inner1, inner2 = shape1[-1], shape2[-2] if len(shape2) > 1 else shape2[0]
    if None not in (inner1, inner2) and inner1 != inner2:
        raise ShapeError(f"ops.matmul: shapes {tuple(shape1)} and {tuple(shape2)} do not align ({inner1} != "
                         f"{inner2})")


def check_padding(padding: str) -> str:
    if padding not in PADDINGS:
        raise ValueError(f"padding must be one of {PADDINGS}, got {padding!r}")
    return padding


def check_pool_size(size: int) -> int:
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise ValueError(f"pool size must be an int >= 1, got {size!r}")
    return size


def window(pool_size, strides, padding) -> tuple[tuple[int, int], tuple[int, int], str]:
    """Checked pooling arguments, as Keras reads them: ``strides`` None means ``pool_size``."""
    size = _pair(pool_size, "pool_size")
    return size, _pair(size if strides is None else strides, "strides"), check_padding(padding)
