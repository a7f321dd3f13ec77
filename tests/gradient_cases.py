"""The table of every differentiable public op of ``ops``, for ``tests/test_ops_gradients.py``: one small float64
case per entry, with its NumPy reference (Keras' semantics), and the ops that have no gradient to check, each with
its reason.

An entry is ``"op"`` or ``"op.variant": (inputs, call, reference)``: ``inputs`` names arrays of :data:`INPUTS`
(each entry differentiates its own copies of them), ``call(ops, *arrays)`` runs the toolkit's op (``None``: the op of
the entry's name applied to the arrays), and ``reference(*arrays)`` is the same in NumPy (a NumPy or SciPy function,
or a lambda). Integer arguments (indices, segment ids, labels) are constants inside the calls. A call may return a
tuple or list of arrays (``split``, ``svd``): they are flattened and joined, as their references are. Points sit away
from kinks (the kink gradients are JAX's, checked in ``tests/test_ops_nn.py``) and inside every op's domain.
"""

from __future__ import annotations

import operator

import numpy as np
import scipy.signal
import scipy.special

from tests.test_ops_core import _cumulative, _scattered, _softmax, _updated
from tests.test_ops_linalg import _cross, trapz
from tests.test_ops_nn import COMPOSITES, _expm1_branch, _log_sigmoid, _relu6
from tests.test_ops_nn import INPUTS as NN_INPUTS
from tests.test_ops_reductions import _SEGMENT_MAX, _SEGMENT_MIN, _SEGMENT_SUM, _segment_reference
from tests.test_ops_windows import CASES as WINDOW_CASES
from tests.test_ops_windows import INPUTS as WINDOW_INPUTS
from tests.test_ops_windows import _used as _window_inputs_read
from tests.test_ops_windows import np_conv, np_pool
from toolkit.nn.ops_nn import SELU_ALPHA, SELU_SCALE

_R = np.random.default_rng(2026)
_A = _R.normal(size=(2, 3, 3)) * 0.3 + 2 * np.eye(3)  # well-conditioned square matrices
#: Named float64 inputs, small: each compiled gradient holds every entry of its group.
INPUTS = {
    "x": _R.normal(size=(3, 4)), "y": _R.normal(size=(3, 4)), "v": _R.normal(size=5), "w": _R.normal(size=3),
    "t": _R.normal(size=(2, 3, 4)), "s": _R.normal(size=(4, 3, 2)),
    "u": _R.uniform(-0.8, 0.8, (3, 4)),      # inside (-1, 1): arccos, arctanh, erfinv
    "p": _R.uniform(0.5, 2.0, (3, 4)),       # positive: log, sqrt, rsqrt, power's base
    "g": _R.uniform(1.2, 3.0, (3, 4)),       # above 1: arccosh
    "zeros": np.array([[1.5, 0.0, -2.0, 0.7, 1.2], [0.0, 3.0, 0.0, 1.1, 0.4], [0.9, -1.3, 2.2, 0.4, 0.0]]),  # prod
    # Away from every activation's kinks (0, +-0.5, +-1, +-3, 6) by more than the difference step.
    "z": np.array([-7.0, -3.6, -2.2, -1.3, -0.8, -0.3, 0.2, 0.7, 1.4, 2.7, 4.6, 6.4, 9.0]),
    "a": _A, "spd": _A @ np.swapaxes(_A, -1, -2) + np.eye(3), "b": _R.normal(size=(2, 3, 2)),
    "m": _R.normal(size=(4, 3)),
}
_HOLES = np.eye(3, 4, dtype=bool)  # NaN made inside the model: a trainer refuses NaN parameters
_IDS = np.array([[2, 0, 1, 3], [1, 1, 0, 2], [3, 2, 2, 0]])


def _nan(o, x):
    return o.where(_HOLES, np.nan, x)


def _np_nan(x):
    return np.where(_HOLES, np.nan, x)


