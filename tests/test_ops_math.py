"""The elementwise math ops (:mod:`toolkit.ops.math`) against NumPy and SciPy on every backend: values in float32
and float64 on a table with NaN, ±inf and signed zeros, integer and boolean inputs, empty arrays, Keras' call forms
(Python numbers and lists), typed refusals, and a sample of the references checked against ``keras.ops`` itself
(their gradients: tests/test_ops_gradients.py).

Each test builds one function that returns every op's result in a dict, so each backend compiles once per test."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import scipy.special

import toolkit
from tests.op_checks import FLOAT32_RTOL, FLOAT64_RTOL, run

NAN, INF = float("nan"), float("inf")
#: Values every float op sees: NaN, ±inf, signed zeros, halves (rounding ties), the edges of arccos/arctanh.
X = np.array([-3.5, -2.5, -1.0, -0.7, -0.5, -0.0, 0.0, 0.3, 0.5, 0.9, 1.0, 1.5, 2.5, 7.0, NAN, INF, -INF])
#: The second operand of the binary ops: zeros (against zeros, too), NaN against numbers and infinities.
Y = np.array([2.0, -2.5, 0.0, 0.2, 3.0, 1.0, 0.0, -0.4, 0.5, NAN, -1.0, 1.5, 2.0, -3.0, 1.0, INF, 2.0])

UNARY = {
    "arccos": np.arccos, "arccosh": np.arccosh, "arcsin": np.arcsin, "arcsinh": np.arcsinh, "arctan": np.arctan,
    "arctanh": np.arctanh, "cosh": np.cosh, "sinh": np.sinh, "tan": np.tan, "expm1": np.expm1, "log1p": np.log1p,
    "log2": np.log2, "log10": np.log10, "erfc": scipy.special.erfc, "erfinv": scipy.special.erfinv,
    "i0": scipy.special.i0, "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc,
    "sign": np.sign, "cbrt": np.cbrt, "sinc": np.sinc, "exp2": np.exp2, "deg2rad": np.deg2rad,
    "rad2deg": np.rad2deg, "reciprocal": np.reciprocal, "rsqrt": lambda x: 1 / np.sqrt(x), "fabs": np.fabs,
    "absolute": np.absolute, "nan_to_num": np.nan_to_num, "angle": np.angle, "real": np.real, "imag": np.imag,
    "conj": np.conj, "conjugate": np.conjugate, "signbit": np.signbit, "isnan": np.isnan, "isinf": np.isinf,
    "isfinite": np.isfinite, "isposinf": np.isposinf, "isneginf": np.isneginf, "isreal": np.isreal,
}
BINARY = {
    "arctan2": np.arctan2, "nextafter": np.nextafter, "hypot": np.hypot, "heaviside": np.heaviside,
    "fmax": np.fmax, "fmin": np.fmin, "fmod": np.fmod, "logaddexp": np.logaddexp, "logaddexp2": np.logaddexp2,
    "true_divide": np.true_divide, "isclose": np.isclose, "logical_xor": np.logical_xor,
    "divide_no_nan": lambda x1, x2: np.where(x2 == 0, 0.0, x1 / np.where(x2 == 0, 1.0, x2)).astype(x1.dtype),
}
OTHER_FLOAT = {  # name -> (the toolkit's call, the reference), each on (x, y)
    "round_decimals_1": (lambda o, x, y: o.round(x * 1.37, 1), lambda x, y: np.round(x * np.float32(1.37), 1)),
    "round_decimals_-1": (lambda o, x, y: o.round(x * 10.0, decimals=-1), lambda x, y: np.round(x * 10, -1)),
    "nan_to_num_values": (lambda o, x, y: o.nan_to_num(x, nan=2, posinf=3.5, neginf=-4),
                          lambda x, y: np.nan_to_num(x, nan=2, posinf=3.5, neginf=-4)),
    "isclose_tolerances": (lambda o, x, y: o.isclose(x, x + 0.01, rtol=0.0, atol=0.02, equal_nan=True),
                           lambda x, y: np.isclose(x, x + 0.01, rtol=0.0, atol=0.02, equal_nan=True)),
    "allclose": (lambda o, x, y: o.allclose(x, x), lambda x, y: np.allclose(x, x)),
    "allclose_nan": (lambda o, x, y: o.allclose(x, x, equal_nan=True), lambda x, y: np.allclose(x, x, equal_nan=True)),
    "ldexp": (lambda o, x, y: o.ldexp(x, np.array([3, -2, 0, 1, 5, 2, 1, -1, 0, 4, 1, 2, 3, 1, 0, 1, 1], np.int32)),
              lambda x, y: np.ldexp(x, np.array([3, -2, 0, 1, 5, 2, 1, -1, 0, 4, 1, 2, 3, 1, 0, 1, 1]))),
    "bitwise_and_bool": (lambda o, x, y: o.bitwise_and(x > 0, y > 0), lambda x, y: np.bitwise_and(x > 0, y > 0)),
}


def _float_ops(o, x, y):
    found = {name: getattr(o, name)(x) for name in UNARY}
    found.update({name: getattr(o, name)(x, y) for name in BINARY})
    found.update({name: fn(o, x, y) for name, (fn, _) in OTHER_FLOAT.items()})
    return found


def _check(result: dict, expected: dict, dtype: str) -> None:
    """Each op's result equals its reference in shape, dtype and values (NaN where the reference has NaN)."""
    tolerance = FLOAT32_RTOL if dtype == "float32" else FLOAT64_RTOL
    for name, want in expected.items():
        got, want = np.asarray(result[name]), np.asarray(want)
        assert got.shape == want.shape, (name, got.shape, want.shape)
        assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance, equal_nan=True, err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_values_match_numpy(backend, dtype):
    """Every float op, on NaN, ±inf, ±0, ties and out-of-domain values, equals NumPy/SciPy on the same dtype."""
    x, y = X.astype(dtype), Y.astype(dtype)
    with np.errstate(all="ignore"):
        expected = {name: fn(x) for name, fn in UNARY.items()}
        expected.update({name: fn(x, y) for name, fn in BINARY.items()})
        expected.update({name: reference(x, y) for name, (_, reference) in OTHER_FLOAT.items()})
    expected = {name: np.asarray(v).astype(dtype) if np.asarray(v).dtype.kind == "f" else np.asarray(v)
                for name, v in expected.items()}
    _check(run(backend, _float_ops, {"x": x, "y": y}, dtype), expected, dtype)


