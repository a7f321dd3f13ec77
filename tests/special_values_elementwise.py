"""Special-value cases of the elementwise, shape, basic reduction and elementwise-math ops (see
:mod:`tests.special_values_table`)."""

from __future__ import annotations

import numpy as np
import scipy.special

from tests.special_values_common import (
    ANY_ZERO,
    FLOATS,
    IN_DTYPE,
    NUMERIC,
    _f,
    _gelu,
    _int32,
    _logsumexp,
    _max,
    _mean,
    _min,
    _one_hot,
    _reductions,
    _same,
    _sigmoid,
    _signed,
    _softmax,
    _softplus,
    _sum,
    _sum_dtype,
    _var,
    binary,
    case,
    unary,
)
from toolkit.errors import DTypeError, ShapeError

# --- arithmetic, comparisons, basic activations ------------------------------------------------------------------
ELEMENTWISE = [
    binary("add", np.add),
    binary("subtract", np.subtract, kinds=NUMERIC, refuses={"bool": DTypeError}),
    binary("multiply", np.multiply),
    binary("divide", np.divide, floating=True),
    binary("floor_divide", np.floor_divide, kinds=NUMERIC),
    binary("mod", np.mod, kinds=NUMERIC, options=ANY_ZERO),
    # By x, whose entries include zeros of both signs (and of integers: NumPy's 0), NaN and infinities.
    case("floor_divide", lambda o, x, y: o.floor_divide(y, x), lambda x, y: np.floor_divide(y, x), kinds=NUMERIC,
         variant="by x"),
    case("mod", lambda o, x, y: o.mod(y, x), lambda x, y: np.mod(y, x), kinds=NUMERIC, variant="by x", **ANY_ZERO),
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
    *_reductions("max", _max, refuses_empty_axis=ShapeError, signed_zeros=False),
    *_reductions("min", _min, refuses_empty_axis=ShapeError, signed_zeros=False),
    *_reductions("logsumexp", _logsumexp, kinds=NUMERIC),
    case("argmax", lambda o, x, y: (o.argmax(x), o.argmax(x, axis=-1), o.argmax(x, axis=0, keepdims=True)),
         lambda x, y: (_int32(np.argmax(_signed(x))), _int32(np.argmax(_signed(x), -1)),
                       _int32(np.argmax(_signed(x), 0, keepdims=True))),
         kinds=("float", "int", "bool"), refuses={"empty": ShapeError}),
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
