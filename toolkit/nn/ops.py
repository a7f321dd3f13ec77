"""The neutral op namespace that model code is written against.

A model's ``forward(ops, params, x)`` and ``loss(ops, outputs, y)`` call only these methods and Python arithmetic
(``+ - * / ** @``, unary minus, comparisons are not part of the contract). Each backend implements the class with its
framework's native ops, so one Python function builds a TensorFlow computation or an Aesara graph.

Shapes follow NumPy: axis numbers may be negative, ``keepdims`` keeps reduced axes with size 1. Basic indexing
with ints and slices (``x[:, t]``, ``z[:, :units]``) is part of the contract too.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

Tensor = Any  # a backend's native array: tf.Tensor, or an Aesara symbolic variable


PADDINGS = ("valid", "same")


def same_padding(kernel: int) -> tuple[int, int]:
    """Zeros before and after an axis for "same" padding at stride 1, as TensorFlow places them."""
    return (kernel - 1) // 2, kernel - 1 - (kernel - 1) // 2


def check_padding(padding: str) -> str:
    if padding not in PADDINGS:
        raise ValueError(f"padding must be one of {PADDINGS}, got {padding!r}")
    return padding


def check_pool_size(size: int) -> int:
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise ValueError(f"pool size must be an int >= 1, got {size!r}")
    return size


class Ops(ABC):
    """Neutral ops. ``dtype`` is the floating dtype of the computation (``"float32"`` or ``"float64"``)."""

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype

    # --- linear algebra and activations --------------------------------------------------------------------------
    @abstractmethod
    def matmul(self, a: Tensor, b: Tensor) -> Tensor:
        """Matrix product of 2-D ``a`` and ``b``."""

    @abstractmethod
    def relu(self, x: Tensor) -> Tensor:
        """``max(x, 0)``, with gradient 0 at ``x == 0`` on every backend."""

    @abstractmethod
    def tanh(self, x: Tensor) -> Tensor:
        """Hyperbolic tangent."""

    @abstractmethod
    def sigmoid(self, x: Tensor) -> Tensor:
        """``1 / (1 + exp(-x))``."""

    @abstractmethod
    def softmax(self, x: Tensor, axis: int = -1) -> Tensor:
        """``exp(x) / sum(exp(x), axis)``, computed stably."""

    @abstractmethod
    def log_softmax(self, x: Tensor, axis: int = -1) -> Tensor:
        """``x - logsumexp(x, axis)``, computed stably."""

    # --- elementwise -----------------------------------------------------------------------------------------------
    @abstractmethod
    def exp(self, x: Tensor) -> Tensor:
        """Elementwise ``e**x``."""

    @abstractmethod
    def log(self, x: Tensor) -> Tensor:
        """Elementwise natural logarithm."""

    @abstractmethod
    def sqrt(self, x: Tensor) -> Tensor:
        """Elementwise square root (used by the optimizers)."""

    @abstractmethod
    def square(self, x: Tensor) -> Tensor:
        """Elementwise ``x * x``."""

    # --- reductions ------------------------------------------------------------------------------------------------
    @abstractmethod
    def sum(self, x: Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """Sum over ``axis`` (all axes when None)."""

    @abstractmethod
    def mean(self, x: Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """Mean over ``axis`` (all axes when None)."""

    @abstractmethod
    def max(self, x: Tensor, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """Maximum over ``axis`` (all axes when None). Where several entries tie for the maximum, frameworks split
        the gradient differently (TensorFlow shares it, Aesara gives each the whole); ties at a ReLU's zero, the
        common case, get no gradient on either."""

    # --- convolution and pooling (NHWC) ----------------------------------------------------------------------------
    @abstractmethod
    def conv2d(self, x: Tensor, kernel: Tensor, padding: str = "valid") -> Tensor:
        """2-D cross-correlation, stride 1, as ``tf.nn.conv2d``.

        Args:
            x: ``[batch, height, width, in_channels]``.
            kernel: ``[kernel_height, kernel_width, in_channels, out_channels]``.
            padding: ``"valid"`` (no padding: the output shrinks by ``kernel - 1``) or ``"same"`` (zero padding so
                the output keeps the input's size; an even kernel pads one more row/column at the bottom/right).
        """

    @abstractmethod
    def max_pool2d(self, x: Tensor, size: int) -> Tensor:
        """Max pooling over ``size x size`` windows with stride ``size`` ("valid": rows/columns that do not fill a
        window are dropped), NHWC."""

    # --- shapes ----------------------------------------------------------------------------------------------------
    @abstractmethod
    def reshape(self, x: Tensor, shape: Sequence[int]) -> Tensor:
        """Reshape; one entry of ``shape`` may be -1."""

    @abstractmethod
    def concat(self, xs: Sequence[Tensor], axis: int = 0) -> Tensor:
        """Join arrays along an existing axis."""

    @abstractmethod
    def stack(self, xs: Sequence[Tensor], axis: int = 0) -> Tensor:
        """Join arrays along a new axis."""

    @abstractmethod
    def squeeze(self, x: Tensor, axis: int | None = None) -> Tensor:
        """Drop axis ``axis`` (which must have size 1), or every size-1 axis when None."""

    # --- constructors ----------------------------------------------------------------------------------------------
    @abstractmethod
    def ones_like(self, x: Tensor) -> Tensor:
        """Ones with the shape and dtype of ``x``."""

    @abstractmethod
    def zeros_like(self, x: Tensor) -> Tensor:
        """Zeros with the shape and dtype of ``x``."""

    @abstractmethod
    def one_hot(self, indices: Tensor, depth: int) -> Tensor:
        """``indices`` (ints) as one-hot rows of length ``depth`` in ``self.dtype``; out-of-range rows are all 0."""

    # --- checks ----------------------------------------------------------------------------------------------------
    @abstractmethod
    def all_finite(self, xs: Sequence[Tensor]) -> Tensor:
        """A boolean scalar: no NaN or Inf in any of ``xs`` (used by the training step's NaN policy)."""
