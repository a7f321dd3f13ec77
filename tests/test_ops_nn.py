"""The activations, losses and normalizations (toolkit/ops/nn.py) against NumPy references on every backend:
values in float32 and float64 (NaN, infinities, empty arrays, integer and boolean inputs), JAX's gradients at the
kinks on every backend, Keras' values, and the typed refusals (the gradients away from kinks:
tests/test_ops_gradients.py).

Each test runs many ops in one compiled function (a dict of results, compared entry by entry, the message naming
the op): Aesara compiles every distinct graph. The references and tables: tests/ops_nn_cases.py.
"""

from __future__ import annotations

import importlib.util
import warnings

import numpy as np
import pytest

import toolkit
from tests.op_checks import FLOAT32_RTOL, FLOAT64_RTOL, gradients, run
from tests.ops_nn_cases import (
    ACTIVATIONS,
    COMPOSITES,
    INPUTS,
    INTEGER_COMPOSITES,
    KINKS,
    SMOOTH,
    SPECIAL,
    _bce,
    _cce,
    _one_hot,
    _sparsemax,
)
from tests.ops_nn_cases import _expm1_branch as _expm1_branch  # re-exported: the gradient tables import them here
from tests.ops_nn_cases import _log_sigmoid as _log_sigmoid
from tests.ops_nn_cases import _relu6 as _relu6
from toolkit.errors import ArgumentError, DTypeError, ShapeError
from toolkit.ops.nn import EPSILON

DTYPES = ("float32", "float64")


def _compare(result, expected, dtype, name, exact_dtype=True):
    result, expected = np.asarray(result), np.asarray(expected)
    assert result.shape == expected.shape, (name, result.shape, expected.shape)
    if exact_dtype:
        assert result.dtype == np.dtype(dtype), (name, result.dtype, dtype)
    tolerance = FLOAT32_RTOL if dtype == "float32" else FLOAT64_RTOL
    np.testing.assert_allclose(result, expected, rtol=tolerance, atol=tolerance, equal_nan=True, err_msg=name)


@pytest.mark.parametrize("dtype", DTYPES)
def test_activation_values(backend, dtype):
    """Every activation on NaN, infinities, kinks, both tails, an empty array, integers and booleans, in one graph:
    NumPy's values; integer and boolean inputs compute in the computation dtype."""
    inputs = {"x": SPECIAL, "empty": np.zeros((0, 3)), "ints": np.array([-7, -3, -1, 0, 1, 2, 3, 6, 9], np.int32),
              "bools": np.array([True, False])}

    def fn(ops, x, empty, ints, bools):
        return {name: {"x": call(ops, x), "empty": call(ops, empty), "ints": call(ops, ints),
                       "bools": call(ops, bools)} for name, (call, _) in ACTIVATIONS.items()}

    out = run(backend, fn, inputs, dtype)
    for name, (_, reference) in ACTIVATIONS.items():
        with np.errstate(all="ignore"):
            for part, value in inputs.items():
                expected = reference(np.asarray(value, np.float64).astype(dtype).astype(np.float64))
                _compare(out[name][part], expected, dtype, f"{name} of {part}")


def _per_input(names):
    """One input per op (each its own gradient), and the function stacking the ops' results."""
    def fn(ops, **xs):
        return ops.stack([ACTIVATIONS[name][0](ops, xs[name]) for name in names])
    return fn


def test_activation_gradients_at_kinks(backend_name):
    """At the kinks every backend gives JAX's gradients (KINKS), where a central difference has no value to give
    (away from the kinks, tests/test_ops_gradients.py checks every activation against central differences)."""
    names = list(KINKS)
    points = np.array(sorted({x for points in KINKS.values() for x, _ in points}))
    weights = np.random.default_rng(0).normal(size=(len(names), len(points)))
    grads = gradients(backend_name, _per_input(names), {name: points.copy() for name in names}, weights)
    for row, name in enumerate(names):
        for i, (x, expected) in enumerate((x, dict(KINKS[name]).get(x)) for x in points):
            if expected is not None:
                assert grads[name][i] == pytest.approx(expected * weights[row, i], rel=1e-12, abs=1e-15), (name, x)


