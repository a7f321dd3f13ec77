"""``keras.ops.core`` (control flow, slices, scatters, casts) and the signatures and corners of the basic ops
(softmax over several axes, pad's modes, reductions' dtypes and ``initial``, one_hot's axis, shapes): values against
NumPy on every backend in float32 and float64, the typed refusals, and a sample against ``keras.ops`` itself (their
gradients: tests/test_ops_gradients.py). Each backend compiles one function per table, not one per op."""

from __future__ import annotations

import importlib.util
import operator
import re

import numpy as np
import pytest

import toolkit
from tests.op_checks import FLOAT32_RTOL, FLOAT64_RTOL, gradients, run
from toolkit.errors import ArgumentError

RNG = np.random.default_rng(11)
INPUTS = {
    "x": RNG.normal(size=(3, 4, 5)),
    "m": RNG.normal(size=(4, 5)),
    "v": RNG.normal(size=(6,)),
    "ids": np.array([[2, 0], [-1, 7], [1, 1]], np.int32),  # out of range and negative: clipped / counted as NumPy
    "labels": np.array([[0, 3], [2, -1]], np.int32),      # -1 is out of range: a row of zeros
    "ints": np.array([[3, -2, 7], [0, 5, -9]], np.int32),
    "flags": np.array([True, False, True, True]),
    "half": np.array([60000.0, -60000.0, 60000.0, -60000.0], np.float16),
    "start": np.array([1, 3], np.int32),                  # a start past the end of axis 1: clamped as JAX does
    "k": np.array(2, np.int32),
}


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _cumulative(values, combine):
    out = [values[0]]
    for value in values[1:]:
        out.append(combine(out[-1], value))
    return np.stack(out)


