"""Products and linear algebra (:mod:`toolkit.ops.linalg`) on every backend: values against NumPy in float32 and
float64 (NaN, infinities, empty axes, integer and boolean operands), typed refusals, and a sample against
``keras.ops`` itself (their gradients: tests/test_ops_gradients.py).

Each test builds one function of many ops (a dict of results), so a backend compiles a few graphs, not one per op.
"""

from __future__ import annotations

import numpy as np
import pytest

import toolkit
from tests.conftest import PARITY
from tests.op_checks import FLOAT32_RTOL, FLOAT64_RTOL, run

#: Decompositions of float32 matrices lose more than a few roundings (condition numbers of ~10 here).
LINALG_FLOAT32_RTOL = 2e-4

trapz = getattr(np, "trapezoid", None) or np.trapz  # NumPy 1.26 (the Aesara environment) has the old name

RNG = np.random.default_rng(7)
X = RNG.normal(size=(2, 3, 4))
Y = RNG.normal(size=(2, 4, 3))
V = RNG.normal(size=(5,))
W = RNG.normal(size=(3,))
A = RNG.normal(size=(2, 3, 3)) * 0.3 + 2 * np.eye(3)  # well-conditioned square matrices
SPD = A @ np.swapaxes(A, -1, -2) + np.eye(3)
B = RNG.normal(size=(2, 3, 2))
M = RNG.normal(size=(4, 3))
SPECIAL = np.array([[1.0, np.nan, 2.0], [np.inf, -1.0, 0.0], [3.0, -np.inf, 0.5]])  # NaN and infinities


def _products(o, x, y, v, w, s):
    """The products on the backend; :func:`_products_reference` is the same in NumPy."""
    return {
        "einsum ijk,lkj->il": o.einsum("ijk,lkj->il", x, y),
        "einsum ijk,ikj->i": o.einsum("ijk,ikj->i", x, y),
        "einsum ellipsis": o.einsum("i...,j...k->...ijk", x, y),
        "einsum scalar": o.einsum(",ijk", 5, y),
        "einsum implicit": o.einsum("ij,jk", x[0], y[0]),
        "einsum trace": o.einsum("ii", x[0, :3, :3]),
        "einsum diagonal": o.einsum("iij->ji", o.reshape(x, (2, 2, 6))),
        "einsum three": o.einsum("bij,bjk,k->bi", x, y, w),
        "einsum broadcast": o.einsum("...j,...j->...", x[:1], x),
        "einsum special": o.einsum("ij,jk->ik", s, s),
        "tensordot 2": o.tensordot(x, o.transpose(x, (1, 2, 0)), axes=2),
        "tensordot pairs": o.tensordot(x, y, axes=([0, 1], [0, 2])),
        "tensordot ints": o.tensordot(x, y, axes=[0, 0]),
        "tensordot 0": o.tensordot(v, w, axes=0),
        "dot 3d 2d": o.dot(x, y[0]),
        "dot 3d 1d": o.dot(x, y[0, :, 0]),
        "dot 1d 3d": o.dot(w, x),
        "dot scalar": o.dot(x, 2),
        "dot special": o.dot(s, s),
        "vdot": o.vdot(x, o.transpose(y, (0, 2, 1))),
        "inner": o.inner(x, y[:, :, 0]),
        "inner vectors": o.inner(v, v),
        "outer": o.outer(x[0], w),
        "outer special": o.outer(s, w),
        "kron": o.kron(x[0], y[0]),
        "kron ranks": o.kron(w, x),
        "cross 3x3": o.cross(x[..., :3], y[:, :3, :3]),
        "cross 2x3": o.cross(x[..., :2], y[:, :3, :]),
        "cross 3x2 axisc": o.cross(x[..., :3], y[:, :3, :2], axisc=0),
        "cross 2x2": o.cross(x[..., :2], y[:, :3, :2]),
        "cross axisa axisb": o.cross(x[:, :3], y[:, :, :3], axisa=1, axisb=-1),
        "cross axis": o.cross(x[:, :, :3], y[:, 1:, :], axis=-1),
        "cross special": o.cross(s, s[::-1]),
        "correlate valid": o.correlate(v, w),
        "correlate same": o.correlate(v, w, mode="same"),
        "correlate full": o.correlate(v, w, mode="full"),
        "correlate shorter first": o.correlate(w, v, mode="same"),
        "correlate shorter first valid": o.correlate(w, v),
        "correlate shorter first full": o.correlate(w, v, "full"),
        "trapezoid": o.trapezoid(x),
        "trapezoid x": o.trapezoid(x, x=o.exp(x)),
        "trapezoid x axis": o.trapezoid(x, x=w * w, axis=1),
        "trapezoid dx": o.trapezoid(x, dx=0.5, axis=0),
        "cdist": o.cdist(x, o.transpose(y, (0, 2, 1))),
    }