def _pairs(*names):
    return {name: (("x", "y"), None, getattr(np, name)) for name in names}


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
#: Array creation, shapes and indexing (ops_arrays).
ARRAYS = {
    "append": (("x", "v"), None, np.append),
    "array": (("x",), None, np.array),
    "array_split": (("v",), lambda o, v: o.array_split(v, 3), lambda v: np.array_split(v, 3)),
    "copy": (("x",), None, np.copy),
    "diag": (("v",), lambda o, v: o.diag(v, 1), lambda v: np.diag(v, 1)),
    "diag.matrix": (("x",), lambda o, x: o.diag(x, -1), lambda x: np.diag(x, -1)),
    "diagflat": (("x",), lambda o, x: o.diagflat(x[:2, :2]), lambda x: np.diagflat(x[:2, :2])),
    "diagonal": (("t",), lambda o, t: o.diagonal(t, 1, 2, 1), lambda t: np.diagonal(t, 1, 2, 1)),
    "diff": (("t",), lambda o, t: o.diff(t, 2, 1), lambda t: np.diff(t, 2, 1)),
    "dsplit": (("t",), lambda o, t: o.dsplit(t, [1, 3]), lambda t: np.dsplit(t, [1, 3])),
    "dstack": (("x", "y"), lambda o, x, y: o.dstack([x, y]), lambda x, y: np.dstack([x, y])),
    "flip": (("t",), lambda o, t: o.flip(t, (0, 2)), lambda t: np.flip(t, (0, 2))),
    "fliplr": (("x",), None, np.fliplr), "flipud": (("x",), None, np.flipud),
    "full": (("w",), lambda o, w: o.full((2, 3), w), lambda w: np.full((2, 3), w)),
    "full_like": (("x", "v"), lambda o, x, v: o.full_like(x, v[:4]), lambda x, v: np.full_like(x, v[:4])),
    "geomspace": (("w",), lambda o, w: o.geomspace(1.0 + w * w, 2.0 + w * w, 4),
                  lambda w: np.geomspace(1.0 + w * w, 2.0 + w * w, 4)),
    "hsplit": (("x",), lambda o, x: o.hsplit(x, 2), lambda x: np.hsplit(x, 2)),
    "hstack": (("x", "y"), lambda o, x, y: o.hstack([x, y]), lambda x, y: np.hstack([x, y])),
    "linspace": (("w", "v"), lambda o, w, v: o.linspace(w[:2], v[:2], 4), lambda w, v: np.linspace(w[:2], v[:2], 4)),
    "logspace": (("w", "v"), lambda o, w, v: o.logspace(w[:2] * 0.3, v[:2] * 0.3, 4, base=3.0),
                 lambda w, v: np.logspace(w[:2] * 0.3, v[:2] * 0.3, 4, base=3.0)),
    "meshgrid": (("w", "v"), lambda o, w, v: o.meshgrid(w, v), lambda w, v: np.meshgrid(w, v)),
    "moveaxis": (("t",), lambda o, t: o.moveaxis(t, 0, -1), lambda t: np.moveaxis(t, 0, -1)),
    "ravel": (("t",), None, np.ravel),
    "repeat": (("t",), lambda o, t: o.repeat(t, 2, axis=1), lambda t: np.repeat(t, 2, axis=1)),
    "repeat.counts": (("v",), lambda o, v: o.repeat(v, [0, 1, 2, 0, 3]), lambda v: np.repeat(v, [0, 1, 2, 0, 3])),
    "roll": (("t",), lambda o, t: o.roll(t, 5, axis=2), lambda t: np.roll(t, 5, axis=2)),
    "roll.tensor_shift": (("x",), lambda o, x: o.roll(x, o.array(1), axis=1), lambda x: np.roll(x, 1, axis=1)),
    "rot90": (("x",), None, np.rot90),
    "select": (("v", "w"), lambda o, v, w: o.select([v > 0, v < -1], [v * v, 2 * v], w[0]),
               lambda v, w: np.select([v > 0, v < -1], [v * v, 2 * v], w[0])),
    "split": (("x",), lambda o, x: o.split(x, [1, 3], axis=1), lambda x: np.split(x, [1, 3], axis=1)),
    "swapaxes": (("t",), lambda o, t: o.swapaxes(t, 0, 2), lambda t: np.swapaxes(t, 0, 2)),
    "tile": (("x",), lambda o, x: o.tile(x, [2, 1, 2]), lambda x: np.tile(x, [2, 1, 2])),
    "trace": (("t",), lambda o, t: o.trace(t, axis1=1, axis2=2), lambda t: np.trace(t, axis1=1, axis2=2)),
    "tril": (("t",), lambda o, t: o.tril(t, -1), lambda t: np.tril(t, -1)),
    "triu": (("x",), lambda o, x: o.triu(x, 1), lambda x: np.triu(x, 1)),
    "unstack": (("t",), lambda o, t: o.unstack(t, axis=2), lambda t: list(np.moveaxis(t, 2, 0))),
    "vander": (("v",), lambda o, v: o.vander(v, 4), lambda v: np.vander(v, 4)),
    "vsplit": (("x",), lambda o, x: o.vsplit(x, 3), lambda x: np.vsplit(x, 3)),
    "vstack": (("v", "v"), lambda o, a, b: o.vstack([a, b]), lambda a, b: np.vstack([a, b])),
}
_SEGMENT_PROD = _segment_reference(np.multiply, 1.0)
_Q = np.array([0.3, 0.5, 0.9])
#: Reductions, sorting, quantiles, the nan* family, segments (ops_reductions). NaN holes are made inside the model
#: (their entries get no gradient: tests/test_ops_reductions.py checks that on its own).
REDUCTIONS = {
    "amax": (("x",), lambda o, x: o.amax(x, axis=1), lambda x: np.amax(x, axis=1)),
    "amin": (("x",), lambda o, x: o.amin(x, axis=0, keepdims=True), lambda x: np.amin(x, axis=0, keepdims=True)),
    "average": (("x", "p"), lambda o, x, p: o.average(x, axis=1, weights=p[0]),
                lambda x, p: np.average(x, axis=1, weights=p[0])),
    "bincount": (("v",), lambda o, v: o.bincount(np.array([0, 1, 1, 3, 0]), weights=v),
                 lambda v: np.bincount([0, 1, 1, 3, 0], weights=v)),
    "cumprod": (("zeros",), lambda o, c: o.cumprod(c, axis=1), lambda c: np.cumprod(c, axis=1)),
    "median": (("x",), lambda o, x: o.median(x, axis=1), lambda x: np.median(x, axis=1)),
    "percentile": (("x",), lambda o, x: o.percentile(x, 100 * _Q, axis=0), lambda x: np.percentile(x, 100 * _Q, 0)),
    "prod": (("zeros",), lambda o, c: o.prod(c, axis=1), lambda c: np.prod(c, axis=1)),
    "ptp": (("x",), lambda o, x: o.ptp(x, axis=1), lambda x: np.ptp(x, axis=1)),
    "quantile": (("x",), lambda o, x: o.quantile(x, _Q, axis=1), lambda x: np.quantile(x, _Q, axis=1)),
    "sort": (("x",), lambda o, x: o.sort(x, axis=0), lambda x: np.sort(x, axis=0)),
    "std": (("x",), lambda o, x: o.std(x, axis=(0, 1), keepdims=True), lambda x: np.std(x, keepdims=True)),
    "top_k": (("x",), lambda o, x: o.top_k(x, 2)[0], lambda x: -np.sort(-x, -1)[:, :2]),
    "var": (("x",), lambda o, x: o.var(x, axis=0), lambda x: np.var(x, axis=0)),
    "segment_sum": (("m",), lambda o, m: o.segment_sum(m, np.array([1, 0, 1, -1]), 3),
                    lambda m: _SEGMENT_SUM(m, [1, 0, 1, -1], 3)),
    "segment_max": (("m",), lambda o, m: o.segment_max(m, np.array([1, 0, 1, 1]), 2),
                    lambda m: _SEGMENT_MAX(m, [1, 0, 1, 1], 2)),
    "segment_min": (("m",), lambda o, m: o.segment_min(m, np.array([1, 0, 0, 1]), 2),
                    lambda m: _SEGMENT_MIN(m, [1, 0, 0, 1], 2)),
    "segment_prod": (("m",), lambda o, m: o.segment_prod(m, np.array([1, 0, 1, 1]), 2),
                     lambda m: _SEGMENT_PROD(m, [1, 0, 1, 1], 2)),
    **{name: (("x",), lambda o, x, name=name: getattr(o, name)(_nan(o, x), axis=1),
              lambda x, name=name: getattr(np, name)(_np_nan(x), axis=1))
       for name in ("nancumprod", "nancumsum", "nanmax", "nanmean", "nanmedian", "nanmin", "nanprod", "nanstd",
                    "nansum", "nanvar")},
    "nanpercentile": (("x",), lambda o, x: o.nanpercentile(_nan(o, x), 100 * _Q, axis=1),
                      lambda x: np.nanpercentile(_np_nan(x), 100 * _Q, axis=1)),
    "nanquantile": (("x",), lambda o, x: o.nanquantile(_nan(o, x), _Q, axis=0),
                    lambda x: np.nanquantile(_np_nan(x), _Q, axis=0)),
}