INTS = np.array([12, 7, -9, 5, 0, -45, 0, 255, -1], np.int32)
OTHERS = np.array([8, 2, 3, 40, 0, 10, 7, 16, -1], np.int32)
SHIFTS = np.array([1, 31, 32, 33, -1, 3, 0, 4, 40], np.int32)
B = np.array([True, False, True, False, True, True, False, False, True])
C = np.array([False, False, True, True, True, False, True, False, False])

#: name -> (the toolkit's call, the NumPy reference, the dtype the toolkit gives), on the integer and boolean inputs.
#: Integers that Keras makes floating become the computation dtype (float64 here); the others keep their dtype.
INTEGER_CASES = {
    **{name: (lambda o, t, name=name: getattr(o, name)(t["i"]), lambda t, name=name: getattr(np, name)(t["i"]),
              "float64")
       for name in ("floor", "ceil", "cbrt", "fabs", "exp2", "sqrt", "expm1", "log1p", "arctan", "sinh", "tan",
                    "deg2rad", "angle")},
    "reciprocal": (lambda o, t: o.reciprocal(t["i"]), lambda t: 1.0 / t["i"], "float64"),  # np's keeps integers
    "trunc": (lambda o, t: o.trunc(t["i"]), lambda t: t["i"], None),  # Keras keeps integers (NumPy 1 would not)
    **{name: (lambda o, t, name=name: getattr(o, name)(t["i"]), lambda t, name=name: getattr(np, name)(t["i"]), None)
       for name in ("round", "sign", "signbit", "isnan", "isinf", "isfinite", "isposinf", "isneginf",
                    "absolute", "real", "imag", "conj", "isreal", "nan_to_num")},
    "bitwise_invert": (lambda o, t: o.bitwise_invert(t["i"]), lambda t: np.invert(t["i"]), None),
    "bitwise_not": (lambda o, t: o.bitwise_not(t["i"]), lambda t: np.invert(t["i"]), None),
    **{name: (lambda o, t, name=name: getattr(o, name)(t["i"], t["j"]),
              lambda t, name=name: getattr(np, name)(t["i"], t["j"]), None)
       for name in ("gcd", "lcm", "bitwise_and", "bitwise_or", "bitwise_xor", "fmax", "fmin", "logical_xor")},
    "fmod": (lambda o, t: o.fmod(t["i"], t["j"]), lambda t: np.where(t["j"] == 0, 0, np.fmod(t["i"], t["j"])), None),
    "arctan2": (lambda o, t: o.arctan2(t["i"], t["j"]), lambda t: np.arctan2(t["i"], t["j"]), "float64"),
    "hypot": (lambda o, t: o.hypot(t["i"], t["j"]), lambda t: np.hypot(t["i"], t["j"]), "float64"),
    "heaviside": (lambda o, t: o.heaviside(t["i"], t["j"]), lambda t: np.heaviside(t["i"], t["j"]), "float64"),
    "isclose": (lambda o, t: o.isclose(t["i"], t["j"]), lambda t: np.isclose(t["i"], t["j"]), None),
    "ldexp": (lambda o, t: o.ldexp(t["i"], t["s"] % 5), lambda t: np.ldexp(t["i"], t["s"] % 5), "float64"),
    # NumPy's shifts by negative or too large amounts are 0 (-1 for negative x >> y), on every backend.
    "left_shift": (lambda o, t: o.left_shift(t["i"], t["s"]),
                   lambda t: np.where((t["s"] < 0) | (t["s"] >= 32), 0, np.left_shift(t["i"], t["s"] % 32)), None),
    "bitwise_right_shift": (lambda o, t: o.bitwise_right_shift(t["i"], t["s"]),
                            lambda t: np.where((t["s"] < 0) | (t["s"] >= 32), np.where(t["i"] < 0, -1, 0),
                                               np.right_shift(t["i"], t["s"] % 32)).astype(np.int32), None),
    "left_shift_64": (lambda o, t: o.left_shift(t["l"], t["s"]), lambda t: np.left_shift(t["l"], t["s"] % 64),
                      None),
    "right_shift_int": (lambda o, t: o.right_shift(t["i"], 2), lambda t: np.right_shift(t["i"], 2), None),
    "gcd_int64": (lambda o, t: o.gcd(t["l"], t["j"]), lambda t: np.gcd(t["l"], t["j"]), None),
    "round_-1": (lambda o, t: o.round(t["i"] * 5, decimals=-1), lambda t: np.round(t["i"] * 5, -1), None),
    "round_1": (lambda o, t: o.round(t["i"], decimals=1), lambda t: np.round(t["i"], 1), None),
    # Keras' call forms: Python numbers and lists where it takes tensors.
    "gcd_scalar": (lambda o, t: o.gcd(2, t["i"]), lambda t: np.gcd(2, t["i"]), None),
    "lcm_list": (lambda o, t: o.lcm([4], t["j"]), lambda t: np.lcm([4], t["j"]).astype(np.int32), None),
    "fmod_scalar": (lambda o, t: o.fmod(1, t["j"]), lambda t: np.where(t["j"] == 0, 0, np.fmod(1, t["j"])), None),
    "isclose_scalar": (lambda o, t: o.isclose(2, t["i"]), lambda t: np.isclose(2, t["i"]), None),
    "fmax_float": (lambda o, t: o.fmax(1.5, t["i"]), lambda t: np.fmax(1.5, t["i"]), "float64"),
    "heaviside_scalar": (lambda o, t: o.heaviside(t["i"], 4), lambda t: np.heaviside(t["i"], 4), "float64"),
    "logical_xor_true": (lambda o, t: o.logical_xor(True, t["b"]), lambda t: np.logical_xor(True, t["b"]), None),
    "bool_and": (lambda o, t: o.bitwise_and(t["b"], t["c"]), lambda t: np.bitwise_and(t["b"], t["c"]), None),
    "bool_or": (lambda o, t: o.bitwise_or(t["b"], t["c"]), lambda t: np.bitwise_or(t["b"], t["c"]), None),
    "bool_xor": (lambda o, t: o.bitwise_xor(t["b"], t["c"]), lambda t: np.bitwise_xor(t["b"], t["c"]), None),
    "bool_invert": (lambda o, t: o.bitwise_invert(t["b"]), lambda t: np.invert(t["b"]), None),
    "bool_signbit": (lambda o, t: o.signbit(t["b"]), lambda t: np.signbit(t["b"]), None),
    "bool_isfinite": (lambda o, t: o.isfinite(t["b"]), lambda t: np.isfinite(t["b"]), None),
    "bool_trunc": (lambda o, t: o.trunc(t["b"]), lambda t: t["b"], None),
    "bool_fmod": (lambda o, t: o.fmod(t["b"], t["c"]),
                  lambda t: np.where(t["c"], np.fmod(t["b"].astype(np.int32), 1), 0).astype(np.int32), None),
    "empty_arctanh": (lambda o, t: o.arctanh(t["i"][:0]), lambda t: np.zeros((0,)), "float64"),
    "empty_2d_isclose": (lambda o, t: o.isclose(o.reshape(t["i"][:0], (2, 0)), 1.0), lambda t: np.zeros((2, 0), bool),
                         None),
    "empty_allclose": (lambda o, t: o.allclose(t["i"][:0], t["j"][:0]), lambda t: np.bool_(True), None),
    "empty_gcd": (lambda o, t: o.gcd(t["i"][:0], t["j"][:0]), lambda t: np.zeros((0,), np.int32), None),
}


