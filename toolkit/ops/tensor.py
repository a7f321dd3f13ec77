"""What Python operators and constants mean inside model code: one set of rules for every backend.

Model code receives its parameters and inputs as :class:`Tensor`, a thin wrapper around the backend's native array
(a ``tf.Tensor``, an Aesara variable) that exists only while the code is traced; the compiled functions run the
frameworks' own arrays. Its Python operators (``+ - * / // % ** @``, unary ``-``, ``abs``, comparisons, ``& | ~``,
basic indexing) are :class:`~toolkit.ops.Ops` calls, so they follow the rules below on every backend, where the
frameworks' own operators disagree (with them, ``(a > 0) * a`` is a bool tensor on TensorFlow and the ReLU on Aesara;
a float64 NumPy constant keeps a float32 model float32 on TensorFlow and makes it float64 on Aesara).

The rules (:func:`result_dtype`), NumPy's with the computation dtype in charge of constants, as Keras and JAX do:

- comparisons return booleans; a boolean in arithmetic counts as 0 or 1 of the other operand's dtype;
- a Python number is weak: it takes the dtype of the tensor it meets; a float meeting an integer or boolean tensor
  gives the computation dtype (``ops.dtype``);
- a floating NumPy array or scalar is a constant of the computation dtype: a float64 constant never turns a float32
  model into float64; an integer NumPy constant is int32 (the toolkit's label dtype), a boolean one stays boolean;
- two tensors: a float with an integer or boolean gives the float; two floats or two integers give the wider;
- ``/`` is a true division: integers divide into the computation dtype (``//`` and ``%`` keep integers);
- the truth value of a tensor (``if x > 0:``) is unknown while tracing: a TypeError says to use ``ops.where``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from toolkit.errors import DTypeError

if TYPE_CHECKING:
    from toolkit.ops.interface import Ops

#: The dtype integer constants (and indices) get on every backend.
INT_DTYPE = "int32"
#: Dtype kinds, narrowest first: the result of mixing kinds is the widest kind present.
_KINDS = ("b", "i", "f")


class Tensor:
    """A backend array while model code is traced. ``shape``, ``dtype`` and ``ndim`` read the native array;
    operators call :class:`Ops`. Made by :meth:`Ops.wrap`, not by model code.

    Args:
        native: the framework's array.
        ops: the :class:`Ops` whose operations the operators call.
    """

    __slots__ = ("native", "ops")
    __array_ufunc__ = None  # NumPy defers to our operators: np.float64(2) * t is t.__rmul__
    __hash__ = object.__hash__  # == builds a comparison, so identity hashing

    def __init__(self, native: Any, ops: Ops) -> None:
        self.native, self.ops = native, ops

    @property
    def shape(self) -> tuple[int | None, ...]:
        """The static shape: a tuple of ints, None where the size is not known while tracing."""
        return self.ops.shape(self)

    @property
    def dtype(self) -> str:
        """The dtype's NumPy name (``"float32"``, ``"int32"``, ``"bool"``...)."""
        return self.ops.dtype_of(self)

    @property
    def ndim(self) -> int:
        """The rank, ``len(shape)``."""
        return len(self.shape)

    def __len__(self) -> int:
        first = self.shape[0] if self.shape else None
        if first is None:
            raise TypeError(f"len() of a tensor of shape {self.shape}: axis 0 has no static size")
        return first

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __bool__(self) -> bool:
        raise TypeError("the truth value of a tensor is not known while the model is traced (an `if` or `and` on "
                        "a tensor); use ops.where(condition, x1, x2), or ops.logical_and/logical_or")

    def __getitem__(self, key):
        return self.ops.getitem(self, key)

    def __repr__(self) -> str:
        return f"Tensor(shape={self.shape}, dtype={self.dtype}, native={type(self.native).__name__})"

    def __neg__(self): return self.ops.negative(self)
    def __pos__(self): return self
    def __abs__(self): return self.ops.abs(self)
    def __invert__(self): return self.ops.logical_not(self)
    def __add__(self, other): return self.ops.add(self, other)
    def __radd__(self, other): return self.ops.add(other, self)
    def __sub__(self, other): return self.ops.subtract(self, other)
    def __rsub__(self, other): return self.ops.subtract(other, self)
    def __mul__(self, other): return self.ops.multiply(self, other)
    def __rmul__(self, other): return self.ops.multiply(other, self)
    def __truediv__(self, other): return self.ops.divide(self, other)
    def __rtruediv__(self, other): return self.ops.divide(other, self)
    def __floordiv__(self, other): return self.ops.floor_divide(self, other)
    def __rfloordiv__(self, other): return self.ops.floor_divide(other, self)
    def __mod__(self, other): return self.ops.mod(self, other)
    def __rmod__(self, other): return self.ops.mod(other, self)
    def __pow__(self, other): return self.ops.power(self, other)
    def __rpow__(self, other): return self.ops.power(other, self)
    def __matmul__(self, other): return self.ops.matmul(self, other)
    def __rmatmul__(self, other): return self.ops.matmul(other, self)
    def __lt__(self, other): return self.ops.less(self, other)
    def __le__(self, other): return self.ops.less_equal(self, other)
    def __gt__(self, other): return self.ops.greater(self, other)
    def __ge__(self, other): return self.ops.greater_equal(self, other)
    def __eq__(self, other): return self.ops.equal(self, other)  # type: ignore[override]
    def __ne__(self, other): return self.ops.not_equal(self, other)  # type: ignore[override]
    def __and__(self, other): return self.ops.logical_and(self, other)
    def __rand__(self, other): return self.ops.logical_and(other, self)
    def __or__(self, other): return self.ops.logical_or(self, other)
    def __ror__(self, other): return self.ops.logical_or(other, self)