def _products_reference(x, y, v, w, s):
    return {
        "einsum ijk,lkj->il": np.einsum("ijk,lkj->il", x, y),
        "einsum ijk,ikj->i": np.einsum("ijk,ikj->i", x, y),
        "einsum ellipsis": np.einsum("i...,j...k->...ijk", x, y),
        "einsum scalar": np.einsum(",ijk", 5, y),
        "einsum implicit": np.einsum("ij,jk", x[0], y[0]),
        "einsum trace": np.einsum("ii", x[0, :3, :3]),
        "einsum diagonal": np.einsum("iij->ji", x.reshape(2, 2, 6)),
        "einsum three": np.einsum("bij,bjk,k->bi", x, y, w),
        "einsum broadcast": np.einsum("...j,...j->...", x[:1], x),
        "einsum special": np.einsum("ij,jk->ik", s, s),
        "tensordot 2": np.tensordot(x, np.transpose(x, (1, 2, 0)), axes=2),
        "tensordot pairs": np.tensordot(x, y, axes=([0, 1], [0, 2])),
        "tensordot ints": np.tensordot(x, y, axes=[0, 0]),
        "tensordot 0": np.tensordot(v, w, axes=0),
        "dot 3d 2d": np.dot(x, y[0]),
        "dot 3d 1d": np.dot(x, y[0, :, 0]),
        "dot 1d 3d": np.dot(w, x),
        "dot scalar": np.dot(x, 2),
        "dot special": np.dot(s, s),
        "vdot": np.vdot(x, np.transpose(y, (0, 2, 1))),
        "inner": np.inner(x, y[:, :, 0]),
        "inner vectors": np.inner(v, v),
        "outer": np.outer(x[0], w),
        "outer special": np.outer(s, w),
        "kron": np.kron(x[0], y[0]),
        "kron ranks": np.kron(w, x),
        "cross 3x3": np.cross(x[..., :3], y[:, :3, :3]),
        "cross 2x3": _cross(x[..., :2], y[:, :3, :]),
        "cross 3x2 axisc": _cross(x[..., :3], y[:, :3, :2], axisc=0),
        "cross 2x2": _cross(x[..., :2], y[:, :3, :2]),
        "cross axisa axisb": np.cross(x[:, :3], y[:, :, :3], axisa=1, axisb=-1),
        "cross axis": np.cross(x[:, :, :3], y[:, 1:, :], axis=-1),
        "cross special": np.cross(s, s[::-1]),
        "correlate valid": np.correlate(v, w),
        "correlate same": np.correlate(v, w, mode="same"),
        "correlate full": np.correlate(v, w, mode="full"),
        "correlate shorter first": np.correlate(w, v, mode="same"),
        "correlate shorter first valid": np.correlate(w, v),
        "correlate shorter first full": np.correlate(w, v, "full"),
        "trapezoid": trapz(x),
        "trapezoid x": trapz(x, x=np.exp(x)),
        "trapezoid x axis": trapz(x, x=w * w, axis=1),
        "trapezoid dx": trapz(x, dx=0.5, axis=0),
        "cdist": np.sqrt(np.sum((x[:, :, None] - np.transpose(y, (0, 2, 1))[:, None]) ** 2, axis=-1)),
    }


