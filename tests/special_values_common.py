"""What the special-value table (:mod:`tests.special_values_table`) is made of: the inputs of each kind, a
:class:`Case`, the constructors of cases and the NumPy helpers that give Keras' semantics (integers and booleans into
float ops give the computation dtype, index results are int32, sums keep int32)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import scipy.special

NAN, INF = float("nan"), float("inf")
#: The kinds of inputs, each an ``x`` and a ``y``.
KINDS = ("float", "empty", "int", "bool")
#: Pairs ``(x, y)`` of the float kind, rows of ``x`` chosen for reductions: a NaN, infinities of both signs, only
#: zeros of both signs, an infinity among finite values, finite values only.
_PAIRS = [
    [(NAN, 1.0), (1.0, NAN), (2.0, 3.0), (-0.5, INF)],
    [(INF, INF), (INF, -INF), (-INF, INF), (-INF, -INF)],
    [(INF, 0.0), (-INF, -0.0), (0.0, INF), (-0.0, -INF)],
    [(-0.0, 0.0), (0.0, -0.0), (0.0, 0.0), (-0.0, -0.0)],
    [(1.0, 0.0), (-1.0, -0.0), (INF, 2.0), (2.0, -3.0)],
    [(0.5, -1.5), (-2.5, 2.0), (2.0, -0.5), (3.0, 0.5)],
]
INPUTS: dict[str, dict[str, np.ndarray]] = {
    "float": {"x": np.array([[p[0] for p in row] for row in _PAIRS]),
              "y": np.array([[p[1] for p in row] for row in _PAIRS])},
    # An empty axis (x's last) and an empty vector; x's first axis is not empty, so reductions over it are arrays
    # of shape (0,).
    "empty": {"x": np.zeros((2, 0)), "y": np.zeros((0,))},
    # Negative values, a zero in x; y (int64) has none, so integer division and remainders stay defined.
    "int": {"x": np.array([[-3, -1, 0, 1], [2, 7, -8, 5]], np.int32),
            "y": np.array([[2, -2, 3, 1], [-1, 4, 3, 2]], np.int64)},
    "bool": {"x": np.array([[True, False, True, False], [True, True, False, False]]),
             "y": np.array([[True, True, False, False], [False, True, False, True]])},
}
ALL = KINDS
NUMERIC = ("float", "empty", "int")
FLOATS = ("float", "empty")


@dataclass(frozen=True)
class Case:
    """One op on the kinds of inputs it applies to: ``call(ops, x, y)`` equals ``reference(x, y)`` for each kind in
    ``kinds``, and raises ``refuses[kind]`` (a toolkit error) for each kind there."""

    op: str
    call: Callable
    reference: Callable
    kinds: tuple[str, ...] = ALL
    refuses: Mapping[str, type] = field(default_factory=dict)
    variant: str = ""
    #: The reference sees float inputs in the computation dtype (results that depend on it: its largest value,
    #: its next float, a clip to ``1 - EPSILON`` rounded in it).
    in_dtype: bool = False
    #: Zeros must have the reference's sign (off for ops whose zeros' sign Keras' backends do not agree on).
    signed_zeros: bool = True

    @property
    def id(self) -> str:
        return f"{self.op}[{self.variant}]" if self.variant else self.op


def _f(a: np.ndarray) -> np.ndarray:
    """``a`` as Keras' float ops see it: integers and booleans become floats (the computation dtype)."""
    return np.asarray(a, np.float64) if np.asarray(a).dtype.kind in "biu" else np.asarray(a)


def _errstate(fn: Callable) -> Callable:
    def quiet(*args, **kwargs):
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)
    return quiet


def unary(op: str, reference: Callable, kinds=ALL, floating: bool = True, refuses=None, variant="",
          options=None, **kwargs) -> Case:
    """``op(x, **kwargs)`` and ``op(y, **kwargs)``; ``floating``: the reference sees integers as floats;
    ``options``: the Case's other fields."""
    prepare = _f if floating else np.asarray
    return Case(op, lambda o, x, y: (getattr(o, op)(x, **kwargs), getattr(o, op)(y, **kwargs)),
                _errstate(lambda x, y: (reference(prepare(x)), reference(prepare(y)))), kinds, refuses or {},
                variant, **(options or {}))


def binary(op: str, reference: Callable, kinds=ALL, floating: bool = False, refuses=None, variant="",
           options=None, **kwargs) -> Case:
    """``op(x, y, **kwargs)``; ``floating``: the reference sees integers as floats."""
    prepare = _f if floating else np.asarray
    return Case(op, lambda o, x, y: getattr(o, op)(x, y, **kwargs),
                _errstate(lambda x, y: reference(prepare(x), prepare(y))), kinds, refuses or {}, variant,
                **(options or {}))