def test_integer_and_boolean_inputs_match_numpy(backend):
    """Integer and boolean inputs (int32, int64), Python numbers and lists, and empty arrays: Keras' dtypes (ints
    made floating where it makes them so, kept elsewhere) and NumPy's values, integer division and shifts by zero
    or too far included."""
    inputs = {"i": INTS, "j": OTHERS, "s": SHIFTS, "l": INTS.astype(np.int64) * 3, "b": B, "c": C}
    result = run(backend, lambda o, **t: {n: fn(o, t) for n, (fn, _, _) in INTEGER_CASES.items()}, inputs)
    with np.errstate(all="ignore"):
        expected = {}
        for name, (_, reference, dtype) in INTEGER_CASES.items():
            value = np.asarray(reference(inputs))
            expected[name] = value.astype(dtype) if dtype else value
    _check(result, expected, "float64")


REFUSALS = {
    "sign_bool": lambda o, t: o.sign(t["b"]),
    "gcd_float": lambda o, t: o.gcd(t["x"], t["x"]),
    "lcm_bool": lambda o, t: o.lcm(t["b"], t["b"]),
    "bitwise_and_float": lambda o, t: o.bitwise_and(t["x"], 1),
    "bitwise_invert_float": lambda o, t: o.bitwise_invert(t["x"]),
    "right_shift_float": lambda o, t: o.right_shift(t["x"], 1),
    "ldexp_float_exponent": lambda o, t: o.ldexp(t["x"], t["x"]),
    "real_complex": lambda o, t: o.real(np.array([1 + 2j])),
    "imag_complex": lambda o, t: o.imag(np.array([1 + 2j])),
    "conj_complex": lambda o, t: o.conj(1 + 2j),
    "angle_complex": lambda o, t: o.angle(np.array([1j])),
    "isreal_complex": lambda o, t: o.isreal(np.array([1j])),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_refusals_are_typed(backend, name):
    """What NumPy and Keras refuse (or the toolkit cannot hold: complex numbers) raises DTypeError naming the op."""
    with pytest.raises(toolkit.DTypeError, match=name.split("_")[0]):
        run(backend, lambda o, **t: REFUSALS[name](o, t), {"x": X[:3], "b": B[:3]})


def test_round_refuses_a_float_decimals(backend):
    with pytest.raises(TypeError, match="decimals"):
        run(backend, lambda o, x: o.round(x, 1.5), {"x": X[:3]})


#: A sample of the references above, against keras.ops itself (float64, Keras' TensorFlow backend).
KERAS_SAMPLE = ("arccos", "arctanh", "cbrt", "sinc", "signbit", "nan_to_num", "isposinf", "trunc", "round",
                "arctan2", "hypot", "fmod", "logaddexp", "logaddexp2", "heaviside", "fmax", "divide_no_nan",
                "nextafter", "isclose", "i0", "exp2", "log2", "reciprocal", "angle")


@pytest.mark.skipif(importlib.util.find_spec("keras") is None, reason="keras is not installed "
                    '(pip install "multigpu-toolkit[tensorflow]")')
def test_references_are_keras_ops():
    """The references of the value tests are what keras.ops computes, so the toolkit's ops, which equal them, have
    Keras' semantics (on the finite part of the table: Keras' own TensorFlow kernels differ at some infinities)."""
    toolkit.get_backend("tensorflow")  # TensorFlow starts with the logical devices, not on Keras' first op
    import keras

    kept = np.isfinite(X) & ~np.signbit(X) | (X < 0)  # finite, and not -0.0 (whose angle Keras' TF gives as 0)
    x, y = X[kept], Y[kept]
    y = np.where(np.isnan(y), 0.5, y)
    with np.errstate(all="ignore"):
        for name in KERAS_SAMPLE:
            ours = UNARY.get(name) or BINARY[name]
            args = (x,) if name in UNARY else (x, y)
            got = keras.ops.convert_to_numpy(getattr(keras.ops, name)(*args))
            np.testing.assert_allclose(got, ours(*args), rtol=1e-6, atol=1e-6, equal_nan=True, err_msg=name)
    for name in ("rsqrt", "erfc", "erfinv"):
        got = keras.ops.convert_to_numpy(getattr(keras.ops, name)(np.abs(x) / 8.0))
        np.testing.assert_allclose(got, UNARY[name](np.abs(x) / 8.0), rtol=1e-6, atol=1e-6, err_msg=name)
    ints = {"i": INTS, "j": OTHERS}
    for name in ("gcd", "lcm", "bitwise_and", "bitwise_xor", "logical_xor"):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(getattr(keras.ops, name)(INTS, OTHERS)),
                                      INTEGER_CASES[name][1](ints), err_msg=name)