def test_kink_gradients_are_jax_ones():
    """KINKS, the gradients the toolkit gives at the kinks, are what jax.nn computes (where JAX is installed)."""
    jax = pytest.importorskip("jax")
    import jax.nn as jnn

    functions = {"relu6": jnn.relu6, "leaky_relu": lambda x: jnn.leaky_relu(x, 0.2), "elu": jnn.elu,
                 "elu_alpha": lambda x: jnn.elu(x, 0.5), "selu": jnn.selu, "celu": lambda x: jnn.celu(x, 2.0),
                 "hard_tanh": jnn.hard_tanh, "hard_sigmoid": jnn.hard_sigmoid, "hard_silu": jnn.hard_silu,
                 "sparse_sigmoid": jnn.sparse_sigmoid, "sparse_plus": jnn.sparse_plus, "softsign": jnn.soft_sign,
                 "log_sigmoid": jnn.log_sigmoid}
    for name, fn in functions.items():
        for x, expected in KINKS[name]:
            assert float(jax.grad(fn)(np.float32(x))) == pytest.approx(expected, rel=1e-6), (name, x)



@pytest.mark.parametrize("dtype", DTYPES)
def test_composite_values(backend, dtype):
    """Losses, normalizations, psnr, glu, sparsemax and multi_hot against NumPy, in one graph."""
    cases = {**COMPOSITES, **INTEGER_COMPOSITES}
    out = run(backend, lambda ops, **t: {name: call(ops, t) for name, (call, _) in cases.items()}, INPUTS, dtype)
    as_float64 = {n: (v.astype(dtype).astype(np.float64) if v.dtype.kind == "f" else v) for n, v in INPUTS.items()}
    as_float64["dtype"] = dtype  # the references clip probabilities to 1 - EPSILON in it
    for name, (_, reference) in cases.items():
        expected = reference(as_float64)
        wanted = dtype if np.asarray(expected).dtype.kind == "f" else np.asarray(expected).dtype.name
        _compare(out[name], expected, dtype, name, exact_dtype=False)
        assert np.asarray(out[name]).dtype == np.dtype(wanted), (name, np.asarray(out[name]).dtype)


def test_composite_edge_values(backend):
    """Empty batches, a scalar to normalize, zeros (normalize's epsilon), equal images (psnr inf), NaN through the
    losses, integer targets, float class indices (truncated) and a 1-D layer normalization."""
    inputs = {"empty": np.zeros((0, 4)), "zeros": np.zeros((2, 3)), "nan": np.array([[0.2, np.nan, 0.7]]),
              "int_target": np.array([[0, 1, 0]], np.int32), "p": np.array([[0.2, 0.5, 0.3]])}

    def fn(ops, empty, zeros, nan, int_target, p):
        return {"bce_empty": ops.binary_crossentropy(empty, empty), "cce_empty": ops.categorical_crossentropy(empty,
                                                                                                               empty),
                "scce_empty": ops.sparse_categorical_crossentropy(ops.cast(empty[:, 0], "int32"), empty),
                "normalize_scalar": ops.normalize(p[0, 0]), "normalize_zeros": ops.normalize(zeros),
                "psnr_equal": ops.psnr(p, p, 1.0), "bce_nan": ops.binary_crossentropy(p, nan),
                "cce_nan": ops.categorical_crossentropy(p, nan), "cce_int": ops.categorical_crossentropy(int_target, p),
                "scce_float_target": ops.sparse_categorical_crossentropy([1.7], p),
                "layer_norm_1d": ops.layer_normalization(p[0]), "sparsemax_nan": ops.sparsemax(nan)}

    out = run(backend, fn, inputs, "float64")
    p = inputs["p"]
    expected = {"bce_empty": np.zeros((0, 4)), "cce_empty": np.zeros(0), "scce_empty": np.zeros(0),
                "normalize_scalar": np.ones(1), "normalize_zeros": np.zeros((2, 3)), "psnr_equal": np.inf,
                "bce_nan": _bce(p, inputs["nan"]), "cce_nan": np.array([np.nan]),
                "cce_int": _cce(inputs["int_target"], p), "scce_float_target": _cce(np.array([[0.0, 1, 0]]), p),
                "layer_norm_1d": (p[0] - p[0].mean()) / np.sqrt(p[0].var() + EPSILON),
                "sparsemax_nan": np.array([[0.25, np.nan, 0.75]])}
    for name, value in expected.items():
        _compare(out[name], value, "float64", name)