def _svd(o, m):
    u, s, vh = o.svd(m, full_matrices=False)
    return [s, o.matmul(u * s[None, :], vh)]  # sign-free parts


def _qr(o, m):
    q, r = o.qr(m)
    return [o.matmul(q, r), o.abs(r)]


def _eigh(o, spd):
    w, vecs = o.eigh(spd)
    return [w, o.abs(vecs)]


#: Products and linear algebra (ops_linalg); decompositions through their sign-free parts.
LINALG = {
    "cdist": (("x", "y"), None, lambda x, y: np.sqrt(np.sum((x[:, None] - y[None]) ** 2, axis=-1))),
    "cholesky": (("spd",), None, np.linalg.cholesky),
    "cholesky.upper": (("spd",), lambda o, a: o.cholesky(a, upper=True),
                       lambda a: np.swapaxes(np.linalg.cholesky(a), -1, -2)),
    "correlate": (("v", "w"), lambda o, v, w: o.correlate(v, w, "same"), lambda v, w: np.correlate(v, w, "same")),
    "correlate.full": (("w", "v"), lambda o, w, v: o.correlate(w, v, "full"), lambda w, v: np.correlate(w, v, "full")),
    "cross": (("x", "y"), lambda o, x, y: o.cross(x[:, :3], y[:, :3]), lambda x, y: np.cross(x[:, :3], y[:, :3])),
    "cross.2d": (("x", "y"), lambda o, x, y: o.cross(x[:, :2], y[:, :3]), lambda x, y: _cross(x[:, :2], y[:, :3])),
    "det": (("a",), None, np.linalg.det),
    "dot": (("t", "m"), None, np.dot),
    "eigh": (("spd",), _eigh, lambda a: [np.linalg.eigh(a)[0], np.abs(np.linalg.eigh(a)[1])]),
    "einsum": (("t", "s"), lambda o, t, s: o.einsum("ijk,kjl->il", t, s), lambda t, s: np.einsum("ijk,kjl->il", t, s)),
    "einsum.diagonal": (("t",), lambda o, t: o.einsum("iij->ji", o.reshape(t, (2, 2, 6))),
                        lambda t: np.einsum("iij->ji", t.reshape(2, 2, 6))),
    "einsum.three": (("t", "s", "w"), lambda o, t, s, w: o.einsum("bij,jkb,k->bi", t[:, :, :3], s[:3], w),
                     lambda t, s, w: np.einsum("bij,jkb,k->bi", t[:, :, :3], s[:3], w)),
    "inner": (("x", "y"), None, np.inner),
    "inv": (("a",), None, np.linalg.inv),
    "kron": (("w", "x"), None, np.kron),
    "logdet": (("spd",), None, lambda a: np.linalg.slogdet(a)[1]),
    "lstsq": (("m",), lambda o, m: o.lstsq(m, o.exp(m)), lambda m: np.linalg.lstsq(m, np.exp(m), rcond=None)[0]),
    "norm": (("m",), None, np.linalg.norm),
    **{f"norm.{name}": (("m",), lambda o, m, order=order: o.norm(m, order), lambda m, order=order: np.linalg.norm(
        m, order)) for name, order in (("nuc", "nuc"), ("2", 2), ("-2", -2), ("1", 1), ("inf", np.inf))},
    "norm.vector3": (("a",), lambda o, a: o.norm(a, 3, axis=1), lambda a: np.linalg.norm(a, 3, axis=1)),
    "outer": (("w", "v"), None, np.outer),
    "qr": (("m",), _qr, lambda m: [m, np.abs(np.linalg.qr(m)[1])]),
    "slogdet": (("a",), lambda o, a: o.slogdet(a)[1], lambda a: np.linalg.slogdet(a)[1]),
    "solve": (("a", "b"), None, np.linalg.solve),
    "solve_triangular": (("a", "b"), lambda o, a, b: o.solve_triangular(a, b, lower=True),
                         lambda a, b: np.linalg.solve(np.tril(a), b)),
    "svd": (("m",), _svd, lambda m: [np.linalg.svd(m, compute_uv=False), m]),
    "tensordot": (("t", "s"), lambda o, t, s: o.tensordot(t, s, axes=([1, 2], [1, 0])),
                  lambda t, s: np.tensordot(t, s, axes=([1, 2], [1, 0]))),
    "trapezoid": (("x",), lambda o, x: o.trapezoid(x, x=o.exp(x)), lambda x: trapz(x, x=np.exp(x))),
    "trapezoid.dx": (("t",), lambda o, t: o.trapezoid(t, dx=0.5, axis=1), lambda t: trapz(t, dx=0.5, axis=1)),
    "vdot": (("x", "y"), None, np.vdot),
}
#: Activations, losses, normalizations (ops_nn).
NN = {
    **{name: (("z",), None, reference) for name, reference in {
        "relu6": _relu6, "elu": _expm1_branch, "selu": lambda z: SELU_SCALE * _expm1_branch(z, SELU_ALPHA),
        "leaky_relu": lambda z: np.where(z >= 0, z, 0.2 * z), "log_sigmoid": _log_sigmoid,
        "hard_sigmoid": lambda z: _relu6(z + 3.0) / 6.0, "hard_silu": lambda z: z * _relu6(z + 3.0) / 6.0,
        "hard_swish": lambda z: z * _relu6(z + 3.0) / 6.0, "swish": lambda z: z * scipy.special.expit(z),
        "hard_tanh": lambda z: np.clip(z, -1.0, 1.0), "hard_shrink": lambda z: np.where(np.abs(z) > 0.5, z, 0.0),
        "soft_shrink": lambda z: np.sign(z) * np.maximum(np.abs(z) - 0.5, 0.0), "tanh_shrink": lambda z: z - np.tanh(z),
        "softsign": lambda z: z / (1.0 + np.abs(z)),
        "sparse_plus": lambda z: np.where(z <= -1, 0.0, np.where(z < 1, (z + 1) ** 2 / 4, z)),
        "sparse_sigmoid": lambda z: np.clip((z + 1.0) / 2.0, 0.0, 1.0)}.items()},
    "elu.alpha": (("z",), lambda o, z: o.elu(z, alpha=0.5), lambda z: _expm1_branch(z, 0.5)),
    "leaky_relu.slope": (("z",), lambda o, z: o.leaky_relu(z, negative_slope=0.01),
                         lambda z: np.where(z >= 0, z, 0.01 * z)),
    "celu": (("z",), lambda o, z: o.celu(z, 2.0), lambda z: np.maximum(z, 0.0) + 2.0 * np.expm1(np.minimum(z, 0) / 2)),
    "threshold": (("z",), lambda o, z: o.threshold(z, 0.5, -2.0), lambda z: np.where(z > 0.5, z, -2.0)),
    "squareplus": (("z",), lambda o, z: o.squareplus(z, b=3), lambda z: (z + np.sqrt(z * z + 3.0)) / 2.0),
}
def _from_table(prefix: str, cases: dict, inputs: dict, chosen: dict[str, str], used) -> dict:
    """Entries made from another test module's cases ``name: (call(ops, t), reference(t))`` over its dict of inputs
    ``t``, for ``chosen``'s ``{case name: op}``: the float inputs a case reads (``used(name)``) become the entry's,
    added to :data:`INPUTS` as ``"<prefix>:<input>"``; the others stay constants. The entry is ``"<op>.<case>"``."""
    entries = {}
    for name, op in chosen.items():
        floats = tuple(n for n in used(name) if inputs[n].dtype.kind == "f")
        INPUTS.update({f"{prefix}:{n}": inputs[n] for n in floats})

        def call(o, *arrays, name=name, floats=floats):
            return cases[name][0](o, {**inputs, **dict(zip(floats, arrays))})

        def reference(*arrays, name=name, floats=floats):
            return cases[name][1]({**inputs, **dict(zip(floats, arrays))})

        entries[f"{op}.{name}"] = (tuple(f"{prefix}:{n}" for n in floats), call, reference)
    return entries