def _cross(a, b, **kwargs):
    """NumPy's cross of 2-vectors, without NumPy 2's deprecation warning for them."""
    with np.testing.suppress_warnings() as sup:
        sup.filter(DeprecationWarning)
        return np.cross(a, b, **kwargs)


def _linalg(o, x, a, spd, b, m, s):
    sign, logabs = o.slogdet(a)
    q, r = o.qr(m)
    qc, rc = o.qr(m, mode="complete")
    u, sv, vh = o.svd(m, full_matrices=False)
    w, vecs = o.eigh(spd)
    return {
        "det": o.det(a), "inv": o.inv(a), "slogdet sign": sign, "slogdet log": logabs, "logdet": o.logdet(spd),
        "solve": o.solve(a, b), "solve vectors": o.solve(a, b[..., 0]), "solve broadcast": o.solve(a[0], b),
        "solve_triangular lower": o.solve_triangular(a, b, lower=True),
        "solve_triangular upper": o.solve_triangular(a, b[..., 0]),
        "cholesky": o.cholesky(spd), "cholesky upper": o.cholesky(spd, upper=True),
        "qr": o.matmul(q, r), "qr r abs": o.abs(r), "qr complete": o.matmul(qc, rc),
        "qr complete q": o.matmul(qc, o.transpose(qc)), "svd": o.svd(m, compute_uv=False),
        "svd products": o.matmul(u * sv[None, :], vh), "svd full": o.svd(x, compute_uv=False),
        "eigh values": w, "eigh products": o.matmul(vecs * w[..., None, :], o.transpose(vecs, (0, 2, 1))),
        "lstsq": o.lstsq(m, m[:, 0] + 1.0), "lstsq matrix": o.lstsq(m, o.exp(m)),
        "norm": o.norm(x), "norm keepdims": o.norm(x, keepdims=True), "norm 1 axis": o.norm(x, 1, axis=1),
        "norm -inf pair": o.norm(x, -np.inf, axis=(0, 2)), "norm inf pair": o.norm(x, np.inf, axis=(2, 1)),
        "norm -1 pair": o.norm(x, -1, axis=(1, 2)), "norm nuc": o.norm(x, "nuc", axis=(2, 1), keepdims=True),
        "norm 2 matrix": o.norm(m, 2), "norm -2 matrix": o.norm(m, -2), "norm fro": o.norm(m, "fro"),
        "norm 1 matrix": o.norm(m, 1), "norm vector inf": o.norm(m[0], np.inf), "norm 0.5": o.norm(x, 0.5, axis=-1),
        "norm 0": o.norm(s, 0, axis=0), "norm -inf": o.norm(x, -np.inf, axis=-1), "norm special": o.norm(s, axis=1),
        "norm special inf": o.norm(s, np.inf, axis=0), "norm 3": o.norm(x, 3, axis=2),
    }


