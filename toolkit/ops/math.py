"""Elementwise math: ``keras.ops.numpy``'s (and ``keras.ops.math``'s) unary and binary elementwise functions
(rounding, trigonometric and hyperbolic functions, logarithms and exponentials, predicates such as ``isnan``); the
integer and bitwise ones are in :mod:`toolkit.ops.bits`.

Part of :class:`~toolkit.ops.Ops`: a backend implements the primitives (the abstract methods, listed in
:data:`ARGUMENTS` with how their array arguments are converted) on natives; the composites are written once, here.

Dtypes follow Keras (NumPy's rules, with the computation dtype ``ops.dtype`` for floats made from integers): the
transcendental functions, ``floor``, ``ceil``, ``reciprocal`` and the like compute in a floating dtype; ``round``,
``trunc``, ``sign``, ``fmod``, ``fmax`` and ``fmin`` keep integers; the predicates return booleans. Gradients are
JAX's: piecewise-constant functions (``floor``, ``ceil``, ``round``, ``trunc``, ``sign``) have gradient 0, and
where a function is made of branches (``logaddexp``, ``sinc``, ``divide_no_nan``) the branch not taken gets no NaN
from the other. The toolkit has no complex dtypes: ``real``, ``imag``, ``conj`` and ``angle`` take real arrays and
refuse complex ones with :class:`~toolkit.DTypeError`.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np

from toolkit.errors import DTypeError
from toolkit.ops.tensor import Tensor

#: How each primitive's array arguments are converted (the letters of :data:`~toolkit.ops.interface.ARGUMENTS`).
ARGUMENTS: dict[str, str] = {
    **dict.fromkeys(("arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctanh", "cosh", "sinh", "tan", "expm1",
                     "log1p", "log2", "log10", "erfc", "erfinv", "i0", "floor", "ceil"), "f"),
    "arctan2": "ff", "nextafter": "ff",
    **dict.fromkeys(("_rint", "_sign", "_isnan", "_isinf"), "t"),
}


class MathOps(ABC):
    """The elementwise math ops; mixed into :class:`~toolkit.ops.Ops`."""

    # --- primitives: trigonometric, hyperbolic, exponential and special functions (floating) ---------------------
    @abstractmethod
    def arccos(self, x): """Inverse cosine, in ``[0, pi]``; NaN outside ``[-1, 1]``."""
    @abstractmethod
    def arccosh(self, x): """Inverse hyperbolic cosine; NaN below 1."""
    @abstractmethod
    def arcsin(self, x): """Inverse sine, in ``[-pi/2, pi/2]``; NaN outside ``[-1, 1]``."""
    @abstractmethod
    def arcsinh(self, x): """Inverse hyperbolic sine."""
    @abstractmethod
    def arctan(self, x): """Inverse tangent, in ``(-pi/2, pi/2)``."""
    @abstractmethod
    def arctanh(self, x): """Inverse hyperbolic tangent; ``±inf`` at ``±1``, NaN outside ``[-1, 1]``."""
    @abstractmethod
    def cosh(self, x): """Hyperbolic cosine."""
    @abstractmethod
    def sinh(self, x): """Hyperbolic sine."""
    @abstractmethod
    def tan(self, x): """Tangent (radians)."""
    @abstractmethod
    def arctan2(self, x1, x2):
        """The angle of the point ``(x2, x1)`` in ``[-pi, pi]`` (NumPy's quadrants and signed zeros)."""
    @abstractmethod
    def expm1(self, x): """``exp(x) - 1``, exact for small ``x``."""
    @abstractmethod
    def log1p(self, x): """``log(1 + x)``, exact for small ``x``."""
    @abstractmethod
    def log2(self, x): """Base-2 logarithm."""
    @abstractmethod
    def log10(self, x): """Base-10 logarithm."""
    @abstractmethod
    def erfc(self, x): """The complementary error function ``1 - erf(x)`` (``keras.ops.erfc``), exact in the tail."""
    @abstractmethod
    def erfinv(self, x): """The inverse error function (``keras.ops.erfinv``): ``±inf`` at ``±1``, NaN outside."""
    @abstractmethod
    def i0(self, x): """The modified Bessel function of the first kind, order 0; its gradient is ``i1``."""
    @abstractmethod
    def nextafter(self, x1, x2):
        """The next floating value after ``x1`` towards ``x2``. Its gradient is 1 for ``x1`` and 0 for ``x2``
        (TensorFlow's; JAX defines none)."""

    # --- primitives: rounding (gradient 0) ------------------------------------------------------------------------
    @abstractmethod
    def floor(self, x): """The largest integer ``<= x``, in a floating dtype (Keras: integers become floats)."""
    @abstractmethod
    def ceil(self, x): """The smallest integer ``>= x``, in a floating dtype."""
    @abstractmethod
    def _rint(self, x): """A floating ``x`` rounded to the nearest integer, halves to even (NumPy's ``rint``)."""
    @abstractmethod
    def _sign(self, x): """-1, 0 or 1 of a number's dtype; NaN stays NaN."""

    # --- primitives: predicates ---------------------------------------------------------------------------------
    @abstractmethod
    def _isnan(self, x): """Booleans: ``x`` (floating) is NaN."""
    @abstractmethod
    def _isinf(self, x): """Booleans: ``x`` (floating) is ``+inf`` or ``-inf``."""

    # --- composites: helpers ---------------------------------------------------------------------------------------
    def _as(self, x, dtype: str) -> Tensor:
        return self.wrap(self._native(x, dtype))

    def _floats(self, *xs) -> list[Tensor]:
        """``xs`` promoted together to a floating dtype (the computation dtype where all are integers)."""
        dtype = self._result_dtype(list(xs), floating=True)
        return [self._as(x, dtype) for x in xs]

    def _same(self, *xs) -> list[Tensor]:
        """``xs`` promoted together by the elementwise rules."""
        dtype = self._result_dtype(list(xs))
        return [self._as(x, dtype) for x in xs]

    def _kind(self, x) -> str:
        """``"f"``, ``"i"`` (unsigned too) or ``"b"``: the kind of ``x``'s dtype."""
        kind = np.dtype(self.dtype_of(x)).kind
        return "i" if kind == "u" else kind

    def _real(self, x, name: str):
        """``x``, refused with a DTypeError when complex: the toolkit has no complex dtypes."""
        given = x.native if isinstance(x, Tensor) else x
        dtype = self.native_dtype(given) if self.is_native(given) else np.asarray(given).dtype.name
        if np.dtype(dtype).kind == "c":
            raise DTypeError(f"ops.{name} got x of dtype {dtype}: the toolkit has no complex dtypes; pass a real "
                             "array (booleans, integers or floats)")
        return x

    # --- composites: aliases and simple functions ------------------------------------------------------------------
    def absolute(self, x):
        """``|x|`` (``keras.ops.absolute``, the same as :meth:`abs`)."""
        return self.abs(x)

    def fabs(self, x):
        """``|x|`` in a floating dtype (integers and booleans become floats)."""
        return self.abs(self._floats(x)[0])

    def true_divide(self, x1, x2):
        """``x1 / x2`` (the same as :meth:`divide`)."""
        return self.divide(x1, x2)

    def reciprocal(self, x):
        """``1 / x`` in a floating dtype."""
        return self.divide(1.0, self._floats(x)[0])

    def rsqrt(self, x):
        """``1 / sqrt(x)`` (``keras.ops.rsqrt``)."""
        return self.divide(1.0, self.sqrt(x))

    def exp2(self, x):
        """``2 ** x`` in a floating dtype (exact at integers)."""
        (x,) = self._floats(x)
        return self.power(self._as(2.0, x.dtype), x)

    def deg2rad(self, x):
        """Degrees to radians: ``x * (pi / 180)``, NumPy's constant."""
        return self._floats(x)[0] * (math.pi / 180.0)

    def rad2deg(self, x):
        """Radians to degrees: ``x * (180 / pi)``."""
        return self._floats(x)[0] * (180.0 / math.pi)

    def cbrt(self, x):
        """The real cube root, negative for negative ``x`` (``sign(x) * |x| ** (1/3)``); floating."""
        (x,) = self._floats(x)
        # A zero is its own root, with its sign (the product's sign of -0.0 differs across frameworks).
        return self.where(x == 0, x, self._sign(x) * self.power(self.abs(x), 1.0 / 3.0))

    def sinc(self, x):
        """``sin(pi x) / (pi x)``, 1 at 0 (where its gradient is 0)."""
        (x,) = self._floats(x)
        zero = x == 0.0
        scaled = self.where(zero, 1.0, x * math.pi)  # the branch not taken divides by 1: no NaN in its gradient
        return self.where(zero, 1.0, self.sin(scaled) / scaled)

    def hypot(self, x1, x2):
        """``sqrt(x1**2 + x2**2)`` without overflow or underflow in the squares (scaled by the larger), ``inf``
        where either is infinite (also when the other is NaN), as NumPy."""
        x1, x2 = self._floats(x1, x2)
        a, b = self.abs(x1), self.abs(x2)
        big, small = self.maximum(a, b), self.minimum(a, b)
        safe = self.where(big == 0.0, 1.0, big)
        ratio = small / safe
        found = self.where(big == 0.0, 0.0, big * self.sqrt(1.0 + ratio * ratio))
        return self.where(self.logical_or(self._isinf(x1), self._isinf(x2)), float("inf"), found)

    def heaviside(self, x1, x2):
        """The step function: 0 where ``x1 < 0``, ``x2`` where ``x1 == 0``, 1 where ``x1 > 0``, NaN where ``x1`` is
        NaN; floating."""
        x1, x2 = self._floats(x1, x2)
        step = self.where(x1 < 0.0, 0.0, self.where(x1 > 0.0, 1.0, x2))
        return self.where(self._isnan(x1), x1, step)

    def signbit(self, x):
        """Booleans: the sign bit of ``x`` is set (negative numbers, ``-0.0`` and ``-inf``)."""
        kind = self._kind(x)
        if kind == "b":
            return self.not_equal(x, x)
        if kind == "i":
            return self.less(x, 0)
        x = self.wrap(self._native(x))
        # -0.0 == 0, and 1 / -0.0 is -inf: that tells it from +0.0 (also where denormals are read as zeros).
        return self.logical_or(x < 0.0, self.logical_and(x == 0.0, self.divide(1.0, x) < 0.0))

    def sign(self, x):
        """-1, 0 or 1 in ``x``'s dtype (NaN stays NaN); gradient 0. Booleans are refused, as NumPy refuses them."""
        if self._kind(x) == "b":
            raise DTypeError("ops.sign got x of dtype bool: NumPy and Keras define no sign of booleans; cast it "
                             "with ops.cast(x, 'int32')")
        return self._sign(x)

    # --- composites: rounding ---------------------------------------------------------------------------------------
    def round(self, x, decimals: int = 0):
        """``x`` rounded to ``decimals`` decimal places, halves to even (NumPy's ``round``): floats are scaled by
        ``10**decimals``, rounded and scaled back as NumPy does; integers (and booleans) are kept, or rounded to a
        multiple of ``10**-decimals`` when ``decimals < 0``, exactly. Gradient 0."""
        if not isinstance(decimals, (int, np.integer)) or isinstance(decimals, bool):
            raise TypeError(f"ops.round's decimals must be an int, got {decimals!r}")
        decimals = int(decimals)
        kind = self._kind(x)
        x = self.wrap(self._native(x))
        if kind != "f":
            if decimals >= 0 or kind == "b":
                return x
            step = 10 ** (-decimals)
            low = self._floor_divide(x, step)
            rest = x - low * step
            half = step // 2  # 10**k is even: a tie is rest == half, rounded to the even multiple
            up = self.logical_or(rest > half, self.logical_and(rest == half, self._mod(low, 2) == 1))
            return self.where(up, low + 1, low) * step
        if decimals == 0:
            return self._rint(x)
        if decimals > 0:
            scale = 10.0 ** decimals
            return self._rint(x * scale) / scale
        scale = 10.0 ** (-decimals)
        return self._rint(x / scale) * scale

    def trunc(self, x):
        """``x`` rounded towards 0; integers and booleans are returned as they are (Keras). Gradient 0."""
        x = self.wrap(self._native(x))
        if self._kind(x) != "f":
            return x
        return self.where(x < 0.0, self.ceil(x), self.floor(x))

    def fmod(self, x1, x2):
        """The C remainder of ``x1 / x2``: the sign of ``x1`` (``mod`` has the divisor's), exact; where ``x2`` is 0,
        NaN for floats and 0 for integers (NumPy's). Booleans compute in int32 (Keras)."""
        x1, x2 = self._same(x1, x2)
        if self._kind(x1) == "b":
            x1, x2 = self._as(x1, "int32"), self._as(x2, "int32")
        if self._kind(x1) == "i":
            x2 = self.where(x2 == 0, 1, x2)  # an integer remainder by 0 is 0, as NumPy's (TensorFlow would raise)
        return self._truncated_remainder(x1, x2)

    # --- composites: exponentials and logarithms -----------------------------------------------------------------
    def logaddexp(self, x1, x2):
        """``log(exp(x1) + exp(x2))`` without overflow; its gradient is ``softmax`` of the two (1/2 each at a tie,
        as JAX's)."""
        x1, x2 = self._floats(x1, x2)
        return self._log_add(x1, x2, lambda d: self.log1p(self.exp(d)))

    def logaddexp2(self, x1, x2):
        """``log2(2**x1 + 2**x2)`` without overflow."""
        x1, x2 = self._floats(x1, x2)
        two = self._as(2.0, x1.dtype)
        return self._log_add(x1, x2, lambda d: self.log1p(self.power(two, d)) * (1.0 / math.log(2.0)))

    def _log_add(self, x1, x2, correction):
        """``larger + correction(smaller - larger)``, each branch's argument kept <= 0 so the branch not taken has
        no overflow (hence no NaN) in its gradient; equal infinities give themselves, NaN gives NaN."""
        first = x1 >= x2
        found = self.where(first, x1 + correction(self.minimum(x2 - x1, 0.0)),
                           x2 + correction(self.minimum(x1 - x2, 0.0)))
        return self.where(self.logical_and(self._isinf(x1), x1 == x2), x1, found)

    def ldexp(self, x1, x2):
        """``x1 * 2**x2`` with integer exponents ``x2`` (floats are refused, as Keras refuses them); floating."""
        if self._kind(x2) != "i":
            raise DTypeError(f"ops.ldexp's exponent x2 must be an integer array, got dtype {self.dtype_of(x2)}")
        x1, x2 = self._floats(x1, x2)
        return x1 * self.power(self._as(2.0, x1.dtype), x2)

    # --- composites: maxima, divisions -----------------------------------------------------------------------------
    def fmax(self, x1, x2):
        """Elementwise maximum ignoring NaN: NaN only where both are NaN (``maximum`` propagates it)."""
        x1, x2 = self._same(x1, x2)
        if self._kind(x1) != "f":
            return self.maximum(x1, x2)
        return self.where(self._isnan(x2), x1, self.where(self._isnan(x1), x2, self.maximum(x1, x2)))

    def fmin(self, x1, x2):
        """Elementwise minimum ignoring NaN."""
        x1, x2 = self._same(x1, x2)
        if self._kind(x1) != "f":
            return self.minimum(x1, x2)
        return self.where(self._isnan(x2), x1, self.where(self._isnan(x1), x2, self.minimum(x1, x2)))

    def divide_no_nan(self, x1, x2):
        """``x1 / x2``, and 0 wherever ``x2 == 0`` (even for NaN or infinite ``x1``); gradients 0 there."""
        x1, x2 = self._floats(x1, x2)
        zero = x2 == 0.0
        return self.where(zero, 0.0, x1 / self.where(zero, 1.0, x2))

    # --- composites: predicates ------------------------------------------------------------------------------------
    def isnan(self, x):
        """Booleans: ``x`` is NaN (never for integers and booleans)."""
        return self._isnan(x) if self._kind(x) == "f" else self._all_false(x)

    def isinf(self, x):
        """Booleans: ``x`` is ``+inf`` or ``-inf``."""
        return self._isinf(x) if self._kind(x) == "f" else self._all_false(x)

    def isfinite(self, x):
        """Booleans: ``x`` is neither NaN nor infinite (always for integers and booleans)."""
        if self._kind(x) != "f":
            return self.logical_not(self._all_false(x))
        return self.logical_not(self.logical_or(self._isnan(x), self._isinf(x)))

    def isposinf(self, x):
        """Booleans: ``x`` is ``+inf``."""
        return self.logical_and(self.isinf(x), self.greater(x, 0))

    def isneginf(self, x):
        """Booleans: ``x`` is ``-inf``."""
        return self.logical_and(self.isinf(x), self.less(x, 0))

    def isreal(self, x):
        """Booleans: ``x`` has no imaginary part: true everywhere (the toolkit's arrays are real)."""
        return self.logical_not(self._all_false(self._real(x, "isreal")))

    def _all_false(self, x):
        return self.cast(self.zeros_like(x), "bool")

    def isclose(self, x1, x2, rtol=1e-5, atol=1e-8, equal_nan: bool = False):
        """Booleans: ``|x1 - x2| <= atol + rtol * |x2|`` (NumPy's, not symmetric), compared in a floating dtype;
        equal infinities are close, NaN is close to NaN only with ``equal_nan``."""
        x1, x2 = self._floats(x1, x2)
        finite = self.logical_and(self.isfinite(x1), self.isfinite(x2))
        # Infinities: close when equal. NaN is never equal, not even to itself (which the Theano family's rewrites
        # would fold into True where x1 and x2 are one variable).
        same = self.logical_and(x1 == x2, self.logical_not(self._isnan(x1)))
        close = self.where(finite, self.abs(x1 - x2) <= atol + rtol * self.abs(x2), same)
        if equal_nan:
            close = self.logical_or(close, self.logical_and(self._isnan(x1), self._isnan(x2)))
        return close

    def allclose(self, x1, x2, rtol=1e-5, atol=1e-8, equal_nan: bool = False):
        """A boolean scalar: :meth:`isclose` everywhere (true for empty arrays)."""
        far = self.cast(self.logical_not(self.isclose(x1, x2, rtol, atol, equal_nan)), "int32")
        return self.equal(self.sum(far), 0)

    def nan_to_num(self, x, nan=0.0, posinf=None, neginf=None):
        """``x`` with NaN replaced by ``nan``, ``+inf`` by ``posinf`` and ``-inf`` by ``neginf`` (default: the
        dtype's largest and lowest finite values); integers and booleans are returned as they are."""
        x = self.wrap(self._native(x))
        if self._kind(x) != "f":
            return x
        info = np.finfo(self.dtype_of(x))
        posinf = float(info.max) if posinf is None else posinf
        neginf = float(info.min) if neginf is None else neginf
        infinite = self._isinf(x)
        x = self.where(self._isnan(x), self._as(nan, x.dtype), x)
        x = self.where(self.logical_and(infinite, x > 0.0), self._as(posinf, x.dtype), x)
        return self.where(self.logical_and(infinite, x < 0.0), self._as(neginf, x.dtype), x)

    def logical_xor(self, x1, x2):
        """Booleans: exactly one of ``x1``, ``x2`` is true (non-zero)."""
        return self.not_equal(self._as(x1, "bool"), self._as(x2, "bool"))

    # --- composites: complex parts of real arrays -------------------------------------------------------------------
    def real(self, x):
        """The real part: ``x`` itself (complex arrays are refused with DTypeError)."""
        return self.wrap(self._native(self._real(x, "real")))

    def imag(self, x):
        """The imaginary part of a real array: zeros of its shape and dtype."""
        return self.zeros_like(self._real(x, "imag"))

    def conjugate(self, x):
        """The complex conjugate of a real array: ``x`` itself."""
        return self.wrap(self._native(self._real(x, "conjugate")))

    def conj(self, x):
        """The same as :meth:`conjugate`."""
        return self.wrap(self._native(self._real(x, "conj")))

    def angle(self, x):
        """The argument of a real number: 0 for ``x >= +0.0``, ``pi`` for negative ``x`` and ``-0.0`` (NumPy's
        ``arctan2(0, x)``); floating, gradient 0."""
        (x,) = self._floats(self._real(x, "angle"))
        return self.arctan2(self.zeros_like(x), x)