def _nn_used(name: str) -> list[str]:
    """The float inputs a composite of tests/test_ops_nn.py reads: those that move its reference."""
    moved = {n: v + 1.0 for n, v in NN_INPUTS.items() if v.dtype.kind == "f"}
    reference = COMPOSITES[name][1]
    return [n for n in moved if not np.array_equal(reference(NN_INPUTS), reference({**NN_INPUTS, n: moved[n]}))]


#: The losses and normalizations: every composite of tests/test_ops_nn.py (its variants of axes, from_logits,
#: clipping, mask_index), by op.
NN.update(_from_table("nn", COMPOSITES, NN_INPUTS, {
    "bce": "binary_crossentropy", "bce_clipped": "binary_crossentropy", "bce_logits": "binary_crossentropy",
    "cce": "categorical_crossentropy", "cce_axis0": "categorical_crossentropy",
    "cce_logits": "categorical_crossentropy", "scce": "sparse_categorical_crossentropy",
    "scce_logits": "sparse_categorical_crossentropy", "normalize": "normalize", "normalize_all": "normalize",
    "normalize_l3": "normalize", "normalize_l1_eps": "normalize", "rms": "rms_normalization",
    "rms_axes": "rms_normalization", "layer_norm": "layer_normalization", "layer_norm_axes": "layer_normalization",
    "batch_norm": "batch_normalization", "batch_norm_plain": "batch_normalization", "psnr": "psnr", "glu": "glu",
    "ctc_loss": "ctc_loss", "ctc_loss_blank_2": "ctc_loss", "sparsemax": "sparsemax",
    "sparsemax_rows": "sparsemax"}, _nn_used))