def is_weak(value: Any) -> bool:
    """A Python number (bool, int, float): it takes the dtype of what it meets."""
    return isinstance(value, (bool, int, float)) and not isinstance(value, np.generic)


def constant_dtype(value: Any, computation: str) -> str:
    """The dtype a NumPy constant (array or scalar) gets: floating ones the computation dtype, integers int32.

    Args:
        value: the constant.
        computation: the computation's floating dtype.

    Raises:
        DTypeError: a constant that is not boolean, integer or floating.
    """
    kind = np.asarray(value).dtype.kind
    if kind == "f":
        return computation
    if kind in "iu":
        return INT_DTYPE
    if kind == "b":
        return "bool"
    raise DTypeError(f"a constant of dtype {np.asarray(value).dtype} has no place in model code; expected booleans, "
                     "integers or floats")


def _weak_dtype(value: Any) -> str:
    return "bool" if isinstance(value, bool) else INT_DTYPE if isinstance(value, int) else "float64"


def result_dtype(strong: Iterable[str], weak: Iterable[Any], computation: str) -> str:
    """The dtype an elementwise op computes in, from its tensors' dtypes (``strong``, NumPy constants already given
    theirs by :func:`constant_dtype`) and its Python numbers (``weak``); see the module doc."""
    strong = [np.dtype(d) for d in strong]
    weak_kinds = [np.dtype(_weak_dtype(w)).kind for w in weak]
    if not strong:
        kind = max(weak_kinds, key=_KINDS.index)
        return {"b": "bool", "i": INT_DTYPE, "f": computation}[kind]
    kind = max((d.kind if d.kind != "u" else "i" for d in strong), key=_KINDS.index)
    widest = max((d for d in strong if (d.kind if d.kind != "u" else "i") == kind), key=lambda d: d.itemsize)
    if weak_kinds and _KINDS.index(max(weak_kinds, key=_KINDS.index)) > _KINDS.index(kind):
        return INT_DTYPE if max(weak_kinds, key=_KINDS.index) == "i" else computation
    return widest.name