def test_refusals(backend):
    """Arguments the ops do not take, and the ops the toolkit does not implement, raise typed errors naming them."""
    x = np.ones((2, 3))
    refused = [
        (ShapeError, "even", lambda ops, x: ops.glu(x)),
        (ShapeError, "axis 2 is out of range", lambda ops, x: ops.glu(x, axis=2)),
        (ShapeError, "target.shape", lambda ops, x: ops.binary_crossentropy(x[0], x)),
        (ShapeError, "target.shape", lambda ops, x: ops.categorical_crossentropy(x, x[:, :2])),
        (ShapeError, "scalars", lambda ops, x: ops.categorical_crossentropy(x[0, 0], x[0, 0])),
        (ShapeError, "axis=0", lambda ops, x: ops.sparse_categorical_crossentropy([0, 1, 2], x, axis=0)),
        (ShapeError, r"target.shape=\(3,\)", lambda ops, x: ops.sparse_categorical_crossentropy([0, 1, 2], x)),
        (ShapeError, "x2.shape", lambda ops, x: ops.psnr(x, x[0], 1.0)),
        (ShapeError, "scale.shape", lambda ops, x: ops.batch_normalization(x, x[0], x[0], 1, scale=x)),
        (ArgumentError, "order=0", lambda ops, x: ops.normalize(x, order=0)),
        (ArgumentError, "order=2.5", lambda ops, x: ops.normalize(x, order=2.5)),
        (ArgumentError, "matrix norm", lambda ops, x: ops.normalize(x, axis=None, order=1)),
        (ArgumentError, "sparse=True", lambda ops, x: ops.multi_hot([1, 2], 3, sparse=True)),
        (ArgumentError, "num_classes", lambda ops, x: ops.multi_hot([1, 2])),
        (DTypeError, "integer inputs", lambda ops, x: ops.multi_hot(x, 3)),
        (ArgumentError, "rms_scale", lambda ops, x: ops.layer_normalization(x, rms_scale=True)),
        (DTypeError, "complex", lambda ops, x: ops.polar(x, x)),
        (ShapeError, "ctc_loss needs", lambda ops, x: ops.ctc_loss(x, x, x[0], x[0])),
        (ArgumentError, "ctc_decode", lambda ops, x: ops.ctc_decode(x, x)),
    ]
    for error, text, fn in refused:
        with pytest.raises(error, match=text):
            run(backend, fn, {"x": x})