#: Convolution, pooling, attention (ops_windows): the cases of tests/test_ops_windows.py, by op.
WINDOWS = _from_table("windows", WINDOW_CASES, WINDOW_INPUTS, {
    "conv1d_same_stride": "conv", "conv2d_channels_first": "conv", "conv2d_grouped_strided": "conv",
    "conv3d_same": "conv", "conv2d_dilated": "conv", "depthwise1d_strided_dilated": "depthwise_conv",
    "depthwise2d_unequal_strides": "depthwise_conv", "depthwise3d": "depthwise_conv", "separable2d": "separable_conv",
    "separable1d_channels_first": "separable_conv", "conv_transpose1d_same_wide_stride": "conv_transpose",
    "conv_transpose2d_output_padding": "conv_transpose",
    "conv_transpose2d_same_output_padding_dilated": "conv_transpose", "conv_transpose3d": "conv_transpose",
    "max_pool1d_same": "max_pool", "max_pool2d": "max_pool", "max_pool3d_same": "max_pool",
    "average_pool2d_same": "average_pool", "average_pool3d_same_channels_first": "average_pool",
    "attention_gqa_bias_mask": "dot_product_attention", "attention_causal_scale": "dot_product_attention",
}, lambda name: _window_inputs_read([name]))
WINDOWS.update({
    "conv2d": (("windows:x2", "windows:k2"), lambda o, x, k: o.conv2d(x, k, "same"),
               lambda x, k: np_conv(x, k, 1, "same")),
    "max_pool2d": (("windows:p2",), lambda o, x: o.max_pool2d(x, 2), lambda x: np_pool(x, 2)),
})


