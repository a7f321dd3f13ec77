"""The table of :mod:`tests.test_ops_special_values`: its inputs, and per op a call over ``ops``, a NumPy reference
with Keras' semantics (``keras/src/backend/numpy``: integers and booleans into float ops give the computation
dtype, index results are int32, reductions keep int32) and the input kinds it applies to, or refuses with a typed
error on every backend.

A case is ``call(ops, x, y)`` and ``reference(x, y)`` over one kind's inputs ``x`` and ``y``. A float64 reference
result stands for the computation dtype; any other dtype is expected as it is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import scipy.special

from toolkit.errors import ArgumentError, DTypeError, ShapeError

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
    #: Compiled in a function of its own: on Aesara's JAX linker, ``max`` and ``argmax`` (or ``min`` and ``argmin``)
    #: of one tensor over one axis in one function become its MaxAndArgmax, which fails to trace
    #: (TracerIntegerConversionError); the other cases take maxima of the same inputs.
    alone: bool = False

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
                refuses=None, **kwargs) -> list[Case]:
    """``op`` over all axes, axis 0 and axis -1 (over x of the empty kind: an empty result, an empty axis), each
    with and without keepdims once. ``refuses_empty_axis``: the error of a reduction over an axis of size 0."""
    empty = {"empty": refuses_empty_axis} if refuses_empty_axis else {}
    cases = []
    for axis, keepdims in ((None, False), (0, True), (-1, False)):
        variant = f"axis={axis}" + (",keepdims" if keepdims else "")
        refused = {**(refuses or {}), **(empty if axis != 0 else {})}
        cases.append(Case(op, lambda o, x, y, a=axis, k=keepdims: getattr(o, op)(x, axis=a, keepdims=k, **kwargs),
                          _errstate(lambda x, y, a=axis, k=keepdims: reference(x, axis=a, keepdims=k, **kwargs)),
                          tuple(kind for kind in kinds if kind not in refused), refused, variant))
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


# --- arithmetic, comparisons, basic activations ------------------------------------------------------------------
ELEMENTWISE = [
    binary("add", np.add),
    binary("subtract", np.subtract, kinds=NUMERIC, refuses={"bool": DTypeError}),
    binary("multiply", np.multiply),
    binary("divide", np.divide, floating=True),
    binary("floor_divide", np.floor_divide, kinds=NUMERIC),
    binary("mod", np.mod, kinds=NUMERIC, options=ANY_ZERO),
    binary("power", np.power, kinds=FLOATS),
    # A negative integer power has no integer value (NumPy raises): integers get non-negative exponents.
    case("power", lambda o, x, y: o.power(x, o.abs(y)), lambda x, y: np.power(x, np.abs(y)), kinds=("int",),
         variant="int"),
    unary("negative", np.negative, kinds=NUMERIC, floating=False),
    unary("abs", np.abs, floating=False),
    # Which zero a tie of -0.0 and 0.0 gives is not Keras' semantics (NumPy and TensorFlow give the first, XLA +0.0).
    binary("maximum", np.maximum, options=ANY_ZERO),
    binary("minimum", np.minimum, options=ANY_ZERO),
    *[binary(name, getattr(np, name)) for name in ("greater", "greater_equal", "less", "less_equal", "equal",
                                                   "not_equal", "logical_and", "logical_or")],
    unary("logical_not", np.logical_not, floating=False),
    case("where", lambda o, x, y: o.where(x > y, x, y), lambda x, y: np.where(x > y, x, y)),
    case("clip", lambda o, x, y: o.clip(x, -1, 2), lambda x, y: np.clip(x, -1, 2), kinds=NUMERIC),
    unary("relu", lambda x: np.maximum(x, np.zeros((), x.dtype)), floating=False, kinds=NUMERIC),
    *[unary(name, fn) for name, fn in (("tanh", np.tanh), ("sigmoid", _sigmoid), ("exp", np.exp), ("log", np.log),
                                        ("sqrt", np.sqrt), ("erf", scipy.special.erf), ("sin", np.sin),
                                        ("cos", np.cos), ("silu", lambda x: x * _sigmoid(x)),
                                        ("softplus", _softplus))],
    # Keras squares booleans as int32 (NumPy as int8).
    unary("square", lambda x: np.square(x.astype(np.int32) if x.dtype == bool else x), floating=False),
    unary("gelu", _gelu),
    unary("gelu", lambda x: _gelu(x, False), approximate=False, variant="exact"),
    case("softmax", lambda o, x, y: o.softmax(x), lambda x, y: _softmax(x, -1)),
    case("softmax", lambda o, x, y: o.softmax(x, axis=None), lambda x, y: _softmax(x, None), variant="axis=None"),
    case("log_softmax", lambda o, x, y: o.log_softmax(x), lambda x, y: np.log(_softmax(x, -1))),
    case("log_softmax", lambda o, x, y: o.log_softmax(x, axis=0), lambda x, y: np.log(_softmax(x, 0)),
         variant="axis=0"),
]

# --- shapes, joins, indexing, gathering ---------------------------------------------------------------------------
def _one_hot(x, n=4):
    x = np.asarray(x)
    return (x[..., None] == np.arange(n)).astype(np.float64)


SHAPES = [
    case("broadcast_to", lambda o, x, y: o.broadcast_to(x, (3,) + tuple(x.shape)),
         lambda x, y: np.broadcast_to(x, (3,) + x.shape)),
    case("cast", lambda o, x, y: (o.cast(x, "bool"), o.cast(x, "float16"), o.cast(y, "float32")),
         lambda x, y: (x.astype(bool), x.astype(np.float16), y.astype(np.float32)), kinds=FLOATS,
         variant="float"),
    case("cast", lambda o, x, y: (o.cast(x, "int32"), o.cast(x, "float32"), o.cast(y, "bool"), o.cast(y, "int8")),
         lambda x, y: (x.astype(np.int32), x.astype(np.float32), y.astype(bool), y.astype(np.int8)),
         kinds=("int", "bool"), variant="int"),
    case("concatenate", lambda o, x, y: (o.concatenate([x, y], axis=0), o.concatenate([x, x], axis=-1)),
         lambda x, y: (np.concatenate([x, y.reshape(-1, x.shape[1])], 0), np.concatenate([x, x], -1)),
         kinds=("float", "int", "bool")),
    case("concatenate", lambda o, x, y: (o.concatenate([x, x], axis=0), o.concatenate([y, y], axis=None)),
         lambda x, y: (np.concatenate([x, x], 0), np.concatenate([y, y], None)), kinds=("empty",), variant="empty"),
    case("concat", lambda o, x, y: o.concat([x, x], axis=1), lambda x, y: np.concatenate([x, x], 1)),
    case("expand_dims", lambda o, x, y: o.expand_dims(x, (0, -1)), lambda x, y: np.expand_dims(x, (0, -1))),
    case("getitem", lambda o, x, y: (x[1:, ::-1], x[-1], x[:, None, :1]),
         lambda x, y: (x[1:, ::-1], x[-1], x[:, None, :1])),
    case("one_hot", lambda o, x, y: (o.one_hot(x, 4), o.one_hot(y, 3, axis=0)),
         lambda x, y: (_one_hot(x), np.moveaxis(_one_hot(y, 3), -1, 0)), kinds=("int",),
         refuses={"float": DTypeError, "bool": DTypeError}),
    unary("ones_like", np.ones_like, floating=False),
    unary("zeros_like", np.zeros_like, floating=False),
    case("pad", lambda o, x, y: (o.pad(x, ((1, 0), (0, 2))), o.pad(x, 1, constant_values=-1)),
         lambda x, y: (np.pad(x, ((1, 0), (0, 2))), np.pad(x, 1, constant_values=-1))),
    case("pad", lambda o, x, y: (o.pad(x, ((1, 1), (2, 3)), "reflect"), o.pad(x, 2, "symmetric")),
         lambda x, y: (np.pad(x, ((1, 1), (2, 3)), "reflect"), np.pad(x, 2, "symmetric")),
         kinds=("float", "int", "bool"), refuses={"empty": ShapeError}, variant="reflect"),
    case("reshape", lambda o, x, y: (o.reshape(x, -1), o.reshape(x, (-1, 2)), o.reshape(y, (2, -1))),
         lambda x, y: (x.reshape(-1), x.reshape(-1, 2), y.reshape(2, -1))),
    case("squeeze", lambda o, x, y: (o.squeeze(x[:1]), o.squeeze(x[:, None], axis=1)),
         lambda x, y: (np.squeeze(x[:1]), np.squeeze(x[:, None], axis=1))),
    case("stack", lambda o, x, y: (o.stack([x, x], axis=-1), o.stack([y, y])),
         lambda x, y: (np.stack([x, x], -1), np.stack([y, y]))),
    case("take", lambda o, x, y: (o.take(x, [1, -1, 0], axis=0), o.take(x, np.array([[0, 1]], np.int32))),
         lambda x, y: (np.take(x, [1, -1, 0], axis=0), np.take(x, [[0, 1]])), kinds=("float", "int", "bool")),
    case("take", lambda o, x, y: o.take(x, [1, 0], axis=0), lambda x, y: np.take(x, [1, 0], axis=0),
         kinds=("empty",), variant="empty"),
    case("take_along_axis", lambda o, x, y: o.take_along_axis(x, np.array([[1], [0], [-1]], np.int32), axis=0),
         lambda x, y: np.take_along_axis(x, np.array([[1], [0], [-1]]), axis=0)),
    case("transpose", lambda o, x, y: (o.transpose(x), o.transpose(x[None], (2, 0, 1))),
         lambda x, y: (x.T, np.transpose(x[None], (2, 0, 1)))),
]

# --- basic reductions, matmul -------------------------------------------------------------------------------------
def _moments(x, axes, keepdims=False):
    return _mean(x, axes, keepdims), _var(x, axes, keepdims)


BASIC = [
    *_reductions("sum", _sum),
    *_reductions("mean", _mean),
    *_reductions("max", _max, refuses_empty_axis=ShapeError),
    *_reductions("min", _min, refuses_empty_axis=ShapeError),
    *_reductions("logsumexp", _logsumexp, kinds=NUMERIC),
    case("argmax", lambda o, x, y: (o.argmax(x), o.argmax(x, axis=-1), o.argmax(x, axis=0, keepdims=True)),
         lambda x, y: (_int32(np.argmax(_signed(x))), _int32(np.argmax(_signed(x), -1)),
                       _int32(np.argmax(_signed(x), 0, keepdims=True))),
         kinds=("float", "int", "bool"), refuses={"empty": ShapeError}, alone=True),
    case("cumsum", lambda o, x, y: (o.cumsum(x), o.cumsum(x, axis=0), o.cumsum(y, axis=-1)),
         lambda x, y: (np.cumsum(x, dtype=_sum_dtype(x)), np.cumsum(x, 0, dtype=_sum_dtype(x)),
                       np.cumsum(y, -1, dtype=_sum_dtype(y)))),
    case("matmul", lambda o, x, y: (o.matmul(x, o.transpose(y)), o.matmul(x[0], y[0])),
         lambda x, y: (np.matmul(x, y.T), np.matmul(x[0], y[0])), kinds=("float", "int", "bool")),
    case("matmul", lambda o, x, y: (o.matmul(x, o.transpose(x)), o.matmul(o.transpose(x), x)),
         lambda x, y: (x @ x.T, x.T @ x), kinds=("empty",), variant="empty"),
    case("moments", lambda o, x, y: (o.moments(x, 0), o.moments(x, (0, 1), keepdims=True)),
         lambda x, y: (_moments(x, 0), _moments(x, (0, 1), True)), kinds=("float", "int", "bool")),
    case("moments", lambda o, x, y: o.moments(x, 0), lambda x, y: _moments(x, 0), kinds=("empty",),
         variant="empty"),
    case("shape", lambda o, x, y: (o.shape(x), o.shape(y)), lambda x, y: (x.shape, y.shape)),
]

# --- elementwise math ---------------------------------------------------------------------------------------------
def _divide_no_nan(x, y):
    return np.where(y == 0, 0.0, x / np.where(y == 0, 1.0, y))


def _rsqrt(x):
    return 1.0 / np.sqrt(x)


_FLOAT_UNARY = {
    "arccos": np.arccos, "arccosh": np.arccosh, "arcsin": np.arcsin, "arcsinh": np.arcsinh, "arctan": np.arctan,
    "arctanh": np.arctanh, "cosh": np.cosh, "sinh": np.sinh, "tan": np.tan, "expm1": np.expm1, "log1p": np.log1p,
    "log2": np.log2, "log10": np.log10, "erfc": scipy.special.erfc, "erfinv": scipy.special.erfinv,
    "i0": scipy.special.i0, "floor": np.floor, "ceil": np.ceil, "cbrt": np.cbrt,
    "sinc": np.sinc, "exp2": np.exp2, "deg2rad": np.deg2rad, "rad2deg": np.rad2deg, "reciprocal": np.reciprocal,
    "rsqrt": _rsqrt, "fabs": np.fabs,
}
#: erfinv(-0.0) is -0.0 in XLA and +0.0 in SciPy and TensorFlow.
_ANY_ZERO = {"erfinv"}
_KEEP_UNARY = {  # the result keeps the input's dtype (integers stay integers)
    "absolute": np.absolute, "round": lambda x: _same(np.round(x), x), "trunc": lambda x: _same(np.trunc(x), x),
    "real": np.real, "conj": lambda x: x, "conjugate": lambda x: x,  # real inputs: NumPy makes booleans int8
}
_BOOL_UNARY = {"signbit": np.signbit, "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite,
               "isposinf": np.isposinf, "isneginf": np.isneginf, "isreal": np.isreal}
_FLOAT_BINARY = {
    "arctan2": np.arctan2, "hypot": np.hypot, "heaviside": np.heaviside,
    "logaddexp": np.logaddexp, "logaddexp2": np.logaddexp2, "true_divide": np.true_divide,
    "divide_no_nan": _divide_no_nan,
}
_BITWISE = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor}
_SHIFTS = {"bitwise_left_shift": np.left_shift, "left_shift": np.left_shift,
           "bitwise_right_shift": np.right_shift, "right_shift": np.right_shift}

MATH = [
    *[unary(name, fn, options=ANY_ZERO if name in _ANY_ZERO else None) for name, fn in _FLOAT_UNARY.items()],
    *[unary(name, fn, floating=False) for name, fn in _KEEP_UNARY.items()],
    # NumPy and Keras define no sign of booleans.
    # sign(-0.0) is -0.0 in XLA, 0.0 in NumPy and TensorFlow.
    unary("sign", np.sign, floating=False, kinds=NUMERIC, refuses={"bool": DTypeError}, options=ANY_ZERO),
    unary("nan_to_num", np.nan_to_num, floating=False, kinds=("int", "bool"), variant="int"),
    *[unary(name, fn, floating=False) for name, fn in _BOOL_UNARY.items()],
    unary("angle", np.angle),
    unary("imag", lambda x: np.zeros_like(x), floating=False),
    *[binary(name, fn, floating=True) for name, fn in _FLOAT_BINARY.items()],
    binary("nextafter", np.nextafter, floating=True, options=IN_DTYPE),
    # Integers keep their dtype (fmod's remainder is exact); the sign of a zero remainder is not Keras' semantics.
    binary("fmod", np.fmod, kinds=NUMERIC, options=ANY_ZERO),  # booleans would divide by False
    binary("fmax", np.fmax, options=ANY_ZERO),
    binary("fmin", np.fmin, options=ANY_ZERO),
    binary("isclose", np.isclose),
    case("isclose", lambda o, x, y: o.isclose(x, y, equal_nan=True), lambda x, y: np.isclose(x, y, equal_nan=True),
         variant="equal_nan"),
    case("allclose", lambda o, x, y: (o.allclose(x, y), o.allclose(x, x), o.allclose(x, x, equal_nan=True)),
         lambda x, y: (np.asarray(np.allclose(x, y)), np.asarray(np.allclose(x, x)),
                       np.asarray(np.allclose(x, x, equal_nan=True)))),
    binary("logical_xor", np.logical_xor),
    case("round", lambda o, x, y: o.round(x, 1), lambda x, y: np.round(x, 1), kinds=("float", "empty"),
         variant="decimals=1"),
    unary("nan_to_num", np.nan_to_num, floating=False, options=IN_DTYPE, variant="float", kinds=FLOATS),
    case("nan_to_num", lambda o, x, y: o.nan_to_num(x, nan=2, posinf=3.5, neginf=-4),
         lambda x, y: np.nan_to_num(x, nan=2, posinf=3.5, neginf=-4), kinds=FLOATS, variant="values"),
    case("ldexp", lambda o, x, y: o.ldexp(x, np.array([3, -2, 0, 1], np.int32)),
         lambda x, y: np.ldexp(_f(x), np.array([3, -2, 0, 1])), kinds=("float", "int", "bool")),
    *[binary(name, fn, kinds=("int", "bool"), refuses={"float": DTypeError}) for name, fn in _BITWISE.items()],
    *[unary(name, np.invert, kinds=("int", "bool"), floating=False, refuses={"float": DTypeError})
      for name in ("bitwise_invert", "bitwise_not")],
    # A shift by a negative count is undefined in C and differs across frameworks: counts are |y|.
    *[case(name, lambda o, x, y, n=name: getattr(o, n)(x, o.abs(y)), lambda x, y, f=fn: f(x, np.abs(y)),
           kinds=("int",), refuses={"float": DTypeError}) for name, fn in _SHIFTS.items()],
    *[binary(name, fn, kinds=("int",), refuses={"float": DTypeError}) for name, fn in (("gcd", np.gcd),
                                                                                       ("lcm", np.lcm))],
]

# --- arrays: creation, shapes, indexing ---------------------------------------------------------------------------
def _windows(name, n):
    return getattr(np, name)(n) if name != "kaiser" else np.kaiser(n, 2.0)


_VIEWS = {"float32": "int32", "float64": "uint64", "int32": "float32", "bool": "int8"}  # same itemsize

ARRAYS = [
    # Creation ops take Python numbers: empty sizes, NaN and infinities as fill values and bounds.
    case("arange", lambda o, x, y: (o.arange(0), o.arange(3, 1), o.arange(0.5, 2.0, 0.5), o.arange(-3, 3, 2)),
         lambda x, y: (np.arange(0).astype(np.int32), np.arange(3, 1).astype(np.int32), np.arange(0.5, 2.0, 0.5),
                       np.arange(-3, 3, 2).astype(np.int32)), kinds=("empty",)),
    case("linspace", lambda o, x, y: (o.linspace(0.0, 1.0, 0), o.linspace(0.0, INF, 3), o.linspace(-1, 1, 5)),
         lambda x, y: (np.linspace(0, 1, 0), np.linspace(0.0, INF, 3), np.linspace(-1, 1, 5)), kinds=("empty",)),
    case("logspace", lambda o, x, y: (o.logspace(0.0, 2.0, 0), o.logspace(-1.0, 1.0, 3)),
         lambda x, y: (np.logspace(0, 2, 0), np.logspace(-1.0, 1.0, 3)), kinds=("empty",)),
    case("geomspace", lambda o, x, y: (o.geomspace(1.0, 8.0, 0), o.geomspace(1.0, 8.0, 4), o.geomspace(-1, -8, 4)),
         lambda x, y: (np.geomspace(1, 8, 0), np.geomspace(1.0, 8.0, 4), np.geomspace(-1, -8, 4)),
         kinds=("empty",)),
    case("zeros", lambda o, x, y: (o.zeros((2, 0)), o.zeros(0, "int32")),
         lambda x, y: (np.zeros((2, 0)), np.zeros(0, np.int32)), kinds=("empty",)),
    case("ones", lambda o, x, y: (o.ones((0, 3)), o.ones(2, "bool")),
         lambda x, y: (np.ones((0, 3)), np.ones(2, bool)), kinds=("empty",)),
    case("empty", lambda o, x, y: o.shape(o.empty((0, 2))), lambda x, y: (0, 2), kinds=("empty",)),
    # Keras' full is in the computation dtype unless dtype is given, an integer fill value too.
    case("full", lambda o, x, y: (o.full((2, 0), 1.0), o.full(3, NAN), o.full((2,), -INF), o.full(2, -3),
                                  o.full(2, -3, "int32")),
         lambda x, y: (np.full((2, 0), 1.0), np.full(3, NAN), np.full(2, -INF), np.full(2, -3.0),
                       np.full(2, -3, np.int32)),
         kinds=("empty",)),
    # NaN has no integer or boolean value: those are filled with -1 (True).
    case("full_like", lambda o, x, y: (o.full_like(x, NAN if "float" in x.dtype else -1), o.full_like(y, 2)),
         lambda x, y: (np.full_like(x, NAN if x.dtype.kind == "f" else -1), np.full_like(y, 2))),
    case("eye", lambda o, x, y: (o.eye(0), o.eye(2, 3, k=1), o.eye(3, k=-5)),
         lambda x, y: (np.eye(0), np.eye(2, 3, 1), np.eye(3, k=-5)), kinds=("empty",)),
    case("identity", lambda o, x, y: (o.identity(0), o.identity(2, "int32")),
         lambda x, y: (np.identity(0), np.identity(2, np.int32)), kinds=("empty",)),
    case("tri", lambda o, x, y: (o.tri(0), o.tri(2, 3, -1)),
         lambda x, y: (np.tri(0), np.tri(2, 3, -1)), kinds=("empty",)),
    *[case(name, lambda o, x, y, n=name: (getattr(o, n)(x), getattr(o, n)(x, k=-1)),
           lambda x, y, n=name: (getattr(np, n)(x), getattr(np, n)(x, k=-1))) for name in ("tril", "triu")],
    case("diagonal", lambda o, x, y: (o.diagonal(x), o.diagonal(x, 1), o.diagonal(x, -1, 1, 0)),
         lambda x, y: (np.diagonal(x), np.diagonal(x, 1), np.diagonal(x, -1, 1, 0))),
    case("trace", lambda o, x, y: (o.trace(x), o.trace(x, 1)),
         lambda x, y: (np.trace(x, dtype=_sum_dtype(x)), np.trace(x, 1, dtype=_sum_dtype(x)))),
    case("diag", lambda o, x, y: (o.diag(x), o.diag(y[0] if y.ndim > 1 else y), o.diag(x, -1)),
         lambda x, y: (np.diag(x), np.diag(y[0] if y.ndim > 1 else y), np.diag(x, -1))),
    case("diagflat", lambda o, x, y: o.diagflat(x, 1), lambda x, y: np.diagflat(x, 1)),
    case("vander", lambda o, x, y: (o.vander(x[0]), o.vander(x[-1], 2, increasing=True)),
         lambda x, y: (_same(np.vander(x[0]), x), _same(np.vander(x[-1], 2, increasing=True), x)),
         kinds=("float", "int")),
    case("meshgrid", lambda o, x, y: (o.meshgrid(x[0], x[1]), o.meshgrid(x[0], x[1], indexing="ij")),
         lambda x, y: (tuple(np.meshgrid(x[0], x[1])), tuple(np.meshgrid(x[0], x[1], indexing="ij")))),
    *[case(name, lambda o, x, y, n=name: (getattr(o, n)(0), getattr(o, n)(1), getattr(o, n)(4)),
           lambda x, y, n=name: (_windows(n, 0), _windows(n, 1), _windows(n, 4)), kinds=("empty",))
      for name in ("bartlett", "blackman", "hamming", "hanning")],
    case("kaiser", lambda o, x, y: (o.kaiser(0, 2.0), o.kaiser(1, 2.0), o.kaiser(4, 2.0)),
         lambda x, y: (np.kaiser(0, 2.0), np.kaiser(1, 2.0), np.kaiser(4, 2.0)), kinds=("empty",)),
    case("array", lambda o, x, y: (o.array(x), o.array([NAN, INF, -0.0])),
         lambda x, y: (x, np.array([NAN, INF, -0.0]))),
    unary("copy", np.copy, floating=False),
    case("size", lambda o, x, y: (o.size(x), o.size(y)), lambda x, y: (x.size, y.size)),
    case("ndim", lambda o, x, y: (o.ndim(x), o.ndim(y)), lambda x, y: (x.ndim, y.ndim)),
    unary("ravel", np.ravel, floating=False),
    case("view", lambda o, x, y: o.view(x, _VIEWS[str(x.dtype)]), lambda x, y: x.view(_VIEWS[str(x.dtype)]),
         kinds=ALL, refuses={"bool": DTypeError}, in_dtype=True),
    case("flip", lambda o, x, y: (o.flip(x), o.flip(x, 1)), lambda x, y: (np.flip(x), np.flip(x, 1))),
    case("fliplr", lambda o, x, y: o.fliplr(x), lambda x, y: np.fliplr(x)),
    unary("flipud", np.flipud, floating=False),
    case("rot90", lambda o, x, y: (o.rot90(x), o.rot90(x, 3)), lambda x, y: (np.rot90(x), np.rot90(x, 3))),
    case("roll", lambda o, x, y: (o.roll(x, 1), o.roll(x, -1, 1), o.roll(y, 2)),
         lambda x, y: (np.roll(x, 1), np.roll(x, -1, 1), np.roll(y, 2))),
    case("swapaxes", lambda o, x, y: o.swapaxes(x, 0, 1), lambda x, y: np.swapaxes(x, 0, 1)),
    case("moveaxis", lambda o, x, y: o.moveaxis(x[None], 0, -1), lambda x, y: np.moveaxis(x[None], 0, -1)),
    case("split", lambda o, x, y: (o.split(x, 2), o.split(x, [1], axis=1)),
         lambda x, y: (tuple(np.split(x, 2)), tuple(np.split(x, [1], axis=1)))),
    case("array_split", lambda o, x, y: o.array_split(x, 3, axis=1), lambda x, y: tuple(np.array_split(x, 3, 1))),
    case("hsplit", lambda o, x, y: o.hsplit(x, [1]), lambda x, y: tuple(np.hsplit(x, [1]))),
    case("vsplit", lambda o, x, y: o.vsplit(x, 2), lambda x, y: tuple(np.vsplit(x, 2))),
    case("dsplit", lambda o, x, y: o.dsplit(x[..., None], [1]), lambda x, y: tuple(np.dsplit(x[..., None], [1]))),
    case("unstack", lambda o, x, y: (o.unstack(x), o.unstack(x, axis=1)),
         lambda x, y: (tuple(x), tuple(np.moveaxis(x, 1, 0)))),
    *[case(name, lambda o, x, y, n=name: getattr(o, n)([x, x]), lambda x, y, n=name: getattr(np, n)([x, x]))
      for name in ("hstack", "vstack", "dstack")],
    case("append", lambda o, x, y: (o.append(x, y), o.append(x, x, axis=0)),
         lambda x, y: (np.append(x, y), np.append(x, x, axis=0))),
    case("tile", lambda o, x, y: (o.tile(x, 2), o.tile(y, (2, 1))), lambda x, y: (np.tile(x, 2), np.tile(y, (2, 1)))),
    case("repeat", lambda o, x, y: (o.repeat(x, 2), o.repeat(x, [0, 2], axis=0)),
         lambda x, y: (np.repeat(x, 2), np.repeat(x, [0, 2], axis=0)), kinds=("empty", "int", "bool")),
    case("nonzero", lambda o, x, y: o.nonzero(np.array([[0.0, NAN], [-0.0, INF]])),
         lambda x, y: tuple(_int32(i) for i in np.nonzero(np.array([[0.0, NAN], [-0.0, INF]]))), kinds=("empty",)),
    case("unravel_index", lambda o, x, y: o.unravel_index(np.array([0, 5, 7], np.int32), (2, 4)),
         lambda x, y: tuple(_int32(i) for i in np.unravel_index([0, 5, 7], (2, 4))), kinds=("empty",)),
    case("select", lambda o, x, y: o.select([x > 0, x < y], [x, y], default=-1),
         lambda x, y: np.select([x > 0, x < y], [x, y], default=-1).astype(np.result_type(x, y)),
         kinds=("float", "empty", "int")),
    case("diff", lambda o, x, y: (o.diff(x), o.diff(x, 2, axis=0)), lambda x, y: (np.diff(x), np.diff(x, 2, axis=0))),
]

# --- reductions, sorting, segments --------------------------------------------------------------------------------
def _top_k(x, k):
    """``(values, indices)`` of the k largest along the last axis: NaN first, then descending, ties by index."""
    idx = np.zeros(x.shape[:-1] + (k,), np.int32)
    for at in np.ndindex(x.shape[:-1]):
        row = x[at].astype(np.float64)
        idx[at] = sorted(range(len(row)), key=lambda i: (not np.isnan(row[i]), -np.nan_to_num(row[i]), i))[:k]
    return np.take_along_axis(x, idx, -1), idx


def _segments(x, ids, n, combine, initial):
    out = np.full((n,) + x.shape[1:], initial, x.dtype)
    for row, i in zip(x, ids):
        if 0 <= i < n:
            out[i] = combine(out[i], row)
    return out


def _quantile(name, x, q=None, axis=None):
    """NumPy's quantile, percentile or median (or nan* one), but a quantile that falls on one entry, or between
    equal ones, is that entry (the toolkit's documented choice: NumPy's ``lower + (upper - lower) * fraction`` is
    NaN there next to an infinity)."""
    fn = getattr(np, name)
    if q is None:  # median
        q, fn = 50.0, getattr(np, name.replace("median", "percentile"))
    lower, upper = fn(x, q, axis=axis, method="lower"), fn(x, q, axis=axis, method="higher")
    return np.where(lower == upper, lower, fn(x, q, axis=axis))


_IDS = np.array([1, 0, -1, 1, 2, 0], np.int32)  # one per row of the float kind's x; -1 drops its row
_IDS2 = np.array([1, 1], np.int32)  # one per row of the other kinds' x

REDUCTIONS = [
    *_reductions("prod", _prod),
    *_reductions("any", lambda x, axis, keepdims: np.any(x, axis=axis, keepdims=keepdims)),
    *_reductions("all", lambda x, axis, keepdims: np.all(x, axis=axis, keepdims=keepdims)),
    *_reductions("amax", _max, refuses_empty_axis=ShapeError),
    *_reductions("amin", _min, refuses_empty_axis=ShapeError),
    *_reductions("ptp", lambda x, axis, keepdims: np.ptp(x, axis=axis, keepdims=keepdims), kinds=NUMERIC,
                 refuses_empty_axis=ShapeError, refuses={"bool": DTypeError}),
    *_reductions("var", _var),
    *_reductions("std", _std),
    case("count_nonzero", lambda o, x, y: (o.count_nonzero(x), o.count_nonzero(x, axis=-1)),
         lambda x, y: (_int32(np.count_nonzero(x)), _int32(np.count_nonzero(x, axis=-1)))),
    case("average", lambda o, x, y: (o.average(x), o.average(x, axis=0), o.average(x, -1, weights=o.abs(y) + 1)),
         lambda x, y: (np.average(_f(x)), np.average(_f(x), 0), np.average(_f(x), -1, weights=np.abs(_f(y)) + 1)),
         kinds=("float", "int", "bool")),
    case("argmin", lambda o, x, y: (o.argmin(x), o.argmin(x, axis=-1), o.argmin(x, axis=0, keepdims=True)),
         lambda x, y: (_int32(np.argmin(_signed(x))), _int32(np.argmin(_signed(x), -1)),
                       _int32(np.argmin(_signed(x), 0, keepdims=True))),
         kinds=("float", "int", "bool"), refuses={"empty": ShapeError}, alone=True),
    case("nanargmax", lambda o, x, y: (o.nanargmax(x[:, 1:]), o.nanargmax(x, axis=0)),
         lambda x, y: (_int32(np.nanargmax(x[:, 1:])), _int32(np.nanargmax(x, axis=0))),
         kinds=("float", "int", "bool"), alone=True),
    case("nanargmin", lambda o, x, y: (o.nanargmin(x[:, 1:]), o.nanargmin(x, axis=0)),
         lambda x, y: (_int32(np.nanargmin(x[:, 1:])), _int32(np.nanargmin(x, axis=0))),
         kinds=("float", "int", "bool"), alone=True),
    case("cumprod", lambda o, x, y: (o.cumprod(x), o.cumprod(x, axis=0), o.cumprod(y, axis=-1)),
         lambda x, y: (np.cumprod(x, dtype=_sum_dtype(x)), np.cumprod(x, 0, dtype=_sum_dtype(x)),
                       np.cumprod(y, -1, dtype=_sum_dtype(y)))),
    case("nancumsum", lambda o, x, y: (o.nancumsum(x), o.nancumsum(x, axis=0)),
         lambda x, y: (np.nancumsum(x, dtype=_sum_dtype(x)), np.nancumsum(x, 0, dtype=_sum_dtype(x)))),
    case("nancumprod", lambda o, x, y: (o.nancumprod(x), o.nancumprod(x, axis=0)),
         lambda x, y: (np.nancumprod(x, dtype=_sum_dtype(x)), np.nancumprod(x, 0, dtype=_sum_dtype(x)))),
    case("argsort", lambda o, x, y: (o.argsort(x), o.argsort(x, axis=0), o.argsort(x, axis=None)),
         lambda x, y: (_int32(np.argsort(x, kind="stable")), _int32(np.argsort(x, 0, kind="stable")),
                       _int32(np.argsort(x, None, kind="stable")))),
    case("sort", lambda o, x, y: (o.sort(x), o.sort(x, axis=0), o.sort(x, axis=None)),
         lambda x, y: (np.sort(x, kind="stable"), np.sort(x, 0, kind="stable"), np.sort(x, None, kind="stable"))),
    case("argpartition", lambda o, x, y: o.take_along_axis(x, o.argpartition(x, 1), -1)[..., 1],
         lambda x, y: np.partition(x, 1, axis=-1)[..., 1], kinds=("float", "int")),
    case("top_k", lambda o, x, y: o.top_k(x, 2), lambda x, y: _top_k(x, 2), kinds=("float", "int", "bool")),
    case("top_k", lambda o, x, y: o.top_k(x, 0), lambda x, y: _top_k(x, 0), kinds=("empty",), variant="empty"),
    case("in_top_k", lambda o, x, y: o.in_top_k(np.array([0, 1, 2, 3, 0, 1], np.int32), x, 2),
         lambda x, y: np.any(np.take_along_axis(x, np.array([[0], [1], [2], [3], [0], [1]]), -1)
                             >= _top_k(x, 2)[0], -1), kinds=("float",)),
    *[case(name, lambda o, x, y, n=name: (getattr(o, n)(x, 0.5), getattr(o, n)(x, np.array([0.0, 0.25, 1.0]),
                                                                           axis=-1)),
           lambda x, y, n=name: (_quantile(n, _f(x), 0.5), _quantile(n, _f(x), np.array([0.0, 0.25, 1.0]), -1)),
           kinds=("float", "int", "bool"), **ANY_ZERO) for name in ("quantile", "nanquantile")],
    *[case(name, lambda o, x, y, n=name: (getattr(o, n)(x, 50.0), getattr(o, n)(x, [0.0, 25.0, 100.0], axis=-1)),
           lambda x, y, n=name: (_quantile(n, _f(x), 50.0), _quantile(n, _f(x), [0.0, 25.0, 100.0], -1)),
           kinds=("float", "int", "bool"), **ANY_ZERO) for name in ("percentile", "nanpercentile")],
    *[case(name, lambda o, x, y, n=name: (getattr(o, n)(x), getattr(o, n)(x, axis=-1)),
           lambda x, y, n=name: (_quantile(n, _f(x)), _quantile(n, _f(x), axis=-1)), kinds=("float", "int", "bool"),
           **ANY_ZERO) for name in ("median", "nanmedian")],
    *_reductions("nansum", lambda x, axis, keepdims: np.nansum(x, axis=axis, keepdims=keepdims, dtype=_sum_dtype(x))),
    *_reductions("nanprod", lambda x, axis, keepdims: np.nanprod(x, axis=axis, keepdims=keepdims,
                                                                dtype=_sum_dtype(x))),
    *_reductions("nanmax", lambda x, axis, keepdims: np.nanmax(x, axis=axis, keepdims=keepdims),
                 refuses_empty_axis=ShapeError),
    *_reductions("nanmin", lambda x, axis, keepdims: np.nanmin(x, axis=axis, keepdims=keepdims),
                 refuses_empty_axis=ShapeError),
    *_reductions("nanmean", lambda x, axis, keepdims: np.nanmean(_f(x), axis=axis, keepdims=keepdims)),
    *_reductions("nanvar", lambda x, axis, keepdims: np.nanvar(_f(x), axis=axis, keepdims=keepdims)),
    *_reductions("nanstd", lambda x, axis, keepdims: np.nanstd(_f(x), axis=axis, keepdims=keepdims)),
    case("segment_sum", lambda o, x, y: o.segment_sum(x, _IDS if x.shape[0] == 6 else _IDS2, 3),
         lambda x, y: _segments(x, _IDS if x.shape[0] == 6 else _IDS2, 3, np.add, 0),
         kinds=("float", "empty", "int")),
    case("segment_prod", lambda o, x, y: o.segment_prod(x, _IDS if x.shape[0] == 6 else _IDS2, 3),
         lambda x, y: _segments(x, _IDS if x.shape[0] == 6 else _IDS2, 3, np.multiply, 1),
         kinds=("float", "empty", "int")),
    case("segment_max", lambda o, x, y: o.segment_max(x, _IDS if x.shape[0] == 6 else _IDS2, 3),
         lambda x, y: _segments(x, _IDS if x.shape[0] == 6 else _IDS2, 3, np.maximum,
                                -INF if x.dtype.kind == "f" else np.iinfo(x.dtype).min),
         kinds=("float", "empty", "int")),
    case("segment_min", lambda o, x, y: o.segment_min(x, _IDS if x.shape[0] == 6 else _IDS2, 3),
         lambda x, y: _segments(x, _IDS if x.shape[0] == 6 else _IDS2, 3, np.minimum,
                                INF if x.dtype.kind == "f" else np.iinfo(x.dtype).max),
         kinds=("float", "empty", "int")),
    case("bincount", lambda o, x, y: (o.bincount(np.array([0, 3, 3, 1], np.int32)),
                                      o.bincount(np.array([], np.int32), minlength=2),
                                      o.bincount(np.array([0, 1, 1, 1], np.int32), weights=x[0], minlength=3)),
         lambda x, y: (_int32(np.bincount([0, 3, 3, 1])), _int32(np.bincount(np.array([], int), minlength=2)),
                       _same(np.bincount([0, 1, 1, 1], weights=x[0], minlength=3), x)), kinds=("float", "int")),
    case("searchsorted", lambda o, x, y: (o.searchsorted(np.array([-INF, -1.0, 0.0, 2.0, INF]), x),
                                          o.searchsorted(np.array([-INF, -1.0, 0.0, 2.0, INF]), x, side="right")),
         lambda x, y: (_int32(np.searchsorted(np.array([-INF, -1.0, 0.0, 2.0, INF]), x)),
                       _int32(np.searchsorted(np.array([-INF, -1.0, 0.0, 2.0, INF]), x, "right"))),
         kinds=FLOATS),
    case("digitize", lambda o, x, y: o.digitize(x, np.array([-1.0, 0.0, 2.0])),
         lambda x, y: _int32(np.digitize(x, np.array([-1.0, 0.0, 2.0]))), kinds=("float", "empty", "int")),
    case("isin", lambda o, x, y: (o.isin(x, y), o.isin(x, y, invert=True)),
         lambda x, y: (np.isin(x, y), np.isin(x, y, invert=True))),
]

# --- products, linear algebra -------------------------------------------------------------------------------------
def _square(x):
    """A square matrix from x: its first two columns' first two rows (the int kind's is invertible, det -19), or
    (0, 0) from the empty kind."""
    return x[:2, :2] if x.shape[1] else x[:0, :0]


def _spd(x, o=None):
    """A symmetric positive definite matrix from x's integers (or (0, 0) from the empty kind), with ``ops`` ``o``
    (else NumPy)."""
    a = _square(x) * 1.0
    if o is None:
        return a @ a.T + 2 * np.eye(len(a))
    return o.matmul(a, o.transpose(a)) + 2 * o.eye(a.shape[0])


def _trapezoid(y, dx=1.0, axis=-1):
    return (getattr(np, "trapezoid", None) or np.trapz)(y, dx=dx, axis=axis)  # trapz before NumPy 2


def _slogdet(a):
    sign, logdet = np.linalg.slogdet(a)
    return sign, logdet


LINALG = [
    case("einsum", lambda o, x, y: (o.einsum("ij,ij->i", x, y), o.einsum("ij->j", x), o.einsum("ij,kj->ik", x, x)),
         lambda x, y: (np.einsum("ij,ij->i", x, y), np.einsum("ij->j", x, dtype=_sum_dtype(x)),
                       np.einsum("ij,kj->ik", x, x)), kinds=("float", "int")),
    case("einsum", lambda o, x, y: (o.einsum("ij->j", x), o.einsum("ij,kj->ik", x, x), o.einsum("i,i", y, y)),
         lambda x, y: (np.einsum("ij->j", x), np.einsum("ij,kj->ik", x, x), np.einsum("i,i", y, y)),
         kinds=("empty",), variant="empty"),
    case("tensordot", lambda o, x, y: (o.tensordot(x, y, 2), o.tensordot(x, y, ([1], [1]))),
         lambda x, y: (np.tensordot(x, y, 2), np.tensordot(x, y, ([1], [1]))), kinds=("float", "int")),
    case("tensordot", lambda o, x, y: o.tensordot(x, x, ([1], [1])), lambda x, y: np.tensordot(x, x, ([1], [1])),
         kinds=("empty",), variant="empty"),
    case("dot", lambda o, x, y: (o.dot(x, o.transpose(y)), o.dot(x[0], y[0])),
         lambda x, y: (np.dot(x, y.T), np.dot(x[0], y[0])), kinds=("float", "int")),
    case("dot", lambda o, x, y: (o.dot(x, o.transpose(x)), o.dot(y, y)),
         lambda x, y: (np.dot(x, x.T), np.dot(y, y)), kinds=("empty",), variant="empty"),
    case("vdot", lambda o, x, y: o.vdot(x, x), lambda x, y: np.vdot(x, x), kinds=NUMERIC),
    case("inner", lambda o, x, y: (o.inner(x, y), o.inner(x[0], y[0])),
         lambda x, y: (np.inner(x, y), np.inner(x[0], y[0])), kinds=("float", "int")),
    case("inner", lambda o, x, y: o.inner(y, y), lambda x, y: np.inner(y, y), kinds=("empty",), variant="empty"),
    case("outer", lambda o, x, y: o.outer(x, y), lambda x, y: np.outer(x, y), kinds=NUMERIC),
    case("kron", lambda o, x, y: o.kron(x[:2], y[:2]), lambda x, y: np.kron(x[:2], y[:2]), kinds=NUMERIC),
    case("cross", lambda o, x, y: o.cross(x[:, :3], y[:, :3]), lambda x, y: np.cross(x[:, :3], y[:, :3]),
         kinds=("float", "int"), refuses={"bool": DTypeError}),
    case("correlate", lambda o, x, y: (o.correlate(x[0], y[0], "full"), o.correlate(x[1], y[1][:2])),
         lambda x, y: (np.correlate(_f(x[0]), _f(y[0]), "full"), np.correlate(_f(x[1]), _f(y[1][:2]))),
         kinds=("float", "int")),
    case("trapezoid", lambda o, x, y: (o.trapezoid(x), o.trapezoid(x, dx=0.5, axis=0)),
         lambda x, y: (_trapezoid(_f(x)), _trapezoid(_f(x), dx=0.5, axis=0)), kinds=("float", "empty", "int")),
    case("cdist", lambda o, x, y: o.cdist(x, y), lambda x, y: np.sqrt(np.sum((_f(x)[:, None] - _f(y)[None]) ** 2,
                                                                             -1)), kinds=("float", "int")),
    case("norm", lambda o, x, y: (o.norm(x), o.norm(x, axis=-1), o.norm(x, 1, axis=0), o.norm(x[0], INF)),
         lambda x, y: (np.linalg.norm(_f(x)), np.linalg.norm(_f(x), axis=-1), np.linalg.norm(_f(x), 1, axis=0),
                       np.linalg.norm(_f(x[0]), INF)), kinds=("float", "int", "bool")),
    case("det", lambda o, x, y: o.det(_square(x)), lambda x, y: np.linalg.det(_f(_square(x))),
         kinds=("empty", "int")),
    case("inv", lambda o, x, y: o.inv(_square(x)), lambda x, y: np.linalg.inv(_f(_square(x))),
         kinds=("empty", "int")),
    case("slogdet", lambda o, x, y: o.slogdet(_square(x)), lambda x, y: _slogdet(_f(_square(x))),
         kinds=("empty", "int")),
    case("logdet", lambda o, x, y: o.logdet(_spd(x, o)), lambda x, y: np.linalg.slogdet(_spd(x))[1],
         kinds=("empty", "int")),
    case("solve", lambda o, x, y: o.solve(_square(x), _square(y)),
         lambda x, y: np.linalg.solve(_f(_square(x)), _f(_square(y))), kinds=("int",)),
    case("solve_triangular", lambda o, x, y: o.solve_triangular(o.triu(_square(x)), _square(y)),
         lambda x, y: np.linalg.solve(np.triu(_f(_square(x))), _f(_square(y))), kinds=("int",)),
    case("cholesky", lambda o, x, y: o.cholesky(_spd(x, o)), lambda x, y: np.linalg.cholesky(_spd(x)),
         kinds=("empty", "int")),
    case("qr", lambda o, x, y: o.matmul(*o.qr(_spd(x, o))), lambda x, y: _spd(x), kinds=("empty", "int")),
    case("svd", lambda o, x, y: o.svd(_spd(x, o), compute_uv=False),
         lambda x, y: np.linalg.svd(_spd(x), compute_uv=False), kinds=("empty", "int")),
    case("eigh", lambda o, x, y: o.eigh(_spd(x, o))[0], lambda x, y: np.linalg.eigh(_spd(x))[0],
         kinds=("empty", "int")),
    case("lstsq", lambda o, x, y: o.lstsq(_spd(x, o), _square(y) * 1.0),
         lambda x, y: np.linalg.lstsq(_spd(x), _f(_square(y)), rcond=None)[0], kinds=("int",)),
]

# --- activations, losses, normalization ---------------------------------------------------------------------------
#: Keras' epsilon of the losses and normalizations (``toolkit.nn.ops_nn.EPSILON``, Keras' ``backend.epsilon()``).
EPSILON = 1e-7
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def _hard_sigmoid(x):
    return np.clip(x + 3.0, 0.0, 6.0) / 6.0


def _sparsemax(x):
    """The Euclidean projection onto the simplex along the last axis, by sorting (Martins and Astudillo)."""
    if not x.shape[-1]:
        return x
    z = -np.sort(-x, axis=-1)
    k = np.arange(1, x.shape[-1] + 1)
    cumulative = np.cumsum(z, -1)
    support = 1 + k * z > cumulative
    size = np.sum(support, -1, keepdims=True)
    tau = (np.take_along_axis(cumulative, size - 1, -1) - 1) / size
    return np.maximum(x - tau, 0.0)


def _log_softmax(x, axis=-1):
    return np.log(_softmax(x, axis))


def _target(y):
    return (y > 0).astype(np.float64)


def _bce(target, output):
    output = np.clip(output, EPSILON, 1 - EPSILON)
    return -(target * np.log(output) + (1 - target) * np.log(1 - output))


def _bce_logits(target, logits):
    return -target * -_softplus(-logits) - (1 - target) * -_softplus(logits)


def _cce(target, output):
    return -np.sum(target * np.log(np.clip(output / np.sum(output, -1, keepdims=True), EPSILON, 1 - EPSILON)), -1)


def _layer_norm(x):
    mean = np.mean(x, -1, keepdims=True)
    return (x - mean) / np.sqrt(np.var(x, -1, keepdims=True) + EPSILON)


_LABELS = np.array([0, 3, 1, 2, 3, -1], np.int32)  # one per row of the float kind's x; -1 selects no class


NN = [  # the sign of a zero activation is not Keras' semantics (its backends differ): ANY_ZERO
    unary("relu6", lambda x: np.clip(x, 0.0, 6.0), options=ANY_ZERO),
    unary("log_sigmoid", lambda x: -_softplus(-x), options=ANY_ZERO),
    unary("elu", _elu, options=ANY_ZERO),
    unary("leaky_relu", lambda x: np.where(x >= 0, x, 0.2 * x), options=ANY_ZERO),
    unary("selu", lambda x: SELU_SCALE * _elu(x, SELU_ALPHA), options=ANY_ZERO),
    unary("celu", lambda x: np.where(x > 0, x, 1.0 * np.expm1(np.minimum(x, 0) / 1.0)), options=ANY_ZERO),
    unary("hard_sigmoid", _hard_sigmoid, options=ANY_ZERO),
    unary("hard_silu", lambda x: x * _hard_sigmoid(x), options=ANY_ZERO),
    unary("hard_swish", lambda x: x * _hard_sigmoid(x), options=ANY_ZERO),
    unary("swish", lambda x: x * _sigmoid(x), options=ANY_ZERO),
    unary("hard_tanh", lambda x: np.clip(x, -1.0, 1.0), options=ANY_ZERO),
    unary("hard_shrink", lambda x: np.where(np.abs(x) > 0.5, x, 0.0), options=ANY_ZERO),
    unary("soft_shrink", lambda x: np.where(x > 0.5, x - 0.5, np.where(x < -0.5, x + 0.5, 0.0)), options=ANY_ZERO),
    unary("tanh_shrink", lambda x: x - np.tanh(x), options=ANY_ZERO),
    case("threshold", lambda o, x, y: o.threshold(x, 0.5, -1.0), lambda x, y: np.where(_f(x) > 0.5, _f(x), -1.0)),
    unary("softsign", lambda x: x / (1.0 + np.abs(x)), options=ANY_ZERO),
    unary("sparse_plus", lambda x: np.where(x <= -1, 0.0, np.where(x >= 1, x, (x + 1) ** 2 / 4)), options=ANY_ZERO),
    unary("sparse_sigmoid", lambda x: np.where(x <= -1, 0.0, np.where(x >= 1, 1.0, 0.5 * (x + 1))), options=ANY_ZERO),
    unary("squareplus", lambda x: (x + np.sqrt(x * x + 4)) / 2, options=ANY_ZERO),
    case("glu", lambda o, x, y: (o.glu(x), o.glu(x, axis=0)),
         lambda x, y: (_f(x)[:, :2] * _sigmoid(_f(x)[:, 2:]), _f(x)[:len(x) // 2] * _sigmoid(_f(x)[len(x) // 2:]))),
    # Sparsemax of rows with infinities is NaN by any formula; its rows here are the finite ones.
    case("sparsemax", lambda o, x, y: (o.sparsemax(x[-1:]), o.sparsemax(x[3:4])),
         lambda x, y: (_sparsemax(_f(x)[-1:]), _sparsemax(_f(x)[3:4]))),
    case("binary_crossentropy", lambda o, x, y: (o.binary_crossentropy(o.flip(x, 0) > 0, x),
                                                 o.binary_crossentropy(o.flip(x, 0) > 0, x, from_logits=True)),
         lambda x, y: (_bce(_target(np.flip(x, 0)), _f(x)), _bce_logits(_target(np.flip(x, 0)), _f(x))),
         kinds=FLOATS, in_dtype=True),
    case("categorical_crossentropy", lambda o, x, y: (o.categorical_crossentropy(y > 0, x),
                                                      o.categorical_crossentropy(y > 0, x, from_logits=True)),
         lambda x, y: (_cce(_target(y), _f(x)), -np.sum(_target(y) * _log_softmax(_f(x)), -1)),
         kinds=("float", "int"), in_dtype=True),
    case("sparse_categorical_crossentropy",
         lambda o, x, y: (o.sparse_categorical_crossentropy(_LABELS[:len(x)], x),
                          o.sparse_categorical_crossentropy(_LABELS[:len(x)], x, from_logits=True)),
         lambda x, y: (_cce(_one_hot(_LABELS[:len(x)]), _f(x)),
                       -np.sum(_one_hot(_LABELS[:len(x)]) * _log_softmax(_f(x)), -1)), kinds=("float", "int"),
         in_dtype=True),
    case("psnr", lambda o, x, y: (o.psnr(x, y, 1.0), o.psnr(x, x, 2.0)),
         lambda x, y: (20 * np.log10(1.0) - 10 * np.log10(np.mean((_f(x) - _f(y)) ** 2)),
                       20 * np.log10(2.0) - 10 * np.log10(np.mean((_f(x) - _f(x)) ** 2))), kinds=("float", "int")),
    case("normalize", lambda o, x, y: (o.normalize(x), o.normalize(x, order=1, axis=0)),
         lambda x, y: (_f(x) * np.minimum(1 / np.sqrt(np.sum(_f(x) ** 2, -1, keepdims=True)), 1 / EPSILON),
                       _f(x) / np.maximum(np.sum(np.abs(_f(x)), 0, keepdims=True), EPSILON))),
    case("rms_normalization", lambda o, x, y: o.rms_normalization(x, scale=2.0),
         lambda x, y: _same(_f(x) / np.sqrt(np.mean(_f(x) ** 2, -1, keepdims=True) + EPSILON) * 2.0, x)
         if x.dtype.kind == "f" else _same(np.trunc(_f(x) / np.sqrt(np.mean(_f(x) ** 2, -1, keepdims=True)
                                                                     + EPSILON) * 2.0), x)),
    case("layer_normalization", lambda o, x, y: o.layer_normalization(x), lambda x, y: _layer_norm(_f(x)),
         kinds=FLOATS),
    case("batch_normalization",
         lambda o, x, y: o.batch_normalization(x, x[0], o.abs(y[0]), axis=-1, offset=y[1], scale=x[-1]),
         lambda x, y: x * (x[-1] / np.sqrt(np.abs(y[0]) + 1e-3)) + (y[1] - x[0] * (x[-1] / np.sqrt(np.abs(y[0])
                                                                                            + 1e-3))),
         kinds=("float",)),
    case("multi_hot", lambda o, x, y: o.multi_hot(x, 4), lambda x, y: np.max(_one_hot(x), axis=1),
         kinds=("int",), refuses={"float": DTypeError, "bool": DTypeError}),
    case("polar", lambda o, x, y: o.polar(x, y), _unsupported, kinds=(),
         refuses=dict.fromkeys(KINDS, DTypeError)),
    case("ctc_decode", lambda o, x, y: o.ctc_decode(x[None], np.array([4], np.int32)), _unsupported, kinds=(),
         refuses=dict.fromkeys(KINDS, ArgumentError)),
]

# --- convolution, pooling, attention ------------------------------------------------------------------------------
def _batch(x, o=None):
    """x as channels-last inputs ``[batch, length, channels]``: one example of x's rows, or (empty kind) a batch of
    none."""
    if x.shape[1]:
        return x[None]
    return o.reshape(x, (0, 2, 4)) if o is not None else np.reshape(x, (0, 2, 4))


def _windows_of(inputs, k, stride=1):
    """``[batch, positions, k, channels]``: the length-k windows of channels-last 1-D inputs."""
    view = np.lib.stride_tricks.sliding_window_view(inputs, k, axis=1)[:, ::stride]
    return np.moveaxis(view, -1, 2)


_KERNEL = np.array([[[0.5, 1.0, -1.0]] * 4, [[2.0, -0.5, 1.5]] * 4])  # [window 2, channels 4, out 3], no zeros
_DEPTHWISE = np.array([[[0.5], [1.0], [-1.0], [2.0]], [[1.5, ], [-0.5], [0.25], [3.0]]])  # [2, 4, 1]
_POINTWISE = np.array([[[1.0, -2.0, 0.5]] * 4])  # [1, 4, 3]
_ATTENTION_MASK = np.tril(np.ones((6, 6), bool))
_ATTENTION_MASK[2] = False  # a row that attends to nothing: uniform weights, as Keras


def _conv(inputs, kernel):
    return np.einsum("bpkc,kco->bpo", _windows_of(_f(inputs), kernel.shape[0]), kernel)


def _depthwise(inputs, kernel):
    return np.einsum("bpkc,kc->bpc", _windows_of(_f(inputs), kernel.shape[0]), kernel[..., 0])


def _conv_transpose(inputs, kernel):
    """Stride 1, "valid": every input position adds its kernel-weighted values at the positions it reaches."""
    batch, length, _ = inputs.shape
    k, out, _ = kernel.shape
    result = np.zeros((batch, length + k - 1, out))
    for t in range(length):
        for j in range(k):
            result[:, t + j] += np.einsum("bc,oc->bo", _f(inputs)[:, t], kernel[j])
    return result


def _attention(q, k, v, mask=None):
    q, k, v = _f(q), _f(k), _f(v)
    logits = np.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(q.shape[-1])
    if mask is not None:
        logits = np.where(mask, logits, -0.7 * np.finfo(np.float64).max)
    weights = _softmax(logits, -1)
    return np.einsum("bnts,bsnh->btnh", weights, v)


WINDOWS = [
    case("conv", lambda o, x, y: o.conv(_batch(x, o), _KERNEL), lambda x, y: _conv(_batch(x), _KERNEL),
         kinds=("float", "empty", "int", "bool")),
    case("conv2d", lambda o, x, y: o.conv2d(_batch(x, o)[..., None], _KERNEL[:, :2, :1, None]),
         lambda x, y: np.einsum("bpqkl,kl->bpq", np.lib.stride_tricks.sliding_window_view(
             _f(_batch(x)), (2, 2), axis=(1, 2)), _KERNEL[:, :2, 0])[..., None], kinds=("float", "int")),
    case("depthwise_conv", lambda o, x, y: o.depthwise_conv(_batch(x, o), _DEPTHWISE),
         lambda x, y: _depthwise(_batch(x), _DEPTHWISE), kinds=("float", "empty", "int")),
    case("separable_conv", lambda o, x, y: o.separable_conv(_batch(x, o), _DEPTHWISE, _POINTWISE),
         lambda x, y: _conv(_depthwise(_batch(x), _DEPTHWISE), _POINTWISE), kinds=("float", "empty", "int")),
    case("conv_transpose", lambda o, x, y: o.conv_transpose(_batch(x, o), np.swapaxes(_KERNEL, 1, 2)),
         lambda x, y: _conv_transpose(_batch(x), np.swapaxes(_KERNEL, 1, 2)), kinds=("float", "empty", "int")),
    case("max_pool", lambda o, x, y: (o.max_pool(_batch(x, o), 2), o.max_pool(_batch(x, o), 2, 1, "same")),
         lambda x, y: (np.max(_windows_of(_f(_batch(x)), 2, 2), 2),
                       np.max(_windows_of(np.pad(_f(_batch(x)), ((0, 0), (0, 1), (0, 0)), constant_values=-INF),
                                          2), 2)), kinds=("float", "empty", "int"), **ANY_ZERO),
    case("average_pool", lambda o, x, y: (o.average_pool(_batch(x, o), 2), o.average_pool(_batch(x, o), 3, 1)),
         lambda x, y: (np.mean(_windows_of(_f(_batch(x)), 2, 2), 2), np.mean(_windows_of(_f(_batch(x)), 3), 2)),
         kinds=("float",)),
    case("max_pool2d", lambda o, x, y: o.max_pool2d(_batch(x, o)[..., None], 2),
         lambda x, y: np.max(np.lib.stride_tricks.sliding_window_view(_f(_batch(x)), (2, 2), axis=(1, 2))[
             :, ::2, ::2], (-2, -1))[..., None], kinds=("float", "int"), **ANY_ZERO),
    case("dot_product_attention",
         lambda o, x, y: (o.dot_product_attention(x[None, :, None], y[None, :, None], x[None, :, None]),
                          o.dot_product_attention(x[None, :, None], y[None, :, None], x[None, :, None],
                                                  mask=_ATTENTION_MASK[:len(x), :len(x)])),
         lambda x, y: (_attention(x[None, :, None], y[None, :, None], x[None, :, None]),
                       _attention(x[None, :, None], y[None, :, None], x[None, :, None],
                                  _ATTENTION_MASK[:len(x), :len(x)])), kinds=("float", "int")),
]

# --- core: control flow, slices, scatter, casts -------------------------------------------------------------------
def _scatter(indices, values, shape):
    out = np.zeros(shape, values.dtype)
    np.add.at(out, tuple(indices.T), values)
    return out


def _scatter_update(x, indices, updates):
    out = x.copy()
    out[tuple(indices.T)] = updates
    return out


def _scan(x):
    carry, ys = np.zeros_like(x[0]), []
    for row in x:
        ys.append(carry * row)
        carry = carry + row
    return carry, np.stack(ys) if ys else np.zeros_like(x)


_POINTS = np.array([[0, 1], [1, 0], [0, 1]], np.int32)  # (0, 1) twice: a scatter adds the two


CORE = [
    unary("stop_gradient", lambda x: x, floating=False),
    case("convert_to_tensor", lambda o, x, y: (o.convert_to_tensor(x), o.convert_to_tensor([NAN, -INF, -0.0]),
                                               o.convert_to_tensor(x, "float32")),
         lambda x, y: (x, np.array([NAN, -INF, -0.0]), x.astype(np.float32))),
    case("is_tensor", lambda o, x, y: (o.is_tensor(x), o.is_tensor(np.asarray(1.0))), lambda x, y: (True, False)),
    case("saturate_cast", lambda o, x, y: o.saturate_cast(o.where(o.isnan(x), 0.0, x), "int8"),
         lambda x, y: np.clip(np.nan_to_num(x, nan=0.0, posinf=127, neginf=-128), -128, 127).astype(np.int8),
         kinds=FLOATS, variant="float"),
    case("saturate_cast", lambda o, x, y: (o.saturate_cast(x * 100, "int8"), o.saturate_cast(y, "uint8")),
         lambda x, y: (np.clip(x.astype(np.int64) * 100, -128, 127).astype(np.int8),
                       np.clip(y, 0, 255).astype(np.uint8)), kinds=("int",), variant="int"),
    case("slice", lambda o, x, y: (o.slice(x, (1, 0), (1, 2)), o.slice(x, (0, 0), (2, 0))),
         lambda x, y: (x[1:2, 0:2], x[0:2, 0:0]), kinds=("float", "int", "bool")),
    case("slice_update", lambda o, x, y: o.slice_update(x, (1, 1), y[:1, :2]),
         lambda x, y: np.concatenate([x[:1], np.concatenate([x[1:2, :1], y[:1, :2].astype(x.dtype), x[1:2, 3:]],
                                                            1), x[2:]]), kinds=("float", "int", "bool")),
    case("scatter", lambda o, x, y: o.scatter(_POINTS, x[0, :3], (2, 2)),
         lambda x, y: _scatter(_POINTS, x[0, :3], (2, 2)), kinds=("float", "int")),
    case("scatter_update", lambda o, x, y: o.scatter_update(x, _POINTS[:2], y[0, :2]),
         lambda x, y: _scatter_update(x, _POINTS[:2], y[0, :2]), kinds=("float", "int", "bool")),
    case("cond", lambda o, x, y: (o.cond(x[0, 0] > 0, lambda: x * 2, lambda: -x), o.cond(True, lambda: y, lambda: x)),
         lambda x, y: (x * 2 if x[0, 0] > 0 else -x, y), kinds=("float", "int")),
    case("switch", lambda o, x, y: (o.switch(1, [lambda a: a, lambda a: a * 2], x), o.switch(7, [lambda a: a,
                                                                                                  lambda a: -a], x)),
         lambda x, y: (x * 2, -x), kinds=NUMERIC),
    case("map", lambda o, x, y: o.map(lambda row: o.sum(row), x), lambda x, y: np.sum(x, -1, dtype=_sum_dtype(x))),
    case("vectorized_map", lambda o, x, y: o.vectorized_map(lambda row: o.max(row, initial=-INF) * 1.0, x),
         lambda x, y: np.max(_f(x), -1, initial=-INF), kinds=FLOATS),
    case("fori_loop", lambda o, x, y: o.fori_loop(0, 3, lambda i, v: v * 2 + i, x),
         lambda x, y: ((x * 2 + 0) * 2 + 1) * 2 + 2, kinds=NUMERIC),
    case("while_loop", lambda o, x, y: o.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 2), (0, x),
                                                  maximum_iterations=5),
         lambda x, y: (np.array(3, np.int32), x * 8), kinds=NUMERIC),
    case("associative_scan", lambda o, x, y: o.associative_scan(lambda a, b: a + b, x, axis=1),
         lambda x, y: np.cumsum(x, 1, dtype=x.dtype), kinds=NUMERIC),
    case("scan", lambda o, x, y: o.scan(lambda c, r: (c + r, c * r), o.zeros_like(x[0]), x),
         lambda x, y: _scan(x), kinds=NUMERIC),
]

# --- training context ---------------------------------------------------------------------------------------------
TRAINING = [
    case("all_finite", lambda o, x, y: (o.all_finite([x, y]), o.all_finite([y])),
         lambda x, y: (np.asarray(np.isfinite(x).all() & np.isfinite(y).all()), np.asarray(np.isfinite(y).all()))),
]

# --- signals, statistics, function transformations ----------------------------------------------------------------
def _finite(o, x):
    """x with NaN and infinities as 0, by ``ops`` or NumPy ``o``."""
    return o.where(o.isfinite(x), x, 0.0)


def _complex_pair(z):
    return z.real, z.imag


SIGNALS = [
    # Which outputs of a transform a NaN or an infinity reaches, and as NaN or inf, depends on the FFT's algorithm
    # (TensorFlow's, XLA's and NumPy's differ): their inputs are the kinds' finite values, and zeros for the others.
    case("fft", lambda o, x, y: o.fft((_finite(o, x), _finite(o, y))),
         lambda x, y: _complex_pair(np.fft.fft(_finite(np, x) + 1j * _finite(np, y))), kinds=("float",),
         **ANY_ZERO),
    case("fft2", lambda o, x, y: o.fft2((_finite(o, x), _finite(o, y))),
         lambda x, y: _complex_pair(np.fft.fft2(_finite(np, x) + 1j * _finite(np, y))),
         kinds=("float",), **ANY_ZERO),
    case("ifft2", lambda o, x, y: o.ifft2((_finite(o, x), _finite(o, y))),
         lambda x, y: _complex_pair(np.fft.ifft2(_finite(np, x) + 1j * _finite(np, y))),
         kinds=("float",), **ANY_ZERO),
    case("rfft", lambda o, x, y: o.rfft(_finite(o, x)), lambda x, y: _complex_pair(np.fft.rfft(_finite(np, x))),
         kinds=("float", "int"), **ANY_ZERO),
    case("irfft", lambda o, x, y: o.irfft((_finite(o, x), _finite(o, y))),
         lambda x, y: np.fft.irfft(_finite(np, x) + 1j * _finite(np, y)), kinds=("float",), **ANY_ZERO),
    case("extract_sequences", lambda o, x, y: o.extract_sequences(x, 2, 1),
         lambda x, y: np.lib.stride_tricks.sliding_window_view(x, 2, axis=-1), kinds=("float", "int", "bool")),
]
STATISTICS_AND_FUNCTIONS = [
    case("vectorize", lambda o, x, y: o.vectorize(lambda a, b: o.add(a, b) * 2)(x, y),
         lambda x, y: np.add(x, y) * 2, kinds=NUMERIC),
    case("custom_gradient", lambda o, x, y: o.custom_gradient(lambda a: (o.sqrt(a), lambda g: g))(x),
         lambda x, y: np.sqrt(_f(x)), kinds=("float", "empty", "int")),
]


CASES: list[Case] = [*ELEMENTWISE, *SHAPES, *BASIC, *MATH, *ARRAYS, *REDUCTIONS, *LINALG, *NN, *WINDOWS, *SIGNALS,
                     *CORE, *STATISTICS_AND_FUNCTIONS, *TRAINING]
#: Differences not fixed yet, ``(case id, backend, kind[, dtype]): why`` (no dtype: both): each must still differ
#: (the test fails when one is fixed, so the entry leaves with the fix).
KNOWN: dict[tuple[str, ...], str] = {
    **dict.fromkeys((("matmul", "tensorflow", kind) for kind in ("float", "int")),
                    "a vector times a vector: a raw InvalidArgumentError (backends/tensorflow/ops.py's matmul "
                    "indexes the product of two vectors as a matrix's row)"),
    ("matmul", "tensorflow", "bool"): "a raw InvalidArgumentError: TensorFlow has no boolean MatMul kernel",
    ("argmax", "tensorflow", "float"): "-0.0 and 0.0 tie (the first wins); Keras' argmax counts -0.0 below 0.0 "
                                       "on every backend",
    **dict.fromkeys((("all_finite", "tensorflow", kind) for kind in ("int", "bool")),
                    "a raw InvalidArgumentError: tf.math.is_finite has no integer or boolean kernel"),
    **dict.fromkeys(((f"{op}[{variant}]", "tensorflow", "bool") for op in ("max", "min")
                     for variant in ("axis=None", "axis=0,keepdims", "axis=-1")),
                    "a raw InvalidArgumentError: TensorFlow has no boolean Max/Min kernel (amax and amin take "
                    "any and all)"),
    **dict.fromkeys((("floor_divide", backend, "float") for backend in ("tensorflow", "aesara", "pytensor")),
                    "-0.5 // inf is -0.0 (the floor of the quotient) where NumPy and JAX give -1 (their divmod: the "
                    "remainder takes the divisor's sign, inf)"),
    **dict.fromkeys((("matmul", backend, kind) for backend in ("aesara", "pytensor")
                     for kind in ("float", "int", "bool")),
                    "a vector times a vector: a raw IndexError (backends/theano/ops.py's matmul indexes the product "
                    "of two vectors as a matrix's row)"),
    **dict.fromkeys((("argmax", backend, "float") for backend in ("aesara", "pytensor")),
                    "-0.0 and 0.0 tie (the first wins); Keras' argmax counts -0.0 below 0.0 on every backend"),
    ("binary_crossentropy", "aesara", "float"): "from_logits with target 0 and logit -inf: 0 where Keras (and "
                                                "TensorFlow here) give 0 * inf = NaN: the engine rewrites a product "
                                                "with a 0/1 factor into a switch",
    ("categorical_crossentropy", "aesara", "float"): "a target of zeros against NaN probabilities: -0.0 where "
                                                     "Keras gives NaN (the engine's 0 * x rewrite, as above)",
    **dict.fromkeys(((op, "aesara", "float", "float64") for op in ("depthwise_conv", "separable_conv")),
                    "a NaN or an infinity in one channel reaches every channel (XLA's CPU compiler "
                    "turns a float64 feature-grouped convolution into a dense one with a zero-masked kernel)"),
    ("psnr", "aesara", "float"): "psnr(x, x) with infinite x: inf where Keras gives NaN (inf - inf): the engine "
                                 "rewrites x - x into 0",
    **dict.fromkeys(((f"logsumexp[{variant}]", backend, "empty") for variant in ("axis=None", "axis=-1")
                     for backend in ("tensorflow", "aesara", "pytensor")),
                    "a ShapeError where NumPy, SciPy and JAX give -inf (the log of an empty sum): toolkit/nn/ops.py's "
                    "logsumexp takes the maximum without initial=-inf"),
}
#: Public ops with no case, and why.
EXCLUDED: dict[str, str] = {
    "ctc_loss": "no closed-form reference: tests/test_ops_nn.py checks it against a brute-force sum over every "
                "alignment; NaN and infinite logits have no defined alignment probabilities",
    "training": "training context: a Python flag of the trainer's step, no array input",
    "update_state": "training context: writes model state, defined only inside a trainer's step",
    "cross_replica_sum": "training context: a sum over the replicas of a data-parallel step (refused outside one)",
    "example_uniform": "random: no reference (noise defined only inside a training run)",
    "corrcoef": "added by another task, has its own tests: tests/test_ops_statistics.py runs it on NaN, -0.0, "
                "empty, integer and boolean inputs",
    "unique": "added by another task, has its own tests: tests/test_ops_statistics.py runs it on NaN, -0.0, "
              "empty, integer and boolean inputs",
    "stft": "its framing and window are extract_sequences' and its transform rfft's, both in the table; "
            "tests/test_ops_signal.py checks it against NumPy",
    "istft": "the inverse of stft (excluded above); tests/test_ops_signal.py checks it against NumPy",
}