def test_keras_test_calls(backend):
    """The call forms of Keras' own tests (keras/src/ops/nn_test.py, NNOpsCorrectnessTest) for these ops give
    Keras' expected values: Python lists and float64 NumPy arrays as inputs, keywords and positional options."""
    x = np.array([-1, 0, 1, 2, 3], np.float32)
    halves = np.array([-0.5, 0, 1, 2, 3], np.float32)
    target, output = np.array([[0.1], [0.9], [0.2], [1.0]]), np.array([[0.1], [0.2], [0.3], [0.4]])

    def fn(ops, x, halves, target, output):
        return {
            "leaky_relu": ops.leaky_relu(x), "elu": ops.elu(x, alpha=0.5), "selu": ops.selu(x), "celu": ops.celu(x),
            "glu": ops.glu(np.array([-1, 0, 1, 2, 3, 4], np.float32)), "threshold": ops.threshold(halves, 0, 0),
            "hard_silu": ops.hard_silu([-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0]), "sparsemax": ops.sparsemax(halves),
            "bce": ops.binary_crossentropy(target, output, from_logits=False),
            "bce_logits": ops.binary_crossentropy(target, [[0.99], [-0.2], [0.9], [-0.4]], from_logits=True),
            "scce": ops.sparse_categorical_crossentropy([0, 1, 2], [[0.9, 0.05, 0.05], [0.05, 0.89, 0.06],
                                                                    [0.05, 0.01, 0.94]]),
            "scce_logits": ops.sparse_categorical_crossentropy(
                np.array([0, 1, 2]), [[8.0, 1.0, 1.0], [0.0, 9.0, 1.0], [2.0, 3.0, 5.0]], from_logits=True),
            "normalize": ops.normalize(np.array([[1e-6, 1e-8]], np.float32), axis=-1, order=2, epsilon=1e-5),
            "normalize_l3": ops.normalize(np.array([[1, 2, 3], [1, 2, 3]], np.float32), order=3),
            "multi_hot": ops.multi_hot(np.array([0, -1, -1, 3]), 4),
            "rms": ops.rms_normalization(np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]], np.float32),
                                         np.array([10.0] * 3, np.float32)),
            "layer_norm": ops.layer_normalization(np.arange(5, dtype="float32")),
            "ctc_loss": ops.ctc_loss(np.array([[1, 2, 1], [1, 2, 2]]), np.array(
                [[[0.4, 0.8, 0.4], [0.2, 0.8, 0.3], [0.9, 0.4, 0.5]], [[0.4, 0.8, 0.4], [0.2, 0.3, 0.3],
                                                                        [0.4, 0.3, 0.2]]]),
                np.array([3, 2]), np.array([3, 2])),
            "batch_norm": ops.batch_normalization(np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]),
                                                  np.array([0.2, 0.3, 0.4]), np.array([4.0, 16.0, 64.0]), axis=-1,
                                                  offset=np.array([5.0, 10.0, 15.0]),
                                                  scale=np.array([10.0, 20.0, 30.0]), epsilon=1e-7),
        }

    out = run(backend, fn, {"x": x, "halves": halves, "target": target, "output": output}, "float32")
    expected = {
        "leaky_relu": [-0.2, 0, 1, 2, 3], "elu": [-0.31606027, 0, 1, 2, 3],
        "selu": [-1.1113307, 0.0, 1.050701, 2.101402, 3.152103], "celu": [-0.63212055, 0.0, 1.0, 2.0, 3.0],
        "glu": [-0.8807971, 0.0, 0.98201376], "threshold": [0.0, 0.0, 1.0, 2.0, 3.0],
        "hard_silu": [-0.0, -0.333333, -0.333333, 0.0, 0.6666667, 1.6666667, 3.0],
        "sparsemax": [0.0, 0.0, 0.0, 0.0, 1.0],
        "bce": [[0.32508277], [1.47080801], [0.52613434], [0.91629048]],
        "bce_logits": [[1.206961], [0.778139], [1.061154], [0.913015]],
        "scce": [0.105361, 0.116534, 0.061875], "scce_logits": [0.001822, 0.000459, 0.169846],
        "normalize": [[1e-1, 1e-3]], "normalize_l3": [[0.30285344, 0.6057069, 0.9085603]] * 2,
        "multi_hot": [1, 0, 0, 1],
        "rms": np.array([[0.46291, 0.92582, 1.38873], [0.78954, 0.98693, 1.18431]]) * 10,
        "layer_norm": [-1.4142135, -0.70710677, 0.0, 0.7071067, 1.4142135],
        "batch_norm": [[4.5, 9.5, 14.625], [6.0, 11.0, 15.75]], "ctc_loss": [3.4411672, 1.91680186],
    }
    for name, value in expected.items():
        # Keras' assertAllClose tolerances (1e-6), and 1e-3 where its test uses it (rms, layer_norm).
        tolerance = 1e-3 if name in ("rms", "layer_norm") else 1e-6
        np.testing.assert_allclose(out[name], value, rtol=tolerance, atol=tolerance, err_msg=name)