def _scan(o, m, v):
    """A recurrence over m's rows: carry' = tanh(carry * row + v[:3]), outputs the carries."""
    return o.scan(lambda c, row: (o.tanh(c * row + v[:3]), c), v[2:], m)[1]


def _np_scan(m, v):
    carry, out = v[2:], []
    for row in m:
        out.append(carry)
        carry = np.tanh(carry * row + v[:3])
    return np.stack(out)


#: Control flow, slices, scatters, conversions (ops_core). Predicates and branch indices come from the data, so each
#: backend traces its conditional, not a Python branch.
CORE = {
    "associative_scan": (("v",), lambda o, v: o.associative_scan(operator.add, v), np.cumsum),
    "associative_scan.pairs": (("m",), lambda o, m: o.associative_scan(
        lambda a, b: (a[0] * b[0], b[0] * a[1] + b[1]), (o.sigmoid(m), m), axis=1, reverse=True)[1],
        lambda m: _cumulative(list(zip(scipy.special.expit(m.T), m.T))[::-1],
                              lambda a, b: (a[0] * b[0], b[0] * a[1] + b[1]))[::-1, 1].T),
    "associative_scan.multiply_reverse": (("x",), lambda o, x: o.associative_scan(o.multiply, x, reverse=True,
                                                                                  axis=1),
                                          lambda x: np.flip(np.cumprod(np.flip(x, 1), axis=1), 1)),
    "cond": (("x",), lambda o, x: o.cond(o.sum(x * x) > 0.0, lambda: o.tanh(x), lambda: x * 2.0), np.tanh),
    "convert_to_tensor": (("x",), None, lambda x: x),
    "fori_loop": (("v",), lambda o, v: o.fori_loop(1, 4, lambda i, a: a * 0.5 + o.cast(i, a.dtype) * a, v),
                  lambda v: v * 1.5 * 2.5 * 3.5),
    "map": (("x",), lambda o, x: o.map(lambda row: o.sum(row * row), x), lambda x: np.sum(x * x, axis=1)),
    "scan": (("m", "v"), _scan, _np_scan),
    # A running logaddexp from -1000: the engines' JAX softplus (logaddexp's log1p(exp(d)), rewritten) had a NaN
    # gradient for d < -709, where a branch it does not take overflows, and a loop is differentiated by JAX.
    "scan.logaddexp": (("m",), lambda o, m: o.scan(lambda c, row: (o.logaddexp(c, row),) * 2,
                                                   np.full(3, -1000.0), m)[1],
                       lambda m: np.logaddexp.accumulate(np.concatenate([np.full((1, 3), -1000.0), m]))[1:]),
    "scatter": (("v",), lambda o, v: o.scatter(np.array([[0, 1], [2, 3], [0, 1]]), v[:3], (3, 4)),
                lambda v: _scattered(np.zeros((3, 4)), np.array([[0, 1], [2, 3], [0, 1]]), v[:3])),
    "scatter_update": (("x", "v"), lambda o, x, v: o.scatter_update(x, np.array([[2, 1], [0, 3]]), v[:2]),
                       lambda x, v: _set(x, [[2, 1], [0, 3]], v[:2])),
    "scatter_update.add": (("x", "v"), lambda o, x, v: o.scatter_update(x, [[1, 2], [1, 2], [0, 3]], v[:3],
                                                                        reduction="add"),
                           lambda x, v: _scattered(x, np.array([[1, 2], [1, 2], [0, 3]]), v[:3])),
    "slice": (("t",), lambda o, t: o.slice(t, (1, 0, 2), (1, -1, 2)), lambda t: t[1:2, :, 2:4]),
    # A start past the end is clamped, as JAX's dynamic_slice clamps it: (1, 3) is (1, 2) here.
    "slice.clamped": (("x",), lambda o, x: o.slice(x, np.array([1, 3], np.int32), (2, 2)), lambda x: x[1:3, 2:4]),
    "slice_update.clamped": (("x", "v"), lambda o, x, v: o.slice_update(x, np.array([1, 3], np.int32),
                                                                        o.reshape(v[:4], (2, 2))),
                             lambda x, v: _updated(x, (1, 2), v[:4].reshape(2, 2))),
    "slice_update": (("x", "v"), lambda o, x, v: o.slice_update(x, (1, 1), o.reshape(v[:4], (2, 2))),
                     lambda x, v: _updated(x, (1, 1), v[:4].reshape(2, 2))),
    "switch": (("x",), lambda o, x: o.switch(o.cast(o.sum(x * x) > 0.0, "int32") * 2,
                                             [lambda a: a + 1.0, lambda a: a * a, lambda a: o.sin(a)], x), np.sin),
    "vectorized_map": (("t", "m"), lambda o, t, m: o.vectorized_map(lambda e: e[0] @ e[1],
                                                                    (t, o.broadcast_to(m, (2, 4, 3)))),
                       lambda t, m: t @ m),
    "while_loop": (("v",), lambda o, v: o.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, o.sin(a)),
                                                     (o.cast(o.sum(v) * 0.0, "int32"), v), maximum_iterations=5)[1],
                   lambda v: np.sin(np.sin(np.sin(v)))),
}


