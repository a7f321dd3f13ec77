"""The integer and bitwise elementwise ops of ``keras.ops.numpy``: ``gcd``, ``lcm``, ``bitwise_and``/``or``/``xor``,
``bitwise_invert``/``not`` and the shifts.

Part of :class:`~toolkit.ops.Ops`: a backend implements the primitives (the abstract methods, listed in
:data:`ARGUMENTS` with how their array arguments are converted) on natives; the composites are written once, here.
Operands are promoted together (NumPy's rules); floats are refused with :class:`~toolkit.DTypeError`, booleans are
taken where NumPy takes them (``bitwise_and`` is then ``logical_and``). No gradients: the results are integers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from toolkit.errors import DTypeError
from toolkit.ops.tensor import Tensor

#: How each primitive's array arguments are converted (the letters of :data:`~toolkit.ops.interface.ARGUMENTS`).
ARGUMENTS: dict[str, str] = {"_invert": "t", **dict.fromkeys(("_bitwise", "_shift", "_gcd"), "ee")}


class BitOps(ABC):
    """The integer and bitwise ops; mixed into :class:`~toolkit.ops.Ops`."""

    # --- primitives ------------------------------------------------------------------------------------------------
    @abstractmethod
    def _bitwise(self, x1, x2, operation: str):
        """``"and"``, ``"or"`` or ``"xor"`` of the bits of two integer arrays of one dtype."""
    @abstractmethod
    def _invert(self, x): """The bits of an integer array flipped (``~x``)."""
    @abstractmethod
    def _shift(self, x, y, direction: str):
        """``x << y`` (``direction="left"``) or ``x >> y`` (arithmetic, ``"right"``) on integers of one dtype, with
        every ``y`` already in ``[0, bits)``."""
    @abstractmethod
    def _gcd(self, x1, x2): """The greatest common divisor of integers of one dtype, always ``>= 0``."""

    # --- composites ------------------------------------------------------------------------------------------------
    def gcd(self, x1, x2):
        """The greatest common divisor (non-negative; ``gcd(0, 0) == 0``) of integer arrays."""
        return self._gcd(*self._integers("gcd", x1, x2))

    def lcm(self, x1, x2):
        """The least common multiple (non-negative; 0 where either is 0) of integer arrays."""
        x1, x2 = self._integers("lcm", x1, x2)
        divisor = self._gcd(x1, x2)
        safe = self.where(divisor == 0, 1, divisor)
        return self.where(divisor == 0, 0, self.abs(self._floor_divide(x1, safe) * x2))

    def bitwise_and(self, x, y):
        """The bits of ``x`` and ``y`` (integers; booleans give ``logical_and``)."""
        return self._bits(x, y, "and")

    def bitwise_or(self, x, y):
        """The bits of ``x`` or ``y``."""
        return self._bits(x, y, "or")

    def bitwise_xor(self, x, y):
        """The bits of ``x`` xor ``y``."""
        return self._bits(x, y, "xor")

    def _bits(self, x, y, operation: str):
        x, y = self._same(x, y)
        if self._kind(x) == "b":
            return {"and": self.logical_and, "or": self.logical_or, "xor": self.not_equal}[operation](x, y)
        x, y = self._integers(f"bitwise_{operation}", x, y)
        return self._bitwise(x, y, operation)

    def bitwise_invert(self, x):
        """``~x``: the bits of integers flipped; booleans negated."""
        if self._kind(x) == "b":
            return self.logical_not(x)
        (x,) = self._integers("bitwise_invert", x)
        return self._invert(x)

    def bitwise_not(self, x):
        """The same as :meth:`bitwise_invert`."""
        return self.bitwise_invert(x)

    def bitwise_left_shift(self, x, y):
        """``x << y`` on integers (a Python int ``y`` keeps ``x``'s dtype); 0 where ``y`` is negative or not below
        the dtype's width, as NumPy and JAX (TensorFlow's own shift is undefined there)."""
        return self._shifted(x, y, "left")

    def left_shift(self, x, y):
        """The same as :meth:`bitwise_left_shift`."""
        return self.bitwise_left_shift(x, y)

    def bitwise_right_shift(self, x, y):
        """``x >> y`` on integers, arithmetic (the sign fills); where ``y`` is negative or not below the width, 0
        for ``x >= 0`` and -1 for ``x < 0``."""
        return self._shifted(x, y, "right")

    def right_shift(self, x, y):
        """The same as :meth:`bitwise_right_shift`."""
        return self.bitwise_right_shift(x, y)

    def _shifted(self, x, y, direction: str):
        x, y = self._integers(f"bitwise_{direction}_shift", x, y)
        bits = np.dtype(self.dtype_of(x)).itemsize * 8
        outside = self.logical_or(y < 0, y >= bits)
        shifted = self._shift(x, self.where(outside, 0, y), direction)
        fill = 0 if direction == "left" else self._as(self.where(x < 0, -1, 0), self.dtype_of(x))
        return self.where(outside, fill, shifted)

    def _integers(self, name: str, *xs) -> list[Tensor]:
        """``xs`` promoted together, refused unless integers (booleans too where ``name`` takes them)."""
        xs = self._same(*xs)
        if self._kind(xs[0]) != "i":
            raise DTypeError(f"ops.{name} takes integer arrays, got dtypes "
                             f"{[self.dtype_of(x) for x in xs]}; cast them with ops.cast(x, 'int32')")
        return xs
