"""Special-value cases of the array creation, shape, indexing, reduction, sorting and segment ops (see
:mod:`tests.special_values_table`)."""

from __future__ import annotations

import numpy as np

from tests.special_values_common import (
    ALL,
    ANY_ZERO,
    FLOATS,
    INF,
    NAN,
    NUMERIC,
    _f,
    _int32,
    _max,
    _min,
    _prod,
    _reductions,
    _same,
    _signed,
    _std,
    _sum_dtype,
    _var,
    case,
    unary,
)
from toolkit.errors import DTypeError, ShapeError


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
    *_reductions("amax", _max, refuses_empty_axis=ShapeError, signed_zeros=False),
    *_reductions("amin", _min, refuses_empty_axis=ShapeError, signed_zeros=False),
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
         kinds=("float", "int", "bool"), refuses={"empty": ShapeError}),
    case("nanargmax", lambda o, x, y: (o.nanargmax(x[:, 1:]), o.nanargmax(x, axis=0)),
         lambda x, y: (_int32(np.nanargmax(x[:, 1:])), _int32(np.nanargmax(x, axis=0))),
         kinds=("float", "int", "bool")),
    case("nanargmin", lambda o, x, y: (o.nanargmin(x[:, 1:]), o.nanargmin(x, axis=0)),
         lambda x, y: (_int32(np.nanargmin(x[:, 1:])), _int32(np.nanargmin(x, axis=0))),
         kinds=("float", "int", "bool")),
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
                 refuses_empty_axis=ShapeError, signed_zeros=False),
    *_reductions("nanmin", lambda x, axis, keepdims: np.nanmin(x, axis=axis, keepdims=keepdims),
                 refuses_empty_axis=ShapeError, signed_zeros=False),
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