def case(op: str, call: Callable, reference: Callable, kinds=ALL, refuses=None, variant="", **options) -> Case:
    return Case(op, call, _errstate(reference), kinds, refuses or {}, variant, **options)


#: The options of ops whose zeros' sign is not part of Keras' semantics (its backends give either).
ANY_ZERO = {"signed_zeros": False}
#: The options of ops whose reference sees the computation dtype.
IN_DTYPE = {"in_dtype": True}


def _same(a: np.ndarray, like: np.ndarray) -> np.ndarray:
    """``a`` in ``like``'s dtype (NumPy widens where Keras keeps the input's dtype)."""
    return np.asarray(a).astype(np.asarray(like).dtype)


def _int32(a) -> np.ndarray:
    return np.asarray(a).astype(np.int32)


def _sum_dtype(a: np.ndarray):
    """Keras' (JAX's) accumulator of a sum or product: booleans and narrow integers in int32, else the input's."""
    return {"b": np.int32}.get(a.dtype.kind, a.dtype)


def _softmax(x, axis):
    x = _f(x)
    shifted = x - np.max(x, axis=axis, keepdims=True) if x.size else x
    e = np.exp(shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softplus(x):
    return np.logaddexp(x, 0.0)


def _gelu(x, approximate=True):
    if approximate:
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + scipy.special.erf(x / math.sqrt(2.0)))


def _reductions(op: str, reference: Callable, kinds=ALL, refuses_empty_axis: type | None = None,
                refuses=None, signed_zeros: bool = True, **kwargs) -> list[Case]:
    """``op`` over all axes, axis 0 and axis -1 (over x of the empty kind: an empty result, an empty axis), each
    with and without keepdims once. ``refuses_empty_axis``: the error of a reduction over an axis of size 0;
    ``signed_zeros``: as :attr:`Case.signed_zeros` (the maximum of -0.0 and 0.0 is either)."""
    empty = {"empty": refuses_empty_axis} if refuses_empty_axis else {}
    cases = []
    for axis, keepdims in ((None, False), (0, True), (-1, False)):
        variant = f"axis={axis}" + (",keepdims" if keepdims else "")
        refused = {**(refuses or {}), **(empty if axis != 0 else {})}
        cases.append(Case(op, lambda o, x, y, a=axis, k=keepdims: getattr(o, op)(x, axis=a, keepdims=k, **kwargs),
                          _errstate(lambda x, y, a=axis, k=keepdims: reference(x, axis=a, keepdims=k, **kwargs)),
                          tuple(kind for kind in kinds if kind not in refused), refused, variant,
                          signed_zeros=signed_zeros))
    return cases


def _sum(x, axis=None, keepdims=False):
    return np.sum(x, axis=axis, keepdims=keepdims, dtype=_sum_dtype(x))


def _prod(x, axis=None, keepdims=False):
    return np.prod(x, axis=axis, keepdims=keepdims, dtype=_sum_dtype(x))


def _mean(x, axis=None, keepdims=False):
    return np.mean(_f(x), axis=axis, keepdims=keepdims)


def _var(x, axis=None, keepdims=False):
    return np.var(_f(x), axis=axis, keepdims=keepdims)


def _std(x, axis=None, keepdims=False):
    return np.std(_f(x), axis=axis, keepdims=keepdims)


def _max(x, axis=None, keepdims=False):
    return np.max(x, axis=axis, keepdims=keepdims)


def _min(x, axis=None, keepdims=False):
    return np.min(x, axis=axis, keepdims=keepdims)


def _logsumexp(x, axis=None, keepdims=False):
    x = _f(x)
    peak = np.max(x, axis=axis, keepdims=True) if x.size else np.zeros([1] * x.ndim)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    out = np.log(np.sum(np.exp(x - peak), axis=axis, keepdims=True)) + peak
    return out if keepdims else np.squeeze(out, axis=axis) if axis is not None else out.reshape(())


def _signed(x):
    """x with -0.0 just below 0.0: Keras' argmax and argmin tell the zeros apart, on every backend."""
    if x.dtype.kind != "f":
        return x
    return np.where((x == 0) & np.signbit(x), -np.finfo(np.float32).tiny, x)


def _unsupported(*args, **kwargs):
    raise AssertionError("a refusal has no reference")


def _one_hot(x, n=4):
    x = np.asarray(x)
    return (x[..., None] == np.arange(n)).astype(np.float64)