def _linalg_reference(x, a, spd, b, m, s):
    q, r = np.linalg.qr(m)
    qc, rc = np.linalg.qr(m, mode="complete")
    w, vecs = np.linalg.eigh(spd)
    sign, logabs = np.linalg.slogdet(a)
    return {
        "det": np.linalg.det(a), "inv": np.linalg.inv(a), "slogdet sign": sign, "slogdet log": logabs,
        "logdet": np.linalg.slogdet(spd)[1], "solve": np.linalg.solve(a, b),
        "solve vectors": np.linalg.solve(a, b[..., :1])[..., 0], "solve broadcast": np.linalg.solve(a[0], b),
        "solve_triangular lower": np.linalg.solve(np.tril(a), b),
        "solve_triangular upper": np.linalg.solve(np.triu(a), b[..., :1])[..., 0],
        "cholesky": np.linalg.cholesky(spd), "cholesky upper": np.swapaxes(np.linalg.cholesky(spd), -1, -2),
        "qr": m, "qr r abs": np.abs(r), "qr complete": m, "qr complete q": np.eye(4),
        "svd": np.linalg.svd(m, compute_uv=False), "svd products": m, "svd full": np.linalg.svd(x, compute_uv=False),
        "eigh values": w, "eigh products": spd,
        "lstsq": np.linalg.lstsq(m, m[:, 0] + 1, rcond=None)[0], "lstsq matrix": np.linalg.lstsq(m, np.exp(m),
                                                                                                  rcond=None)[0],
        "norm": np.linalg.norm(x), "norm keepdims": np.linalg.norm(x, keepdims=True),
        "norm 1 axis": np.linalg.norm(x, 1, axis=1), "norm -inf pair": np.linalg.norm(x, -np.inf, axis=(0, 2)),
        "norm inf pair": np.linalg.norm(x, np.inf, axis=(2, 1)), "norm -1 pair": np.linalg.norm(x, -1, axis=(1, 2)),
        "norm nuc": np.linalg.norm(x, "nuc", axis=(2, 1), keepdims=True), "norm 2 matrix": np.linalg.norm(m, 2),
        "norm -2 matrix": np.linalg.norm(m, -2), "norm fro": np.linalg.norm(m, "fro"),
        "norm 1 matrix": np.linalg.norm(m, 1), "norm vector inf": np.linalg.norm(m[0], np.inf),
        "norm 0.5": np.linalg.norm(x, 0.5, axis=-1), "norm 0": np.linalg.norm(s, 0, axis=0),
        "norm -inf": np.linalg.norm(x, -np.inf, axis=-1), "norm special": np.linalg.norm(s, axis=1),
        "norm special inf": np.linalg.norm(s, np.inf, axis=0), "norm 3": np.linalg.norm(x, 3, axis=2),
    }


def _compare(results: dict, expected: dict, dtype: str, rtol: float) -> None:
    assert results.keys() == expected.keys()
    for name, want in expected.items():
        got, want = np.asarray(results[name]), np.asarray(want)
        assert got.shape == want.shape, (name, got.shape, want.shape)
        assert got.dtype == np.dtype(dtype), (name, got.dtype, dtype)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, equal_nan=True, err_msg=name)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_products_match_numpy(backend, dtype):
    inputs = {"x": X, "y": Y, "v": V, "w": W, "s": SPECIAL}
    results = run(backend, _products, inputs, dtype)
    cast = {n: v.astype(dtype).astype(np.float64) for n, v in inputs.items()}
    _compare(results, _products_reference(**cast), dtype, FLOAT32_RTOL if dtype == "float32" else FLOAT64_RTOL)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_linear_algebra_matches_numpy(backend, dtype):
    inputs = {"x": X, "a": A, "spd": SPD, "b": B, "m": M, "s": SPECIAL}
    results = run(backend, _linalg, inputs, dtype)
    cast = {n: v.astype(dtype).astype(np.float64) for n, v in inputs.items()}
    _compare(results, _linalg_reference(**cast), dtype, LINALG_FLOAT32_RTOL if dtype == "float32" else 1e-10)


