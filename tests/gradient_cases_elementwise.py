"""The gradient entries of the elementwise, shape, basic and math ops (see :mod:`tests.gradient_cases`)."""

from __future__ import annotations

import numpy as np
import scipy.special

from tests.gradient_cases_common import _IDS, _pairs
from tests.test_ops_core import _softmax

#: The arithmetic, comparisons and basic activations (ops_elementwise).
ELEMENTWISE = {
    **{name: (("x",), None, getattr(np, name)) for name in ("abs", "cos", "exp", "negative", "sin", "square", "tanh")},
    **_pairs("add", "subtract", "multiply", "maximum", "minimum"),
    "divide": (("x", "p"), None, np.divide),
    "log": (("p",), None, np.log), "sqrt": (("p",), None, np.sqrt),
    "power": (("p", "y"), None, np.power),
    "mod": (("x", "p"), None, np.mod),
    "clip": (("x",), lambda o, x: o.clip(x, -0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7)),
    "erf": (("x",), None, scipy.special.erf),
    "gelu": (("x",), None, lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),
    "gelu.exact": (("x",), lambda o, x: o.gelu(x, approximate=False),
                   lambda x: 0.5 * x * (1 + scipy.special.erf(x / np.sqrt(2)))),
    "relu": (("z",), None, lambda z: np.maximum(z, 0.0)),
    "sigmoid": (("z",), None, scipy.special.expit),
    "silu": (("z",), None, lambda z: z * scipy.special.expit(z)),
    "softplus": (("z",), None, lambda z: np.logaddexp(0.0, z)),
    "softmax": (("t",), lambda o, t: o.softmax(t, axis=(0, -1)), lambda t: _softmax(t, (0, 2))),
    "softmax.all": (("x",), lambda o, x: o.softmax(x, axis=None), lambda x: _softmax(x, None)),
    "log_softmax": (("t",), lambda o, t: o.log_softmax(t, 1), lambda t: np.log(_softmax(t, 1))),
    "where": (("x", "y"), lambda o, x, y: o.where(x > 0.1, x * y, y), lambda x, y: np.where(x > 0.1, x * y, y)),
}
#: Shapes, joins, indexing, gathering (ops_shapes).
SHAPES = {
    "broadcast_to": (("w",), lambda o, w: o.broadcast_to(w, (2, 3)), lambda w: np.broadcast_to(w, (2, 3))),
    "cast": (("x",), lambda o, x: o.cast(x, "float64"), lambda x: x),
    "concat": (("x", "y"), lambda o, x, y: o.concat([x, y], axis=1), lambda x, y: np.concatenate([x, y], 1)),
    "concatenate": (("x", "v"), lambda o, x, v: o.concatenate([x, v], axis=None),
                    lambda x, v: np.concatenate([x.ravel(), v])),
    "expand_dims": (("x",), lambda o, x: o.expand_dims(x, (0, -1)), lambda x: np.expand_dims(x, (0, -1))),
    "getitem": (("t",), lambda o, t: o.getitem(t, (1, slice(None, None, -2), None, Ellipsis)),
                lambda t: t[1, ::-2, None, ...]),
    "pad": (("x",), lambda o, x: o.pad(x, ((1, 0), (0, 2)), "constant", 0.5),
            lambda x: np.pad(x, ((1, 0), (0, 2)), constant_values=0.5)),
    "pad.reflect": (("x",), lambda o, x: o.pad(x, ((2, 1), (3, 2)), "reflect"),
                    lambda x: np.pad(x, ((2, 1), (3, 2)), "reflect")),
    "pad.symmetric_edge_wrap": (("x",), lambda o, x: o.pad(o.pad(o.pad(x, 1, "symmetric"), (1, 2), "edge"),
                                                           ((0, 1), (6, 0)), "wrap"),
                                lambda x: np.pad(np.pad(np.pad(x, 1, "symmetric"), (1, 2), "edge"),
                                                 ((0, 1), (6, 0)), "wrap")),
    "reshape": (("t",), lambda o, t: o.reshape(t, (4, -1)), lambda t: t.reshape(4, -1)),
    "squeeze": (("x",), lambda o, x: o.squeeze(o.reshape(x, (3, 1, 4, 1)), (1, -1)), lambda x: x),
    "stack": (("x", "y"), lambda o, x, y: o.stack([x, y], axis=1), lambda x, y: np.stack([x, y], 1)),
    "take": (("x",), lambda o, x: o.take(x, np.array([[2, 0], [-1, 2]]), axis=1),
             lambda x: np.take(x, [[2, 0], [3, 2]], axis=1)),
    "take.flat": (("t",), lambda o, t: o.take(t, np.array([5, 23, 0, 5])), lambda t: t.ravel()[[5, 23, 0, 5]]),
    "take_along_axis": (("x",), lambda o, x: o.take_along_axis(x, _IDS, axis=1),
                        lambda x: np.take_along_axis(x, _IDS, axis=1)),
    # Two gathers of one tensor: their gradients once failed to compile in Aesara (local_IncSubtensor_serialize).
    "take_along_axis.twice": (("x",), lambda o, x: o.take_along_axis(x, _IDS, 1) * o.take_along_axis(x, _IDS[::-1], 1),
                              lambda x: np.take_along_axis(x, _IDS, 1) * np.take_along_axis(x, _IDS[::-1], 1)),
    "transpose": (("t",), lambda o, t: o.transpose(t, (-1, 0, -2)), lambda t: np.transpose(t, (2, 0, 1))),
}
#: Basic reductions and matmul (ops.Ops).
BASIC = {
    "cumsum": (("t",), lambda o, t: o.cumsum(t, axis=1), lambda t: np.cumsum(t, axis=1)),
    "logsumexp": (("t",), lambda o, t: o.logsumexp(t, axis=(0, 2)),
                  lambda t: scipy.special.logsumexp(t, axis=(0, 2))),
    "matmul": (("t", "s"), lambda o, t, s: o.matmul(t[:, :, :3], s[:2]), lambda t, s: t[:, :, :3] @ s[:2]),
    "max": (("x",), lambda o, x: o.max(x, axis=1, initial=0.1), lambda x: np.max(x, axis=1, initial=0.1)),
    "min": (("x",), lambda o, x: o.min(x, axis=0, keepdims=True), lambda x: np.min(x, axis=0, keepdims=True)),
    "mean": (("t",), lambda o, t: o.mean(t, axis=(0, 2)), lambda t: np.mean(t, axis=(0, 2))),
    "moments": (("t",), lambda o, t: o.moments(t, (0, 1)), lambda t: (t.mean((0, 1)), t.var((0, 1)))),
    "sum": (("t",), lambda o, t: o.sum(t, axis=1, keepdims=True), lambda t: t.sum(1, keepdims=True)),
}
#: Elementwise math (ops_math). Piecewise-constant ops (floor, round, sign...) have gradient 0, as their references.
MATH = {
    **{name: (("x",), None, getattr(np, name))
       for name in ("absolute", "arcsinh", "arctan", "cbrt", "ceil", "conj", "conjugate", "cosh", "deg2rad", "exp2",
                    "expm1", "fabs", "floor", "nan_to_num", "rad2deg", "real", "round", "sign", "sinh", "tan",
                    "trunc", "angle", "imag")},
    **{name: (("u",), None, getattr(np, name)) for name in ("arccos", "arcsin", "arctanh")},
    **{name: (("p",), None, getattr(np, name)) for name in ("log1p", "log2", "log10", "reciprocal")},
    "arccosh": (("g",), None, np.arccosh),
    "rsqrt": (("p",), None, lambda p: 1 / np.sqrt(p)),
    "erfc": (("x",), None, scipy.special.erfc), "erfinv": (("u",), None, scipy.special.erfinv),
    "i0": (("x",), None, scipy.special.i0),
    "sinc": (("x",), None, np.sinc),
    "sinc.zero": (("w",), lambda o, w: o.sinc(w * np.array([0.0, 1.0, 1.0])),
                  lambda w: np.sinc(w * np.array([0.0, 1.0, 1.0]))),
    **_pairs("arctan2", "hypot", "fmax", "fmin", "logaddexp", "logaddexp2", "true_divide"),
    "fmod": (("x", "p"), None, np.fmod),
    "logaddexp.tie": (("x", "x"), None, np.logaddexp),
    "divide_no_nan": (("x", "p"), None, np.divide),
    # Keras' convention: no gradient through a zero denominator (the reference is 0 near one, as the op is at it).
    "divide_no_nan.zero": (("w", "w"), lambda o, a, b: o.divide_no_nan(a, b * np.array([0.0, 1.0, 0.0])),
                           lambda a, b: np.where([True, False, True], 0.0, a / np.where([1, 0, 1], 1.0, b))),
    # x2 is the value at x1 == 0: zeros in x1 (exact, whatever the step) give it a gradient.
    "heaviside": (("x", "y"), lambda o, x, y: o.heaviside(x * (1 - np.eye(3, 4)), y),
                  lambda x, y: np.heaviside(x * (1 - np.eye(3, 4)), y)),
    "ldexp": (("x",), lambda o, x: o.ldexp(x, np.arange(-3, 9, dtype=np.int32).reshape(3, 4)),
              lambda x: np.ldexp(x, np.arange(-3, 9).reshape(3, 4))),
    "round.decimals": (("x",), lambda o, x: o.round(x * 0.37, 2), lambda x: np.round(x * 0.37, 2)),
    "nextafter": (("x", "y"), None, lambda x, y: x),  # its gradient is 1 for x1 and 0 for x2 (the op's convention)
}
