"""The statistics ops (:mod:`toolkit.ops.statistics`): ``corrcoef`` and ``unique`` on every backend against NumPy
in float32 and float64 (NaN, constant rows, single variables, integer and boolean inputs, empty arrays, ``size``
padding and truncation), their gradients by central differences and across backends, ``corrcoef`` in a
data-parallel step on 1 and 4 devices, the typed refusals, and a sample against ``keras.ops``.

Each backend compiles one function per table (a dict of results, compared entry by entry, the message naming the
case)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import toolkit
from tests.conftest import MAX_DEVICES, THEANO, needs_all_backends
from tests.op_checks import FLOAT32_RTOL, FLOAT64_RTOL, check_gradients, gradients, one_device_equals_many, run
from toolkit.errors import ArgumentError, ComputeError, ShapeError
from toolkit.tolerances import FLOAT64_ATOL

RNG = np.random.default_rng(7)
INPUTS = {
    "m": RNG.normal(size=(3, 5)),
    "flat": np.array([[2.5, np.nan, -1.0, 2.5], [0.0, -1.0, np.nan, -0.0]]),  # repeats, NaN, -0.0 == 0.0
    "ids": np.array([3, 1, 2, 1, 4, 2], np.int32),
    "rows": np.array([[1, 0], [0, 1], [1, 0], [2, 2], [0, 1]], np.int32),
    "cube": np.array([[[1, 1], [1, 1]], [[0, 0], [0, 0]], [[1, 1], [1, 1]]], np.int64),
    "flags": np.array([True, False, True, True]),
    "empty": np.zeros((0, 3)),
}


def _unique(x, size=None, fill_value=0, axis=None, **returns):
    """NumPy's unique (NaN distinct), with Keras' ``size``: values padded with ``fill_value``, first indices with
    1, counts with 0; truncated to ``size``; int32 indices; the inverse in ``x``'s shape when ``axis`` is None."""
    found = np.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=axis, equal_nan=False)
    values, index, inverse, counts = found[0], found[1], found[2], found[3]
    inverse = inverse.reshape(np.shape(x)) if axis is None else inverse.reshape(-1)
    if size is not None:
        axis0 = 0 if axis is None else axis % np.ndim(x)
        extra = size - values.shape[axis0]
        if extra < 0:
            values = np.take(values, np.arange(size), axis=axis0)
            index, counts = index[:size], counts[:size]
        else:
            widths = [(0, extra if a == axis0 else 0) for a in range(values.ndim)]
            values = np.pad(values, widths, constant_values=fill_value)
            index, counts = np.pad(index, (0, extra), constant_values=1), np.pad(counts, (0, extra))
    asked = [values] + [v.astype(np.int32) for k, v in zip(("index", "inverse", "counts"), (index, inverse, counts))
                        if returns.get(f"return_{k}")]
    return asked[0] if len(asked) == 1 else tuple(asked)


def _corrcoef(x):
    with np.errstate(invalid="ignore", divide="ignore"):  # a constant row: NaN, as the toolkit gives it
        return np.corrcoef(x)


ALL = {"return_index": True, "return_inverse": True, "return_counts": True}