# name -> (toolkit op, NumPy reference), each of the inputs above by name. Results of integer or boolean references
# must match exactly, with their dtype; float results in the computation dtype.
BASIC = {
    "softmax_all": (lambda o, x: o.softmax(x, axis=None), lambda x: _softmax(x, None)),
    "softmax_tuple": (lambda o, x: o.softmax(x, axis=(0, -1)), lambda x: _softmax(x, (0, 2))),
    "log_softmax_all": (lambda o, m: o.log_softmax(m, None), lambda m: np.log(_softmax(m, None))),
    "log_softmax_tuple": (lambda o, x: o.log_softmax(x, (1, 2)), lambda x: np.log(_softmax(x, (1, 2)))),
    "pad_default": (lambda o, m: o.pad(m, 1), lambda m: np.pad(m, 1)),
    "pad_constant": (lambda o, m: o.pad(m, ((1, 0), (0, 2)), "constant", 0.5),
                     lambda m: np.pad(m, ((1, 0), (0, 2)), constant_values=0.5)),
    "pad_reflect": (lambda o, m: o.pad(m, ((3, 1), (2, 6)), "reflect"), lambda m: np.pad(m, ((3, 1), (2, 6)),
                                                                                       "reflect")),
    "pad_symmetric": (lambda o, m: o.pad(m, (2, 5), mode="symmetric"), lambda m: np.pad(m, (2, 5), "symmetric")),
    "pad_edge_wrap": (lambda o, m: o.pad(o.pad(m, ((1, 2),), "edge"), ((0, 1), (6, 0)), "wrap"),
                      lambda m: np.pad(np.pad(m, ((1, 2),), "edge"), ((0, 1), (6, 0)), "wrap")),
    "pad_reflect_small": (lambda o, m: o.pad(m, ((1, 2), (3, 0)), "reflect"),
                          lambda m: np.pad(m, ((1, 2), (3, 0)), "reflect")),
    "pad_ints": (lambda o, ints: o.pad(ints, (1, 2), constant_values=4), lambda ints: np.pad(ints, (1, 2),
                                                                                            constant_values=4)),
    "pad_bools": (lambda o, flags: o.pad(flags, 1, "reflect"), lambda flags: np.pad(flags, 1, "reflect")),
    "cumsum_dtype": (lambda o, ints: o.cumsum(ints, axis=0, dtype="float32"),
                     lambda ints: np.cumsum(ints, axis=0, dtype="float32")),
    "cumsum_bools": (lambda o, flags: o.cumsum(flags), lambda flags: np.cumsum(flags, dtype="int32")),
    "one_hot_axis": (lambda o, labels: o.one_hot(labels, 4, axis=0), lambda labels: np.moveaxis(
        (labels[..., None] == np.arange(4)).astype(np.float64), -1, 0)),
    "one_hot_dtype": (lambda o, labels: o.one_hot(labels, 3, dtype="int32"),
                      lambda labels: (labels[..., None] == np.arange(3)).astype(np.int32)),
    "max_initial": (lambda o, m: o.max(m, axis=1, initial=0.5), lambda m: np.max(m, axis=1, initial=0.5)),
    "min_no_axes": (lambda o, m: o.min(m, axis=()), lambda m: np.min(m, axis=())),
    "max_empty": (lambda o, m: o.max(m[:, :0], axis=1, keepdims=True, initial=-2.0),
                  lambda m: np.max(m[:, :0], axis=1, keepdims=True, initial=-2.0)),
    "min_ints": (lambda o, ints: o.min(ints, axis=0, initial=-3), lambda ints: np.min(ints, axis=0, initial=-3)),
    "sum_bools": (lambda o, flags: o.sum(flags), lambda flags: np.sum(flags, dtype=np.int32)),
    "sum_no_axes": (lambda o, x: o.sum(x, axis=()), lambda x: np.sum(x, axis=())),
    "mean_ints": (lambda o, ints: o.mean(ints, axis=-1), lambda ints: np.mean(ints, axis=-1)),
    "argmax_keepdims": (lambda o, x: o.argmax(x, axis=-2, keepdims=True),
                        lambda x: np.argmax(x, axis=-2, keepdims=True).astype(np.int32)),
    "where_ints": (lambda o, ints: o.where(ints > 0, ints, -1), lambda ints: np.where(ints > 0, ints, -1)),
    "where_constant": (lambda o: o.where(np.array([[0, 2], [3, 0]]))[1],
                       lambda: np.nonzero(np.array([[0, 2], [3, 0]]))[1].astype(np.int32)),
    "clip_ints": (lambda o, ints: o.clip(ints, -1, 4), lambda ints: np.clip(ints, -1, 4)),
    "clip_bools": (lambda o, flags: o.clip(flags, 0, 0), lambda flags: np.clip(flags, 0, 0).astype(np.int32)),
    "expand_dims_tuple": (lambda o, m: o.expand_dims(m, (0, -1, 2)), lambda m: np.expand_dims(m, (0, -1, 2))),
    "transpose_negative": (lambda o, x: o.transpose(x, (-1, 0, -2)), lambda x: np.transpose(x, (2, 0, 1))),
    "reshape_int": (lambda o, x: o.reshape(x, -1), lambda x: np.reshape(x, -1)),
    "squeeze_tuple": (lambda o, x: o.squeeze(o.reshape(x, (3, 1, 4, 1, 5)), (1, -2)), lambda x: x),
    "concatenate_flat": (lambda o, m, v: o.concatenate([m, v], axis=None), lambda m, v: np.concatenate(
        [m.ravel(), v])),
    "take_flat": (lambda o, x, ids: o.take(x, ids), lambda x, ids: np.take(x, np.clip(np.where(ids < 0, ids + 60, ids),
                                                                                      0, 59))),
    "maximum_mixed": (lambda o, ints, m: o.maximum(ints, m[:2, :3]), lambda ints, m: np.maximum(ints, m[:2, :3])),
    "matmul_ints": (lambda o, ints: o.matmul(ints, o.transpose(ints)), lambda ints: ints @ ints.T),
    "floor_divide_mod": (lambda o, ints: o.floor_divide(ints, 4) + o.mod(ints, -3),
                         lambda ints: np.floor_divide(ints, 4) + np.mod(ints, -3)),
    "divide_ints": (lambda o, ints: o.divide(ints, 4), lambda ints: ints / 4),
    "logical_numbers": (lambda o, ints: o.logical_and(ints, 1.5), lambda ints: np.logical_and(ints, 1.5)),
}