def test_integer_boolean_and_empty_operands(backend):
    """Integer products keep their dtype (int8 wraps as NumPy's; einsum of int8 only gives int32, as Keras'),
    booleans give "any product true", and empty axes give zeros or empty arrays."""
    i8 = (np.arange(12).reshape(3, 4) * 37 % 11 - 5).astype("int8")
    i32 = np.arange(12).reshape(4, 3).astype("int32")
    flags = np.array([[True, False, True], [False, False, True]])
    empty = np.zeros((3, 0))

    def fn(o, i8, i32, flags, empty):
        return {
            "einsum int8": o.einsum("ij,jk->ik", i8, o.transpose(i8)),
            "dot int8": o.dot(i8, o.transpose(i8)), "tensordot int32": o.tensordot(i32, i32, axes=([0], [0])),
            "dot mixed": o.dot(i8, i32), "outer int32": o.outer(i32[0], i32[1]), "kron int8": o.kron(i8[:2], i8[:1]),
            "inner int32": o.inner(i32, i32), "cross int32": o.cross(i32, i32[::-1]),
            "dot bool": o.dot(flags, o.transpose(flags)), "einsum bool": o.einsum("ij,ij->i", flags, flags),
            "outer bool": o.outer(flags[0], flags[1]), "correlate int": o.correlate(i32[:, 0], i32[:2, 1]),
            "dot empty": o.dot(empty, o.transpose(empty)), "tensordot empty": o.tensordot(empty, empty, axes=0),
            "einsum empty": o.einsum("ij,kj->ik", empty, empty), "outer empty": o.outer(empty, i32),
            "norm int": o.norm(i32), "norm empty": o.norm(empty, axis=1),
        }

    results = run(backend, fn, {"i8": i8, "i32": i32, "flags": flags, "empty": empty}, "float64")
    expected = {
        "einsum int8": np.einsum("ij,jk->ik", i8.astype("int32"), i8.T.astype("int32")),
        "dot int8": np.dot(i8, i8.T), "tensordot int32": np.tensordot(i32, i32, axes=([0], [0])),
        "dot mixed": np.dot(i8.astype("int32"), i32), "outer int32": np.outer(i32[0], i32[1]),
        "kron int8": np.kron(i8[:2], i8[:1]), "inner int32": np.inner(i32, i32),
        "cross int32": np.cross(i32, i32[::-1]),
        "dot bool": np.dot(flags, flags.T), "einsum bool": np.einsum("ij,ij->i", flags, flags),
        "outer bool": np.outer(flags[0], flags[1]), "correlate int": np.correlate(i32[:, 0], i32[:2, 1]).astype("f8"),
        "dot empty": np.zeros((3, 3)), "tensordot empty": np.zeros((3, 0, 3, 0)), "einsum empty": np.zeros((3, 3)),
        "outer empty": np.zeros((0, 12)), "norm int": np.linalg.norm(i32.astype("f8")), "norm empty": np.zeros(3),
    }
    assert results.keys() == expected.keys()
    for name, want in expected.items():
        got = np.asarray(results[name])
        assert (got.shape, got.dtype) == (want.shape, want.dtype), (name, got.shape, got.dtype, want.shape, want.dtype)
        np.testing.assert_allclose(got, want, rtol=FLOAT64_RTOL, err_msg=name)