#: name: (the toolkit's call on ``ops`` and inputs ``a``, the NumPy reference). Integer results match exactly, with
#: their dtype; float results in the computation dtype.
CASES = {
    "corrcoef": (lambda o, a: o.corrcoef(a["m"]), lambda a: np.corrcoef(a["m"])),
    "corrcoef_constant_row": (lambda o, a: o.corrcoef(o.concatenate([a["m"][:2], a["m"][:1] * 0.0 + 2.0])),
                              lambda a: _corrcoef(np.concatenate([a["m"][:2], a["m"][:1] * 0.0 + 2.0]))),
    "corrcoef_vector": (lambda o, a: o.corrcoef(a["m"][0]), lambda a: np.corrcoef(a["m"][0])),
    "corrcoef_one_row": (lambda o, a: o.corrcoef(a["m"][1:2]), lambda a: np.corrcoef(a["m"][1:2])),
    "corrcoef_ints": (lambda o, a: o.corrcoef(a["rows"]), lambda a: _corrcoef(a["rows"])),
    "unique_sized": (lambda o, a: o.unique(a["ids"], size=6, fill_value=-1, **ALL),
                     lambda a: _unique(a["ids"], 6, -1, **ALL)),
    "unique_truncated": (lambda o, a: o.unique(a["ids"], size=2, return_index=True, return_counts=True),
                         lambda a: _unique(a["ids"], 2, return_index=True, return_counts=True)),
    "unique_nan": (lambda o, a: o.unique(a["flat"], size=7, fill_value=9.0, **ALL),
                   lambda a: _unique(a["flat"], 7, 9.0, **ALL)),
    "unique_rows": (lambda o, a: o.unique(a["rows"], axis=0, size=4, **ALL), lambda a: _unique(a["rows"], 4, axis=0,
                                                                                                 **ALL)),
    "unique_columns": (lambda o, a: o.unique(a["rows"], axis=-1, size=5, fill_value=-1, **ALL),
                       lambda a: _unique(a["rows"], 5, -1, axis=-1, **ALL)),
    "unique_subarrays": (lambda o, a: o.unique(a["cube"], axis=0, size=2, sorted=False, **ALL),
                         lambda a: _unique(a["cube"], 2, axis=0, **ALL)),
    "unique_float_rows": (lambda o, a: o.unique(a["flat"], axis=1, size=4, return_inverse=True),
                          lambda a: _unique(a["flat"], 4, axis=1, return_inverse=True)),
    "unique_bools": (lambda o, a: o.unique(a["flags"], size=3, return_counts=True),
                     lambda a: _unique(a["flags"], 3, return_counts=True)),
    "unique_empty": (lambda o, a: o.unique(a["empty"], axis=0, size=2, **ALL),
                     lambda a: (np.zeros((2, 3)), np.ones(2, np.int32), np.zeros(0, np.int32), np.zeros(2, np.int32))),
    # Without size, x known when the op is built (a constant): the same op, sized by NumPy's count.
    "unique_constant": (lambda o, a: o.unique(o.convert_to_tensor(np.array([[5, 3], [3, 5], [5, 3]], np.int32)),
                                              axis=0, **ALL),
                        lambda a: _unique(np.array([[5, 3], [3, 5], [5, 3]], np.int32), axis=0, **ALL)),
}


def _compare(name: str, result, expected, dtype: str) -> None:
    result, expected = ((v if isinstance(v, tuple) else (v,)) for v in (result, expected))
    assert len(result) == len(expected), (name, len(result), len(expected))
    for i, (found, wanted) in enumerate(zip(result, expected)):
        found, wanted = np.asarray(found), np.asarray(wanted)
        message = f"{name}[{i}]"
        assert found.shape == wanted.shape, (message, found.shape, wanted.shape)
        if wanted.dtype.kind == "f":
            assert found.dtype == np.dtype(dtype), (message, found.dtype, dtype)
            tolerance = FLOAT32_RTOL if dtype == "float32" else FLOAT64_RTOL
            np.testing.assert_allclose(found, wanted, rtol=tolerance, atol=tolerance, equal_nan=True, err_msg=message)
        else:
            assert found.dtype == wanted.dtype, (message, found.dtype, wanted.dtype)
            np.testing.assert_array_equal(found, wanted, err_msg=message)


#: The cases whose graph depends on the computation dtype (float inputs or results), the ones run in float32 too: the
#: others are the same graph in both (each unique compiles tens of seconds' worth of sorts on the Theano family).
FLOAT_CASES = [name for name in CASES if name.startswith("corrcoef") or name in ("unique_nan", "unique_float_rows",
                                                                                 "unique_empty")]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_ops_match_numpy(backend, dtype):
    cases = {name: CASES[name] for name in (CASES if dtype == "float64" else FLOAT_CASES)}
    found = run(backend, lambda ops, **a: {name: fn(ops, a) for name, (fn, _) in cases.items()}, INPUTS, dtype)
    for name, (_, reference) in cases.items():
        inputs = {n: v.astype(dtype) if v.dtype.kind == "f" else v for n, v in INPUTS.items()}
        expected = reference(inputs)
        expected = tuple(expected) if isinstance(expected, tuple) else expected
        _compare(name, found[name] if not isinstance(found[name], list) else tuple(found[name]), expected, dtype)


def test_dtypes_are_keras(backend):
    """corrcoef's dtype as Keras' (JAX's): floats keep theirs, int64 gives float64, other integers and booleans the
    computation dtype; unique keeps x's dtype and gives int32 indices."""
    x = np.arange(8.0).reshape(2, 4) ** 2
    found = run(backend, lambda ops, x: [ops.corrcoef(ops.cast(x, d)) for d in ("float16", "int64", "int8", "bool")]
                + list(ops.unique(ops.cast(x, "int16"), size=3, return_inverse=True)), {"x": x}, "float32")
    assert [np.asarray(v).dtype.name for v in found] == ["float16", "float64", "float32", "float32", "int16", "int32"]
    np.testing.assert_allclose(found[0].astype(np.float64), np.corrcoef(x), rtol=1e-3)