CORE = {
    "slice": (lambda o, x: o.slice(x, (1, 0, 2), (2, -1, 3)), lambda x: x[1:3, :, 2:5]),
    "slice_dynamic": (lambda o, m, start: o.slice(m, start, (2, 4)), lambda m, start: m[1:3, 1:5]),
    "slice_update": (lambda o, m, v: o.slice_update(m, (2, 1), o.reshape(v, (2, 3))),
                     lambda m, v: _updated(m, (2, 1), v.reshape(2, 3))),
    "slice_update_dynamic": (lambda o, m, v, start: o.slice_update(m, start, o.reshape(v, (3, 2))),
                             lambda m, v, start: _updated(m, (1, 3), v.reshape(3, 2))),
    "scatter": (lambda o, ids, v: o.scatter(o.clip(ids, 0, 3), v[:3], (4, 4)),
                lambda ids, v: _scattered(np.zeros((4, 4)), np.clip(ids, 0, 3), v[:3])),
    "scatter_update": (lambda o, m, v: o.scatter_update(m, np.array([[3], [0]]), o.broadcast_to(
        o.reshape(v[:2], (2, 1)), (2, 5))),
                       lambda m, v: _rows_set(m, [3, 0], np.broadcast_to(v[:2, None], (2, 5)))),
    "scatter_update_add": (lambda o, m, v: o.scatter_update(m, [[1, 2], [1, 2], [0, 4]], v[:3], reduction="add"),
                           lambda m, v: _scattered(m, np.array([[1, 2], [1, 2], [0, 4]]), v[:3])),
    "cond": (lambda o, m, k: o.cond(k > 1, lambda: o.tanh(m), lambda: m * 2.0), lambda m, k: np.tanh(m)),
    "cond_static": (lambda o, m: o.cond(False, lambda: m, lambda: (m * 3.0, None))[0], lambda m: m * 3.0),
    "switch": (lambda o, m, k: o.switch(k, [lambda a: a + 1.0, lambda a: a * a, lambda a: -a], m),
               lambda m, k: -m),
    "switch_clamped": (lambda o, m, k: o.switch(k - 5, [lambda a: a + 1.0, lambda a: a * a], m), lambda m, k: m + 1),
    "fori_loop": (lambda o, v: o.fori_loop(1, 4, lambda i, a: a * 0.5 + o.cast(i, a.dtype), v),
                  lambda v: ((v * 0.5 + 1) * 0.5 + 2) * 0.5 + 3),
    "while_loop": (lambda o, v, k: o.while_loop(lambda i, a: i < 5, lambda i, a: (i + 1, o.sin(a)), (k, v),
                                                maximum_iterations=7)[1],
                   lambda v, k: np.sin(np.sin(np.sin(v)))),
    "while_loop_static": (lambda o: o.convert_to_tensor(o.while_loop(lambda a: a < 10, lambda a: a + 3, np.array(1))),
                          lambda: np.array(10)),
    "map": (lambda o, m: o.map(lambda row: o.sum(row * row), m), lambda m: np.sum(m * m, axis=1)),
    "vectorized_map": (lambda o, m, x: o.vectorized_map(lambda e: e[0] @ e[1],
                                                        (x[:, :, :4], o.broadcast_to(m, (3, 4, 5)))),
                       lambda m, x: x[:, :, :4] @ m),
    "associative_scan": (lambda o, v: o.associative_scan(operator.add, v), lambda v: np.cumsum(v)),
    "associative_scan_reverse": (lambda o, x: o.associative_scan(o.multiply, x, reverse=True, axis=1),
                                 lambda x: np.flip(np.cumprod(np.flip(x, 1), axis=1), 1)),
    "associative_scan_pairs": (lambda o, m: o.associative_scan(
        lambda a, b: (a[0] * b[0], b[0] * a[1] + b[1]), (o.sigmoid(m), m), axis=1)[1],
                               lambda m: _cumulative(list(zip(1 / (1 + np.exp(-m.T)), m.T)),
                                                     lambda a, b: (a[0] * b[0], b[0] * a[1] + b[1]))[:, 1].T),
    "stop_gradient": (lambda o, m: o.stop_gradient(m) * m, lambda m: m * m),
    "convert_to_tensor": (lambda o, ints: o.convert_to_tensor([1, 2.5]) + o.convert_to_tensor(ints[0, :2], "int8"),
                          lambda ints: np.array([1, 2.5]) + ints[0, :2]),
    "convert_dtype": (lambda o, m: o.convert_to_tensor(m, "float32"), lambda m: m.astype(np.float32)),
    "saturate_cast": (lambda o, m: o.saturate_cast(m * 300.0, "uint8"),
                      lambda m: np.clip(m * 300.0, 0, 255).astype(np.uint8)),
    "saturate_cast_ints": (lambda o, ints: o.saturate_cast(ints * 20, "int8"),
                           lambda ints: np.clip(ints * 20, -128, 127).astype(np.int8)),
}
#: Where a float32 result is checked against float32 NumPy (``convert_to_tensor(.., "float32")``).
FIXED_DTYPES = {"convert_dtype": "float32", "cumsum_dtype": "float32"}