@pytest.mark.parametrize("call, error", [
    (lambda o, x: o.einsum("ij,jk->ik", x, x), toolkit.ShapeError),
    (lambda o, x: o.einsum("ij->k", x), toolkit.ShapeError),
    (lambda o, x: o.einsum("ij", x, x), toolkit.ShapeError),
    (lambda o, x: o.einsum("ij->ij", x, optimize=True), TypeError),
    (lambda o, x: o.einsum("...j->j", o.reshape(x, (1, 2, 3))), toolkit.ShapeError),
    (lambda o, x: o.tensordot(x, x, axes=([0], [1])), toolkit.ShapeError),
    (lambda o, x: o.tensordot(x, x, axes=3), toolkit.ShapeError),
    (lambda o, x: o.dot(x, x), toolkit.ShapeError),
    (lambda o, x: o.vdot(x, x[0]), toolkit.ShapeError),
    (lambda o, x: o.cross(o.reshape(x, (1, 6)), x), toolkit.ShapeError),
    (lambda o, x: o.cross(o.reshape(x, (3, 2)), x), toolkit.ShapeError),
    (lambda o, x: o.cross(x > 0, x > 0), toolkit.DTypeError),
    (lambda o, x: o.correlate(x, x[0]), toolkit.ShapeError),
    (lambda o, x: o.correlate(x[0], x[0], mode="circular"), ValueError),
    (lambda o, x: o.trapezoid(x, x=x[0, :2]), toolkit.ShapeError),
    (lambda o, x: o.cdist(x, o.transpose(x)), toolkit.ShapeError),
    (lambda o, x: o.norm(x, "fro", axis=0), ValueError),
    (lambda o, x: o.norm(x, 0, axis=(0, 1)), ValueError),
    (lambda o, x: o.norm(x, 1, axis=(1, 1)), toolkit.ShapeError),
    (lambda o, x: o.norm(o.reshape(x, (1, 2, 3)), 1), ValueError),
    (lambda o, x: o.det(x), toolkit.ShapeError),
    (lambda o, x: o.inv(x[0]), toolkit.ShapeError),
    (lambda o, x: o.solve(x[:, :2], x[0]), toolkit.ShapeError),
    (lambda o, x: o.qr(x, mode="r"), ValueError),
    (lambda o, x: o.svd(x[0]), toolkit.ShapeError),
    (lambda o, x: o.lstsq(x, x[:1]), toolkit.ShapeError),
])
def test_refusals(call, error):
    backend = toolkit.get_backend("tensorflow" if "tensorflow" in toolkit.available_backends() else PARITY[1])
    with pytest.raises(error):
        run(backend, call, {"x": np.ones((2, 3))}, "float32")


def test_sample_matches_keras_ops():
    """A sample of the ops against ``keras.ops`` itself, with Keras' own test inputs (Keras on TensorFlow)."""
    if "tensorflow" not in toolkit.available_backends():
        pytest.skip("keras.ops runs on TensorFlow here")
    backend = toolkit.get_backend("tensorflow")
    keras = pytest.importorskip("keras")
    x = np.arange(24).reshape([2, 3, 4]).astype("float32")
    y = np.arange(24).reshape([2, 4, 3]).astype("float32")
    spd = SPD.astype("float32")

    def fn(o, x, y, spd):
        return {"einsum": o.einsum("i...,j...k->...ijk", x, y), "tensordot": o.tensordot(x, y, axes=([0, 1], [0, 2])),
                "dot": o.dot(x, y[0]), "kron": o.kron(x[0], y[0]), "cross": o.cross(x[..., :3], y[:, :3, :3]),
                "correlate": o.correlate(x[0, 0], y[0, 0, :2], mode="same"), "trapezoid": o.trapezoid(x, dx=2.0),
                "norm": o.norm(x, "nuc", axis=(1, 2)), "logdet": o.logdet(spd), "cdist": o.cdist(x, x),
                "cholesky": o.cholesky(spd), "lstsq": o.lstsq(x[0], y[0, :3])}

    results = run(backend, fn, {"x": x, "y": y, "spd": spd}, "float32")
    ko = keras.ops
    expected = {"einsum": ko.einsum("i...,j...k->...ijk", x, y), "tensordot": ko.tensordot(x, y, axes=([0, 1], [0, 2])),
                "dot": ko.dot(x, y[0]), "kron": ko.kron(x[0], y[0]), "cross": ko.cross(x[..., :3], y[:, :3, :3]),
                "correlate": ko.correlate(x[0, 0], y[0, 0, :2], mode="same"), "trapezoid": ko.trapezoid(x, dx=2.0),
                "norm": ko.linalg.norm(x, "nuc", axis=(1, 2)), "logdet": ko.logdet(spd), "cdist": ko.cdist(x, x),
                "cholesky": ko.linalg.cholesky(spd), "lstsq": ko.linalg.lstsq(x[0], y[0, :3])}
    for name, want in expected.items():
        np.testing.assert_allclose(results[name], np.asarray(want), rtol=1e-4, atol=1e-4, err_msg=name)
