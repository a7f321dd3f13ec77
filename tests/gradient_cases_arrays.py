"""The gradient entries of the array, reduction, sorting, product and linear-algebra ops (see
:mod:`tests.gradient_cases`)."""

from __future__ import annotations

import numpy as np

from tests.gradient_cases_common import _nan, _np_nan
from tests.test_ops_linalg import _cross, trapz
from tests.test_ops_reductions import _SEGMENT_MAX, _SEGMENT_MIN, _SEGMENT_SUM, _segment_reference

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