def _updated(m, start, updates):
    out = m.copy()
    out[tuple(slice(s, s + n) for s, n in zip(start, updates.shape))] = updates
    return out


def _scattered(base, ids, values):
    out = np.array(base, dtype=np.float64)
    np.add.at(out, tuple(ids.T), values)
    return out


def _rows_set(m, rows, values):
    out = m.copy()
    out[rows] = values
    return out


def _arguments(fn) -> list[str]:
    return list(fn.__code__.co_varnames[1:fn.__code__.co_argcount])


def _table(backend, table: dict, dtype: str) -> dict:
    """Every op of ``table`` traced in one function on ``backend``; its results as NumPy, by name."""
    names = sorted({n for fn, _ in table.values() for n in _arguments(fn)})
    found = run(backend, lambda ops, **t: {name: fn(ops, **{n: t[n] for n in _arguments(fn)})
                                           for name, (fn, _) in table.items()},
                {n: INPUTS[n] for n in names}, dtype)
    return found


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("table", ["BASIC", "CORE"])
def test_ops_match_numpy(backend, table, dtype):
    cases = {"BASIC": BASIC, "CORE": CORE}[table]
    found = _table(backend, cases, dtype)
    for name, (fn, reference) in cases.items():
        expected = np.asarray(reference(**{n: INPUTS[n] for n in _arguments(fn)}))
        result = np.asarray(found[name])
        wanted = FIXED_DTYPES.get(name, dtype if expected.dtype.kind == "f" else
                                  ("int32" if expected.dtype == np.int64 else expected.dtype.name))
        assert result.dtype == np.dtype(wanted), (name, result.dtype, wanted)
        assert result.shape == expected.shape, (name, result.shape, expected.shape)
        tolerance = FLOAT32_RTOL if "float32" in (dtype, wanted) else FLOAT64_RTOL
        if expected.dtype.kind == "f":
            np.testing.assert_allclose(result, expected, rtol=tolerance, atol=tolerance, equal_nan=True, err_msg=name)
        else:
            np.testing.assert_array_equal(result, expected, err_msg=name)


NON_FINITE = np.array([[np.nan, 1.0, -np.inf], [2.0, np.inf, 0.5]])