def _set(x, indices, values):
    out = x.copy()
    out[tuple(np.array(indices).T)] = values
    return out


def _complex_parts(z) -> list:
    return [z.real, z.imag]


def _np_stft(x, length, stride, fft, window):
    """Keras' stft (its NumPy backend): reflect-padded signal, sequences of fft points, the window centred."""
    x = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(fft // 2, fft // 2)], mode="reflect")
    frames = np.stack([x[..., i:i + fft] for i in range(0, x.shape[-1] - fft + 1, stride)], axis=-2)
    if window is not None:
        frames = frames * np.pad(scipy.signal.get_window(window, length), ((fft - length) // 2,
                                                                           fft - length - (fft - length) // 2))
    return _complex_parts(np.fft.rfft(frames))


def _np_istft(real, imag, stride, fft):
    """The overlap-add of each sequence's inverse transform (no window), fft // 2 points dropped at each end."""
    frames = np.fft.irfft(real + 1j * imag, fft)
    out = np.zeros(frames.shape[:-2] + ((frames.shape[-2] - 1) * stride + fft,))
    for i in range(frames.shape[-2]):
        out[..., i * stride:i * stride + fft] += frames[..., i, :]
    return out[..., fft // 2:out.shape[-1] - fft // 2]


#: Fourier transforms and framing (ops_signal): (real, imag) pairs in and out.
SIGNAL = {
    "extract_sequences": (("x",), lambda o, x: o.extract_sequences(x, 2, 1),
                          lambda x: np.stack([x[:, i:i + 2] for i in range(3)], axis=1)),
    "fft": (("x", "y"), lambda o, x, y: o.fft((x, y)), lambda x, y: _complex_parts(np.fft.fft(x + 1j * y))),
    "fft2": (("t", "t"), lambda o, x, y: o.fft2((x, y)), lambda x, y: _complex_parts(np.fft.fft2(x + 1j * y))),
    "ifft2": (("t", "t"), lambda o, x, y: o.ifft2((x, y)), lambda x, y: _complex_parts(np.fft.ifft2(x + 1j * y))),
    "rfft": (("x",), lambda o, x: o.rfft(x, 6), lambda x: _complex_parts(np.fft.rfft(x, 6))),
    "irfft": (("x", "y"), lambda o, x, y: o.irfft((x, y)), lambda x, y: np.fft.irfft(x + 1j * y)),
    "stft": (("t",), lambda o, t: o.stft(t, 3, 2, 4, "hann"), lambda t: _np_stft(t, 3, 2, 4, "hann")),
    "istft": (("t", "t"), lambda o, x, y: o.istft((x, y), 6, 2, 6, window=None),
              lambda x, y: _np_istft(x, y, 2, 6)),
}

def _cube(x):
    """x**3 with its gradient written by hand: custom_gradient's machinery differentiates, not the engine."""
    return x * x * x, lambda upstream: upstream * 3.0 * x * x


#: Statistics (ops_statistics).
STATISTICS = {"corrcoef": (("x",), None, np.corrcoef)}
#: Function transformations (ops_functional): the transformed functions' gradients.
FUNCTIONAL = {
    "custom_gradient": (("x",), lambda o, x: o.custom_gradient(_cube)(x), lambda x: x ** 3),
    "vectorize": (("x", "y"), lambda o, x, y: o.vectorize(lambda a, b: a * o.sin(b))(x, y), lambda x, y: x * np.sin(y)),
    "vectorize.signature": (("x", "y"), lambda o, x, y: o.vectorize(lambda a, b: o.sum(a * b),
                                                                    signature="(n),(n)->()")(x, y[0]),
                            lambda x, y: x @ y[0]),
}

#: Every group's table, by the class that defines the group's ops (toolkit/nn/op_table.py's GROUPS).
TABLES = {"ElementwiseOps": ELEMENTWISE, "ShapeOps": SHAPES, "Ops": BASIC, "MathOps": MATH, "ArrayOps": ARRAYS,
          "ReductionOps": REDUCTIONS, "LinalgOps": LINALG, "NNOps": NN, "WindowOps": WINDOWS, "SignalOps": SIGNAL,
          "StatisticsOps": STATISTICS, "FunctionalOps": FUNCTIONAL, "CoreOps": CORE, "TrainingOps": {}}

_BOOL = "a boolean result"
_INT = "an integer result"
_CONSTANT = "a constant made from a shape or Python numbers: no array input to differentiate"
#: The public ops without a gradient to check, and why.
NON_DIFFERENTIABLE = {
    **{name: _BOOL for name in (
        "equal", "not_equal", "greater", "greater_equal", "less", "less_equal", "logical_and", "logical_or",
        "logical_not", "logical_xor", "isclose", "allclose", "isfinite", "isinf", "isnan", "isneginf", "isposinf",
        "isreal", "signbit", "all", "any", "isin", "in_top_k", "all_finite")},
    **{name: _INT for name in (
        "argmax", "argmin", "argsort", "argpartition", "nanargmax", "nanargmin", "count_nonzero", "digitize",
        "searchsorted", "nonzero", "unravel_index", "gcd", "lcm", "bitwise_and", "bitwise_or", "bitwise_xor",
        "bitwise_not", "bitwise_invert", "bitwise_left_shift", "bitwise_right_shift", "left_shift", "right_shift",
        "one_hot", "multi_hot")},
    **{name: _CONSTANT for name in (
        "arange", "empty", "eye", "identity", "ones", "zeros", "tri", "bartlett", "blackman", "hamming", "hanning",
        "kaiser")},
    **{name: "a Python value (a shape, a size, a rank or a truth value), not an array"
       for name in ("shape", "size", "ndim", "is_tensor", "training")},
    "floor_divide": "an integral value (NumPy's divmod quotient): piecewise constant (floor, a function of the "
                    "same kind, is in the table with gradient 0)",
    "ones_like": "its values do not depend on the input's (only its shape)",
    "zeros_like": "its values do not depend on the input's (only its shape)",
    "unique": "distinct values, with integer indices and counts: a set operation, not a training op",
    "view": "a reinterpretation of the bits in another dtype",
    "saturate_cast": "a cast to a narrower dtype (integers, float16, float32): no float64 gradient to check",
    "polar": "refused: it returns complex numbers, which the toolkit has no dtype for (a typed DTypeError)",
    "ctc_decode": "decoding: integer paths, and scores that are a maximum over paths, not a training loss",
    "stop_gradient": "no gradient by definition (tests/test_ops_core.py: test_stop_gradient_passes_no_gradient)",
    "example_uniform": "random noise, drawn per example",
    "update_state": "writes model state; returns nothing to differentiate",
    "cross_replica_sum": "a sum across the replicas of a running training step (tests/test_model_state.py checks "
                         "its values and gradients in data-parallel steps)",
}
#: Ops that landed with their own central-difference gradient tests, and the module that has them.
CHECKED_ELSEWHERE: dict[str, str] = {}
#: The entries the data-parallel test runs on 1 and on several devices: one per way an op is built that a replicated
#: step could break (a loop carrying constants, a conditional, a custom gradient, an engine op written in JAX, a
#: scatter, a sort, a decomposition, a transform, a window op, statistics over the batch of a layer). All the entries
#: would cost minutes of tracing per backend (measured on TensorFlow: 2.4 s of CPU per entry and device setting).
DEVICE_ENTRIES = (
    "ctc_loss.ctc_loss", "while_loop", "associative_scan.pairs", "vectorize.signature", "custom_gradient", "switch",
    "segment_prod", "sort", "svd", "rfft", "conv_transpose.conv_transpose2d_output_padding", "max_pool.max_pool2d",
    "dot_product_attention.attention_gqa_bias_mask", "scatter_update.add", "slice_update.clamped",
    "batch_normalization.batch_norm",
)