def _differentiable(ops, m, flat):
    """corrcoef and unique's values (taken from distinct entries: no tie for a small step to break) in one vector."""
    return ops.concatenate([ops.reshape(ops.corrcoef(m), (-1,)), ops.unique(m[0], size=6, fill_value=0.5),
                            ops.reshape(ops.unique(flat, axis=1, size=3), (-1,))])


def _differentiable_reference(m, flat):
    return np.concatenate([np.corrcoef(m).ravel(), _unique(m[0], 6, 0.5), _unique(flat, 3, axis=1).ravel()])


GRADIENT_INPUTS = {"m": INPUTS["m"], "flat": RNG.normal(size=(2, 4))}


def test_gradients_match_central_differences(backend_name):
    check_gradients(backend_name, _differentiable, _differentiable_reference, GRADIENT_INPUTS)


@needs_all_backends
def test_gradients_agree_across_backends():
    weights = np.random.default_rng(3).normal(size=_differentiable_reference(**GRADIENT_INPUTS).shape)
    tf_grads = gradients("tensorflow", _differentiable, GRADIENT_INPUTS, weights)
    theano_grads = gradients(THEANO, _differentiable, GRADIENT_INPUTS, weights)
    for name in tf_grads:
        np.testing.assert_allclose(tf_grads[name], theano_grads[name], rtol=0, atol=FLOAT64_ATOL, err_msg=name)


def _correlated(ops, params, x):
    """The batch through the correlation matrix of the weights' rows (the batch axis stays apart)."""
    return ops.matmul(ops.matmul(x, ops.corrcoef(params["w"])), params["w"])


def test_corrcoef_in_a_data_parallel_step(backend_name):
    """The same gradients and the same step on 1 device and on 4 over a batch of 5 (uneven shards)."""
    model = toolkit.Model(lambda rng: {"w": rng.normal(size=(3, 6))}, _correlated,
                          lambda ops, out, y: ops.mean(ops.square(out - y), axis=1))
    x, y = np.random.default_rng(5).normal(size=(5, 3)), np.zeros((5, 6))
    one_device_equals_many(backend_name, model, x, y, 1e-2, MAX_DEVICES)


REFUSALS = [
    (lambda o, m: o.corrcoef(o.reshape(m, (3, 5, 1))), ShapeError, "rank 2 at most"),
    (lambda o, m: o.unique(m, size=-1), ArgumentError, "size=-1"),
    (lambda o, m: o.unique(m, size=2.0), ArgumentError, "size=2.0"),
    (lambda o, m: o.unique(m, axis=2, size=2), ShapeError, "axis 2"),
]


@pytest.mark.parametrize("case", range(len(REFUSALS)), ids=lambda i: REFUSALS[i][2])
def test_refusals_are_typed_and_name_the_argument(backend, case):
    fn, error, words = REFUSALS[case]
    with pytest.raises(error, match=words):
        run(backend, lambda ops, m: fn(ops, m), {"m": INPUTS["m"]}, "float32")


def test_unique_of_a_computed_tensor_asks_for_size(backend_name):
    """In a compiled step (every backend's training step) unique's size must be given: a typed refusal naming it."""
    with pytest.raises((ShapeError, ComputeError), match="needs size=") as raised:
        gradients(backend_name, lambda ops, m: ops.unique(m), {"m": INPUTS["m"]}, np.ones(15))
    # The trainer reports an error raised while tracing as a ComputeError, with the op's own as its cause.
    assert isinstance(raised.value if isinstance(raised.value, ShapeError) else raised.value.__cause__, ShapeError)


#: Keras' TensorFlow backend gives ``sorted=False`` in order of first occurrence (unique_subarrays is left out).
KERAS_SAMPLE = ["corrcoef", "corrcoef_constant_row", "unique_sized", "unique_truncated", "unique_rows",
                "unique_columns"]


@pytest.mark.skipif(importlib.util.find_spec("keras") is None, reason="keras is not installed "
                    '(pip install "multigpu-toolkit[tensorflow]")')
@pytest.mark.parametrize("name", KERAS_SAMPLE)
def test_numpy_references_are_keras_ops(name):
    """The NumPy references above are what ``keras.ops`` computes (Keras' TensorFlow backend, float64)."""
    toolkit.get_backend("tensorflow")  # TensorFlow starts with the logical devices, not on Keras' first op
    import keras

    fn, reference = CASES[name]
    found = fn(keras.ops, {n: keras.ops.convert_to_tensor(v) for n, v in INPUTS.items() if n != "empty"})
    found = tuple(keras.ops.convert_to_numpy(v) for v in (found if isinstance(found, tuple) else (found,)))
    expected = reference(INPUTS)
    _compare(name, found if len(found) > 1 else found[0], expected, "float64")