def test_non_finite_values_and_float16_statistics_are_numpys(backend):
    """NaN and infinities through softmax over several axes, max with ``initial``, cumsum and pad; float16
    statistics as Keras computes them (float32 inside: an overflowing variance is float16's largest value, 65504,
    and a mean of large values does not overflow), in float16."""
    fns = {"softmax": lambda o, a, h: o.softmax(o.where(a < np.inf, a, 3.0), axis=None),
           "max": lambda o, a, h: o.max(a, axis=0, initial=1.0), "cumsum": lambda o, a, h: o.cumsum(a, axis=1),
           "pad": lambda o, a, h: o.pad(a, 1, "symmetric"),
           "moments": lambda o, a, h: o.moments(o.cast(h, "float16"), axes=0),
           "mean": lambda o, a, h: o.mean(o.cast(h * 0.0 + 60000.0, "float16"))}
    found = run(backend, lambda ops, a, h: {n: fn(ops, a, h) for n, fn in fns.items()},
                {"a": NON_FINITE, "h": INPUTS["half"]}, "float64")
    finite_max = np.where(NON_FINITE < np.inf, NON_FINITE, 3.0)  # NaN < inf is False: NaN becomes 3 too
    np.testing.assert_allclose(found["softmax"], _softmax(finite_max, None), rtol=1e-12)  # -inf gives exactly 0
    np.testing.assert_array_equal(found["max"], np.max(NON_FINITE, axis=0, initial=1.0))
    np.testing.assert_array_equal(found["cumsum"], np.cumsum(NON_FINITE, axis=1))
    np.testing.assert_array_equal(found["pad"], np.pad(NON_FINITE, 1, "symmetric"))
    mean, variance = found["moments"]
    assert mean.dtype == variance.dtype == np.float16
    np.testing.assert_array_equal([mean, variance], [0.0, 65504.0])
    assert found["mean"].dtype == np.float16 and found["mean"] == np.float16(60000.0)


REFUSALS = [
    (lambda o, m: o.one_hot(o.cast(m, "int32"), 3, sparse=True), ArgumentError, "sparse=True"),
    (lambda o, m: o.pad(m, 1, "mean"), ArgumentError, "mode='mean'"),
    (lambda o, m: o.pad(m, 1, "reflect", 0), ArgumentError, "only be provided when `mode == 'constant'`"),
    (lambda o, m: o.pad(m, ((1, 2), (3,), (4, 5))), toolkit.ShapeError, "does not fit x of shape (4, 5)"),
    (lambda o, m: o.pad(m, -1), toolkit.ShapeError, "must not be negative"),
    (lambda o, m: o.reshape(m, (-2, 5)), toolkit.ShapeError, "non-negative integers or -1"),
    (lambda o, m: o.reshape(m, (-1, -1, 5)), toolkit.ShapeError, "at most one unknown dimension"),
    (lambda o, m: o.reshape(m, (3, -1)), toolkit.ShapeError, "cannot reshape x of shape (4, 5)"),
    (lambda o, m: o.where(m > 0), toolkit.ShapeError, "depends on its values"),
    (lambda o, m: o.where(m > 0, m), ArgumentError, "both x1 and x2 or neither"),
    (lambda o, m: o.max(m[:0]), toolkit.ShapeError, "give initial"),
    (lambda o, m: o.argmax(m[:, :0], axis=1), toolkit.ShapeError, "axis of size 0"),
    (lambda o, m: o.transpose(m, (1, 1)), toolkit.ShapeError, "distinct axes"),
    (lambda o, m: o.squeeze(m, 0), toolkit.ShapeError, "is not of size 1"),
    (lambda o, m: o.softmax(m, axis=2), toolkit.ShapeError, "rank 2"),
    (lambda o, m: o.scatter_update(m, [[0]], m[:1], reduction="max"), ArgumentError, "reduction='max'"),
    (lambda o, m: o.scatter_update(m, [[0]], m[:2]), toolkit.ShapeError, "updates of shape"),
    (lambda o, m: o.while_loop(lambda a: o.sum(a) < 3, lambda a: a + 1.0, m), toolkit.ShapeError,
     "needs maximum_iterations"),
    (lambda o, m: o.fori_loop(0, o.cast(o.sum(m), "int32"), lambda i, a: a, m), toolkit.ShapeError,
     "lower and upper must be"),
    (lambda o, m: o.cond(o.sum(m) > 0, lambda: m, lambda: m[0]), toolkit.ShapeError, "same shapes and dtypes"),
    (lambda o, m: o.cond(m > 0, lambda: m, lambda: m), toolkit.ShapeError, "scalar predicate"),
    (lambda o, m: o.convert_to_tensor(m, sparse=True), ArgumentError, "sparse=True"),
    (lambda o, m: o.slice(m, (0, 0), o.convert_to_tensor([2, 2])), toolkit.ShapeError, "shape must be static"),
    (lambda o, m: o.slice(m, (0, 0), (5, 2)), toolkit.ShapeError, "does not fit"),
    (lambda o, m: o.slice(m, o.cast(m[0, :2], "float32"), (1, 1)), toolkit.DTypeError, "integer start_indices"),
]