@pytest.mark.skipif(importlib.util.find_spec("keras") is None, reason="keras is not installed")
def test_references_are_keras_ops():
    """The NumPy references above are what keras.ops computes (float64, Keras on TensorFlow), so the toolkit's
    ops, which equal them, have Keras' semantics; sparsemax only where its support has one entry (Keras 3.15.1's
    tau is wrong otherwise: see NNOps.sparsemax)."""
    toolkit.get_backend("tensorflow")  # TensorFlow starts with the logical devices, not on Keras' first op
    import keras

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = np.concatenate([SPECIAL[1:-1], SMOOTH])  # Keras on TensorFlow loses NaN in some of them; not compared
        keras_calls = {
            "relu6": keras.ops.relu6(x), "elu": keras.ops.elu(x), "elu_alpha": keras.ops.elu(x, alpha=0.5),
            "selu": keras.ops.selu(x), "celu": keras.ops.celu(x, 2.0), "leaky_relu": keras.ops.leaky_relu(x),
            "log_sigmoid": keras.ops.log_sigmoid(x), "hard_sigmoid": keras.ops.hard_sigmoid(x),
            "hard_silu": keras.ops.hard_silu(x), "hard_tanh": keras.ops.hard_tanh(x),
            "hard_shrink": keras.ops.hard_shrink(x), "soft_shrink": keras.ops.soft_shrink(x, threshold=1.0),
            "tanh_shrink": keras.ops.tanh_shrink(x), "threshold": keras.ops.threshold(x, 0.5, -2.0),
            "softsign": keras.ops.softsign(x), "sparse_plus": keras.ops.sparse_plus(x),
            "sparse_sigmoid": keras.ops.sparse_sigmoid(x), "squareplus": keras.ops.squareplus(x, b=3),
        }
        for name, value in keras_calls.items():
            with np.errstate(all="ignore"):
                expected = ACTIVATIONS[name][1](x)
            # Keras on TensorFlow rounds leaky_relu's slope to float32 (tf.nn.leaky_relu's attribute).
            tolerance = 1e-7 if name == "leaky_relu" else 1e-10
            np.testing.assert_allclose(keras.ops.convert_to_numpy(value), expected, rtol=tolerance, atol=1e-10,
                                       err_msg=name)
        t = INPUTS
        rows = t["probs"] / t["probs"].sum(-1, keepdims=True)  # Keras on TensorFlow does not renormalize them
        keras_calls = {
            "bce": (keras.ops.binary_crossentropy(t["soft"], t["probs"]), COMPOSITES["bce"][1](t)),
            "bce_logits": (keras.ops.binary_crossentropy(t["soft"], t["logits"], from_logits=True),
                           COMPOSITES["bce_logits"][1](t)),
            "cce_axis0": (keras.ops.categorical_crossentropy(t["soft"], t["probs"], False, 0),
                          COMPOSITES["cce_axis0"][1](t)),
            "scce": (keras.ops.sparse_categorical_crossentropy(np.abs(t["labels"]), rows),
                     _cce(_one_hot(np.abs(t["labels"]), 5), rows)),
            "normalize_l3": (keras.ops.normalize(t["image"], axis=1, order=3), COMPOSITES["normalize_l3"][1](t)),
            "layer_norm": (keras.ops.layer_normalization(t["image"], t["gamma"], t["beta"]),
                           COMPOSITES["layer_norm"][1](t)),
            "rms": (keras.ops.rms_normalization(t["image"], t["gamma"]), COMPOSITES["rms"][1](t)),
            "psnr": (keras.ops.psnr(t["image"], t["noisy"], 2.0), COMPOSITES["psnr"][1](t)),
            "glu": (keras.ops.glu(t["image"], axis=2), COMPOSITES["glu"][1](t)),
            "multi_hot_axis0": (keras.ops.multi_hot(t["ids"], 6, axis=0), INTEGER_COMPOSITES["multi_hot_axis0"][1](t)),
            "ctc_loss": (keras.ops.ctc_loss(t["ctc_labels"], t["ctc_logits"], t["ctc_label_lengths"],
                                            t["ctc_output_lengths"]), COMPOSITES["ctc_loss"][1](t)),
            "sparsemax": (keras.ops.sparsemax(np.array([-0.5, 0.0, 1.0, 2.0, 3.0])), _sparsemax(
                np.array([-0.5, 0.0, 1.0, 2.0, 3.0]))),
        }
        for name, (value, expected) in keras_calls.items():
            np.testing.assert_allclose(keras.ops.convert_to_numpy(value), expected, rtol=1e-6, atol=1e-6,
                                       err_msg=name)
