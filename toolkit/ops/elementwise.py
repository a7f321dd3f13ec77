"""Elementwise arithmetic, comparisons, selection and the basic activations of :class:`~toolkit.ops.Ops`
(``add`` ... ``where``, ``clip``, ``relu`` ... ``softplus``, ``softmax``, ``log_softmax``): NumPy broadcasting, dtypes
by the rules of :mod:`toolkit.ops.tensor`. A backend implements the primitives (abstract here) on natives.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from toolkit.errors import ArgumentError, DTypeError, ShapeError
from toolkit.ops.tensor import INT_DTYPE, Tensor

Native = Any  # a backend's native array
Axis = int | Sequence[int] | None

#: How each primitive's array arguments are converted (the letters of :data:`~toolkit.ops.interface.ARGUMENTS`).
ARGUMENTS: dict[str, str] = {
    **dict.fromkeys(("add", "_subtract", "multiply", "_floor_divide", "_mod", "power", "maximum", "minimum", "greater",
                     "greater_equal", "less", "less_equal", "equal", "not_equal"), "ee"),
    "divide": "ff", "logical_and": "bb", "logical_or": "bb", "logical_not": "b", "_where": "bee",
    **dict.fromkeys(("negative", "abs", "square", "relu"), "e"),
    **dict.fromkeys(("exp", "log", "sqrt", "tanh", "sigmoid", "erf", "sin", "cos", "_softmax", "_log_softmax"), "f"),
}


class ElementwiseOps(ABC):
    """Mixed into :class:`~toolkit.ops.Ops`."""


    @abstractmethod
    def add(self, x1, x2): """``x1 + x2``."""
    def subtract(self, x1, x2):
        """``x1 - x2``.

        Raises:
            DTypeError: both operands boolean (NumPy and Keras refuse it: ``logical_xor`` is the boolean
                difference).
        """
        if self._result_dtype([x1, x2]) == "bool":
            raise DTypeError("ops.subtract of booleans: NumPy and Keras refuse it; use ops.logical_xor, or cast "
                             "the operands to an integer dtype first")
        return self._subtract(x1, x2)

    @abstractmethod
    def _subtract(self, x1, x2): """The difference under :meth:`subtract`, operands promoted, not both boolean."""
    @abstractmethod
    def multiply(self, x1, x2): """``x1 * x2``."""
    @abstractmethod
    def divide(self, x1, x2): """``x1 / x2``, a true division (integers divide into the computation dtype)."""
    def floor_divide(self, x1, x2):
        """``x1 // x2``, rounded towards minus infinity as NumPy's ``divmod`` gives it (``keras.ops.floor_divide``
        on NumPy and JAX): floats from the exact remainder (``1.0 // 0.1`` is 9, ``-0.5 // inf`` is -1; a zero
        quotient has the sign of ``x1 / x2``), ``x // 0`` is ``x / 0`` for floats and 0 for integers."""
        x1, x2, kind = self._division_operands(x1, x2)
        if kind == "f":
            return self._float_divmod(x1, x2)[0]
        if kind == "b":
            return self._floor_divide(x1, x2)
        by_zero = x2 == 0
        return self.where(by_zero, 0, self._floor_divide(x1, self.where(by_zero, 1, x2)))

    def mod(self, x1, x2):
        """``x1 % x2`` with the sign of the divisor, as NumPy's ``divmod`` (``keras.ops.mod``): ``x1 - (x1 // x2) *
        x2`` exactly (``-0.5 % inf`` is inf); ``x % 0`` is NaN for floats and 0 for integers."""
        x1, x2, kind = self._division_operands(x1, x2)
        if kind == "f":
            return self._float_divmod(x1, x2)[1]
        if kind == "b":
            return self._mod(x1, x2)
        by_zero = x2 == 0
        return self.where(by_zero, 0, self._mod(x1, self.where(by_zero, 1, x2)))

    def _division_operands(self, x1, x2) -> tuple[Tensor, Tensor, str]:
        dtype = self._result_dtype([x1, x2])
        return self._tensor(x1, dtype), self._tensor(x2, dtype), np.dtype(dtype).kind

    def _truncated_remainder(self, x1, x2):
        """C's ``fmod`` of floats, exact: the remainder of ``|x1| / |x2|`` with ``x1``'s sign (NaN for a zero or NaN
        divisor, or an infinite ``x1``)."""
        remainder = self._mod(self.abs(x1), self.abs(x2))  # of two non-negatives: exactly fmod's magnitude
        return self.where(x1 < 0, -remainder, remainder)

    def _float_divmod(self, x1, x2):
        """``(x1 // x2, x1 % x2)`` of floats as NumPy's ``npy_divmod``: the quotient of ``x1`` less its exact
        remainder, so it is an integer before rounding (``floor(x1 / x2)`` rounds the quotient first: ``floor(1.0 /
        0.1)`` is 10)."""
        remainder = self._truncated_remainder(x1, x2)
        quotient = (x1 - remainder) / x2
        # The remainder takes the divisor's sign: one divisor more, one less in the quotient.
        other_sign = self.logical_and(remainder != 0, (x2 < 0) != (remainder < 0))
        remainder = self.where(other_sign, remainder + x2, remainder)
        quotient = self.where(other_sign, quotient - 1.0, quotient)
        floor = self.floor(quotient)  # of a near-integer: the nearest integer, as NumPy rounds it
        floor = self.where(quotient - floor > 0.5, floor + 1.0, floor)
        # A zero quotient has the sign of x1 / x2 (|x1 / x2| < 1 there: truncated, it is that signed zero).
        ratio = x1 / x2
        floor = self.where(quotient == 0, self.trunc(ratio), floor)
        return self.where(x2 == 0, ratio, floor), remainder

    @abstractmethod
    def _floor_divide(self, x1, x2): """The framework's floor division, operands promoted (not by integer 0)."""
    @abstractmethod
    def _mod(self, x1, x2): """The framework's remainder with the divisor's sign (not by integer 0)."""
    @abstractmethod
    def power(self, x1, x2): """``x1 ** x2``."""
    @abstractmethod
    def negative(self, x): """``-x``."""
    @abstractmethod
    def abs(self, x): """``|x|``; its gradient at 0 is 0 on every backend."""
    @abstractmethod
    def maximum(self, x1, x2): """Elementwise maximum; at a tie the whole gradient goes to ``x1`` on every backend."""
    @abstractmethod
    def minimum(self, x1, x2): """Elementwise minimum; at a tie the whole gradient goes to ``x1``."""
    @abstractmethod
    def greater(self, x1, x2): """``x1 > x2``, booleans."""
    @abstractmethod
    def greater_equal(self, x1, x2): """``x1 >= x2``, booleans."""
    @abstractmethod
    def less(self, x1, x2): """``x1 < x2``, booleans."""
    @abstractmethod
    def less_equal(self, x1, x2): """``x1 <= x2``, booleans."""
    @abstractmethod
    def equal(self, x1, x2): """``x1 == x2``, booleans."""
    @abstractmethod
    def not_equal(self, x1, x2): """``x1 != x2``, booleans."""
    @abstractmethod
    def logical_and(self, x1, x2): """Booleans: both true."""
    @abstractmethod
    def logical_or(self, x1, x2): """Booleans: either true."""
    @abstractmethod
    def logical_not(self, x): """Booleans: not ``x``."""

    def where(self, condition, x1=None, x2=None):
        """``x1`` where ``condition`` holds, else ``x2`` (all broadcast; ``keras.ops.where``). With ``condition``
        alone, the indices of its nonzero entries, one int32 array per axis (``numpy.nonzero``): their number
        depends on the values, so only a constant ``condition`` (a NumPy array or a list) is accepted.

        Raises:
            ArgumentError: only one of ``x1`` and ``x2`` given.
            ShapeError: ``where(condition)`` of a tensor (its result's shape would depend on its values).
        """
        if x1 is None and x2 is None:
            if isinstance(condition, Tensor) or self.is_native(condition):
                raise ShapeError(f"where(condition) of a tensor (shape {self.shape(condition)}): the number of "
                                 "indices depends on its values, and compiled steps need static shapes; give x1 "
                                 "and x2, or a NumPy condition")
            return tuple(self.wrap(self.constant(np.asarray(i, INT_DTYPE))) for i in np.nonzero(condition))
        if x1 is None or x2 is None:
            raise ArgumentError(f"where needs both x1 and x2 or neither; got x1={x1!r}, x2={x2!r}")
        return self._where(condition, x1, x2)

    @abstractmethod
    def _where(self, condition, x1, x2): """The select under :meth:`where`."""

    def clip(self, x, x_min, x_max):
        """``x`` limited to ``[x_min, x_max]`` (``keras.ops.clip``): ``minimum(maximum(x, x_min), x_max)`` in
        ``x``'s dtype (booleans give int32, as Keras)."""
        dtype = self.dtype_of(x)
        dtype = INT_DTYPE if dtype == "bool" else dtype
        return self.cast(self.minimum(self.maximum(x, x_min), x_max), dtype)

    # --- activations and elementwise functions ----------------------------------------------------------------------
    @abstractmethod
    def relu(self, x): """``max(x, 0)``, with gradient 0 at ``x == 0`` on every backend."""
    @abstractmethod
    def tanh(self, x): """Hyperbolic tangent."""
    @abstractmethod
    def sigmoid(self, x): """``1 / (1 + exp(-x))``."""
    @abstractmethod
    def exp(self, x): """Elementwise ``e**x``."""
    @abstractmethod
    def log(self, x): """Elementwise natural logarithm."""
    @abstractmethod
    def sqrt(self, x): """Elementwise square root."""
    @abstractmethod
    def square(self, x): """Elementwise ``x * x``."""
    @abstractmethod
    def erf(self, x): """The error function."""

    @abstractmethod
    def sin(self, x): """Elementwise sine (radians)."""

    @abstractmethod
    def cos(self, x): """Elementwise cosine (radians)."""

    def softmax(self, x, axis: Axis = -1):
        """``exp(x) / sum(exp(x), axis)``, computed stably (``keras.ops.softmax``): ``axis`` an int, a tuple of
        axes normalised together, or None for the whole array."""
        x, axes = self._floating(x), None
        axes = self._axes(x, axis, "softmax")
        if len(axes) == 1:
            return self._softmax(x, axes[0])
        shifted = x - self._finite_peak(x, axes)
        e = self.exp(shifted)
        return e / self.sum(e, axis=axes, keepdims=True)

    def log_softmax(self, x, axis: Axis = -1):
        """``x - logsumexp(x, axis)``, computed stably (``keras.ops.log_softmax``; ``axis`` as in :meth:`softmax`)."""
        x = self._floating(x)
        axes = self._axes(x, axis, "log_softmax")
        if len(axes) == 1:
            return self._log_softmax(x, axes[0])
        shifted = x - self._finite_peak(x, axes)
        return shifted - self.log(self.sum(self.exp(shifted), axis=axes, keepdims=True))

    @abstractmethod
    def _softmax(self, x, axis: int): """The framework's softmax along one (non-negative) axis."""
    @abstractmethod
    def _log_softmax(self, x, axis: int): """The framework's log-softmax along one (non-negative) axis."""

    def _finite_peak(self, x, axes):
        """The maximum over ``axes`` (kept), 0 where it is infinite: what a stable softmax subtracts (0 over empty
        axes too, whose softmax is empty, as JAX's)."""
        peak = self.max(x, axis=axes, keepdims=True, initial=-float("inf"))
        return self.stop_gradient(self.where(self.abs(peak) < float("inf"), peak, 0.0))

    def gelu(self, x, approximate: bool = True):
        """Gaussian error linear unit (``keras.ops.gelu``; Keras' default is the tanh approximation):
        exact ``x/2 * (1 + erf(x / sqrt(2)))``; approximate ``x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))``."""
        x = self.wrap(self._native(x, self._result_dtype([x], floating=True)))
        if approximate:
            return 0.5 * x * (1.0 + self.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))
        return 0.5 * x * (1.0 + self.erf(x / math.sqrt(2.0)))

    def silu(self, x):
        """``x * sigmoid(x)`` (``keras.ops.silu``, also called swish)."""
        return x * self.sigmoid(x)

    def softplus(self, x):
        """``log(1 + exp(x))`` (``keras.ops.softplus``), computed as ``x + log1p(exp(-x))`` for ``x > 0`` and
        ``log1p(exp(x))`` otherwise: large ``|x|`` neither overflows nor rounds to 0 (``softplus(-40)`` is 4.2e-18),
        and the gradient is ``sigmoid(x)`` everywhere, 0.5 at 0 (a ``relu``/``abs`` form gives 0 there)."""
        x = self._floating(x)
        positive = x > 0
        return self.where(positive, x, 0.0) + self.log1p(self.exp(self.where(positive, -x, x)))