@pytest.mark.parametrize("case", range(len(REFUSALS)), ids=lambda i: re.sub(r"\W+", "_", REFUSALS[i][2])[:40])
def test_refusals_are_typed_and_name_the_argument(backend, case):
    fn, error, words = REFUSALS[case]
    with pytest.raises(error, match=re.escape(words)):
        run(backend, lambda ops, m: fn(ops, m), {"m": INPUTS["m"]}, "float32")


#: Cases whose toolkit function also runs with ``keras.ops`` (a module with the same names), float64.
#: Keras' TensorFlow backend refuses a few of the other cases where NumPy and Keras' JAX backend compute them (a
#: negative axis in softmax's tuple, reflect/symmetric widths beyond the axis, ``concatenate(axis=None)``).
KERAS_SAMPLE = ["softmax_all", "log_softmax_tuple", "pad_reflect_small", "cumsum_dtype", "one_hot_axis",
                "max_initial", "sum_bools", "expand_dims_tuple", "transpose_negative", "reshape_int", "slice",
                "slice_update", "scatter", "scatter_update_add", "switch", "fori_loop", "while_loop", "map",
                "associative_scan", "associative_scan_reverse", "saturate_cast", "cond"]


@pytest.mark.skipif(importlib.util.find_spec("keras") is None, reason="keras is not installed "
                    '(pip install "multigpu-toolkit[tensorflow]")')
@pytest.mark.parametrize("name", KERAS_SAMPLE)
def test_numpy_references_are_keras_ops(name):
    """The NumPy references above are what ``keras.ops`` computes (Keras' TensorFlow backend, float64), so the
    toolkit's ops, which equal them, have Keras' semantics."""
    toolkit.get_backend("tensorflow")  # TensorFlow starts with the logical devices, not on Keras' first op
    import keras

    fn, reference = {**BASIC, **CORE}[name]
    inputs = {n: INPUTS[n] for n in _arguments(fn)}
    found = keras.ops.convert_to_numpy(fn(keras.ops, **{n: keras.ops.convert_to_tensor(v) for n, v in
                                                       inputs.items()}))
    np.testing.assert_allclose(found, reference(**inputs), rtol=1e-10, atol=1e-10, err_msg=name)


def test_stop_gradient_passes_no_gradient(backend_name):
    """``stop_gradient(m) * m``: the gradient reaches ``m`` through the second factor only."""
    m = INPUTS["m"]
    weights = np.random.default_rng(5).normal(size=m.shape)
    found = gradients(backend_name, lambda ops, m: ops.stop_gradient(m) * m, {"m": m}, weights)
    np.testing.assert_allclose(found["m"], weights * m, rtol=1e-12, atol=1e-12)
