"""The activations, losses and normalizations (toolkit/nn/ops_nn.py) against NumPy references on every backend:
values in float32 and float64 (NaN, infinities, empty arrays, integer and boolean inputs), JAX's gradients at the
kinks on every backend, Keras' values, and the typed refusals (the gradients away from kinks:
tests/test_ops_gradients.py).

Each test runs many ops in one compiled function (a dict of results, compared entry by entry, the message naming
the op): Aesara compiles every distinct graph.
"""

from __future__ import annotations

import importlib.util
import itertools
import warnings

import numpy as np
import pytest

import toolkit
from tests.op_checks import FLOAT32_RTOL, FLOAT64_RTOL, gradients, run
from toolkit.errors import ArgumentError, DTypeError, ShapeError
from toolkit.nn.ops_nn import EPSILON, SELU_ALPHA, SELU_SCALE

DTYPES = ("float32", "float64")


# --- NumPy references (Keras' formulas: its NumPy backend, JAX's for the kinks and for logits) ---------------------
def _expm1_branch(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0.0)))


def _log_sigmoid(x):
    return -np.logaddexp(0.0, -x)


def _relu6(x):
    return np.minimum(np.maximum(x, 0.0), 6.0)


def _sparsemax(x, axis=-1):
    """The projection onto the simplex by sorting (Martins and Astudillo, 2016, algorithm 1)."""
    z = np.moveaxis(x, axis, -1)
    ordered = -np.sort(-z, axis=-1)
    ranks = np.arange(1, z.shape[-1] + 1)
    cumulative = np.cumsum(ordered, axis=-1)
    size = np.sum(1 + ranks * ordered > cumulative, axis=-1, keepdims=True)
    tau = (np.take_along_axis(cumulative, size - 1, axis=-1) - 1) / size
    return np.moveaxis(np.maximum(z - tau, 0.0), -1, axis)


def _glu(x, axis=-1):
    first, second = np.split(x, 2, axis=axis)
    return first / (1.0 + np.exp(-second))


#: name: (the toolkit's call, the NumPy reference); elementwise activations of one array.
ACTIVATIONS = {
    "relu6": (lambda ops, x: ops.relu6(x), _relu6),
    "elu": (lambda ops, x: ops.elu(x), _expm1_branch),
    "elu_alpha": (lambda ops, x: ops.elu(x, alpha=0.5), lambda x: _expm1_branch(x, 0.5)),
    "selu": (lambda ops, x: ops.selu(x), lambda x: SELU_SCALE * _expm1_branch(x, SELU_ALPHA)),
    "celu": (lambda ops, x: ops.celu(x, 2.0),
             lambda x: np.maximum(x, 0.0) + 2.0 * np.expm1(np.minimum(x, 0.0) / 2.0)),
    "leaky_relu": (lambda ops, x: ops.leaky_relu(x), lambda x: np.where(x >= 0, x, 0.2 * x)),
    "leaky_relu_slope": (lambda ops, x: ops.leaky_relu(x, negative_slope=0.01),
                         lambda x: np.where(x >= 0, x, 0.01 * x)),
    "log_sigmoid": (lambda ops, x: ops.log_sigmoid(x), _log_sigmoid),
    "hard_sigmoid": (lambda ops, x: ops.hard_sigmoid(x), lambda x: _relu6(x + 3.0) / 6.0),
    "hard_silu": (lambda ops, x: ops.hard_silu(x), lambda x: x * _relu6(x + 3.0) / 6.0),
    "hard_swish": (lambda ops, x: ops.hard_swish(x), lambda x: x * _relu6(x + 3.0) / 6.0),
    "swish": (lambda ops, x: ops.swish(x), lambda x: x / (1.0 + np.exp(-x))),
    "hard_tanh": (lambda ops, x: ops.hard_tanh(x), lambda x: np.clip(x, -1.0, 1.0)),
    "hard_shrink": (lambda ops, x: ops.hard_shrink(x), lambda x: np.where(np.abs(x) > 0.5, x, 0.0)),
    "soft_shrink": (lambda ops, x: ops.soft_shrink(x, threshold=1.0),
                    lambda x: np.where(x > 1.0, x - 1.0, np.where(x < -1.0, x + 1.0, 0.0))),
    "tanh_shrink": (lambda ops, x: ops.tanh_shrink(x), lambda x: x - np.tanh(x)),
    "threshold": (lambda ops, x: ops.threshold(x, 0.5, -2.0), lambda x: np.where(x > 0.5, x, -2.0)),
    "softsign": (lambda ops, x: ops.softsign(x), lambda x: x / (1.0 + np.abs(x))),
    "sparse_plus": (lambda ops, x: ops.sparse_plus(x),
                    lambda x: np.where(x <= -1, 0.0, np.where(x < 1, (x + 1) ** 2 / 4, x))),
    "sparse_sigmoid": (lambda ops, x: ops.sparse_sigmoid(x), lambda x: np.clip((x + 1.0) / 2.0, 0.0, 1.0)),
    "squareplus": (lambda ops, x: ops.squareplus(x, b=3), lambda x: (x + np.sqrt(x * x + 3.0)) / 2.0),
}

#: Values with NaN, infinities, kinks and both tails (where stable formulas matter).
SPECIAL = np.array([np.nan, -np.inf, -800.0, -40.0, -6.0, -3.0, -2.5, -1.0, -0.5, -1e-10, 0.0, 1e-10, 0.5, 1.0, 2.5,
                    3.0, 6.0, 7.0, 40.0, 800.0, np.inf])
#: Points away from every kink, for central differences.
SMOOTH = np.array([-7.0, -3.6, -2.2, -1.3, -0.8, -0.3, 0.2, 0.7, 1.4, 2.7, 4.6, 6.4, 9.0])
#: JAX's gradients (jax.nn, the same in jax 0.4.30 and 0.10) at the kinks: name: [(x, dy/dx)].
KINKS = {
    "relu6": [(0.0, 0.0), (6.0, 0.0)], "leaky_relu": [(0.0, 1.0)], "elu": [(0.0, 1.0)], "elu_alpha": [(0.0, 0.5)],
    "selu": [(0.0, SELU_SCALE * SELU_ALPHA)], "celu": [(0.0, 1.0)], "hard_tanh": [(-1.0, 1.0), (1.0, 1.0)],
    "hard_sigmoid": [(-3.0, 0.0), (3.0, 0.0)], "hard_silu": [(-3.0, 0.0), (3.0, 1.0)],
    "sparse_sigmoid": [(-1.0, 0.25), (1.0, 0.25)], "sparse_plus": [(-1.0, 0.0), (1.0, 1.0)],
    "soft_shrink": [(-1.0, 0.0), (1.0, 0.0)], "hard_shrink": [(-0.5, 0.0), (0.5, 0.0)], "threshold": [(0.5, 0.0)],
    "softsign": [(0.0, 1.0)], "log_sigmoid": [(0.0, 0.5)],
}


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


# --- losses, normalizations and the other composites ----------------------------------------------------------------
def _upper(dtype="float64"):
    """The upper clip bound of the probabilities, ``1 - EPSILON`` rounded to the computation dtype."""
    return float(np.asarray(1 - EPSILON, dtype))


def _bce(target, output, dtype="float64"):
    output = np.clip(output, EPSILON, _upper(dtype))
    return -(target * np.log(output) + (1 - target) * np.log(1 - output))


def _bce_logits(target, logits):
    return -target * _log_sigmoid(logits) - (1 - target) * _log_sigmoid(-logits)


def _cce(target, output, axis=-1, dtype="float64"):
    output = np.clip(output / output.sum(axis, keepdims=True), EPSILON, _upper(dtype))
    return -np.sum(target * np.log(output), axis=axis)


def _log_softmax(x, axis=-1):
    shifted = x - x.max(axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis, keepdims=True))


def _one_hot(labels, classes):
    return (labels[..., None] == np.arange(classes)).astype(np.float64)


def _normalize(x, axis=-1, order=2, epsilon=EPSILON):
    norm = np.sum(np.abs(x) ** order, axis=axis, keepdims=True) ** (1 / order)
    return x / np.maximum(norm, epsilon)


def _ctc(target, logits, target_length, output_length, blank=0):
    """CTC losses by brute force: minus the log of the summed probability of every path (one class per step, of
    the first output_length steps) that spells the first target_length labels once repeats merge and blanks go."""
    losses = []
    for labels, scores, n, steps in zip(target, logits, target_length, output_length):
        logp = _log_softmax(scores[:steps])
        total = 0.0
        for path in itertools.product(range(scores.shape[-1]), repeat=int(steps)):
            spelled = [c for i, c in enumerate(path) if c != blank and (i == 0 or c != path[i - 1])]
            if spelled == list(labels[:n]):
                total += np.exp(sum(logp[t, c] for t, c in enumerate(path)))
        losses.append(-np.log(total))
    return np.array(losses)


def _layer_norm(x, gamma, beta, axis):
    mean = x.mean(axis, keepdims=True)
    return (x - mean) / np.sqrt(x.var(axis, keepdims=True) + EPSILON) * gamma + beta


_rng = np.random.default_rng(3)
#: Named inputs of the composites: probabilities, logits (some large), targets, images, statistics.
INPUTS = {
    "probs": _rng.uniform(0.02, 0.98, (4, 5)), "logits": _rng.normal(0, 3, (4, 5)) * np.array([1, 1, 1, 1, 20.0]),
    "soft": _rng.uniform(0, 1, (4, 5)), "image": _rng.normal(size=(2, 3, 4, 6)), "mean": _rng.normal(size=3),
    "variance": _rng.uniform(0.5, 2, 3), "gamma": _rng.normal(size=6), "beta": _rng.normal(size=6),
    "noisy": _rng.normal(size=(2, 3, 4, 6)), "labels": np.array([0, 4, 2, -1], np.int32),
    "ids": np.array([[0, 3], [2, 2], [-1, 5]], np.int32), "ctc_logits": _rng.normal(size=(3, 4, 3)),
    "ctc_labels": np.array([[1, 2], [1, 1], [2, 1]], np.int32), "ctc_label_lengths": np.array([2, 2, 1], np.int32),
    "ctc_output_lengths": np.array([4, 3, 2], np.int32),
}
#: name: (the toolkit's call on the inputs, the NumPy reference on the same dict); the reference gets float64.
COMPOSITES = {
    "bce": (lambda ops, t: ops.binary_crossentropy(t["soft"], t["probs"]), lambda t: _bce(t["soft"], t["probs"])),
    "bce_clipped": (lambda ops, t: ops.binary_crossentropy(t["soft"], t["logits"] / 10.0),
                    lambda t: _bce(t["soft"], t["logits"] / 10.0, t.get("dtype", "float64"))),
    "bce_logits": (lambda ops, t: ops.binary_crossentropy(t["soft"], t["logits"], from_logits=True),
                   lambda t: _bce_logits(t["soft"], t["logits"])),
    "cce": (lambda ops, t: ops.categorical_crossentropy(t["soft"], t["probs"]), lambda t: _cce(t["soft"], t["probs"])),
    "cce_axis0": (lambda ops, t: ops.categorical_crossentropy(t["soft"], t["probs"], False, 0),
                  lambda t: _cce(t["soft"], t["probs"], 0)),
    "cce_logits": (lambda ops, t: ops.categorical_crossentropy(t["soft"], t["logits"], from_logits=True, axis=0),
                   lambda t: -np.sum(t["soft"] * _log_softmax(t["logits"], 0), 0)),
    "scce": (lambda ops, t: ops.sparse_categorical_crossentropy(t["labels"], t["probs"]),
             lambda t: _cce(_one_hot(t["labels"], 5), t["probs"])),
    "scce_logits": (lambda ops, t: ops.sparse_categorical_crossentropy(ops.reshape(t["labels"], (4, 1)), t["logits"],
                                                                       from_logits=True),
                    lambda t: -np.sum(_one_hot(t["labels"], 5) * _log_softmax(t["logits"]), -1)),
    "normalize": (lambda ops, t: ops.normalize(t["image"]), lambda t: _normalize(t["image"])),
    "normalize_all": (lambda ops, t: ops.normalize(t["image"], axis=None),
                      lambda t: _normalize(t["image"], axis=None)),
    "normalize_l3": (lambda ops, t: ops.normalize(t["image"], axis=1, order=3),
                     lambda t: _normalize(t["image"], axis=1, order=3)),
    "normalize_l1_eps": (lambda ops, t: ops.normalize(t["image"] * 1e-3, axis=0, order=1, epsilon=0.01),
                         lambda t: _normalize(t["image"] * 1e-3, axis=0, order=1, epsilon=0.01)),
    "rms": (lambda ops, t: ops.rms_normalization(t["image"], t["gamma"]),
            lambda t: t["image"] / np.sqrt(np.mean(t["image"] ** 2, -1, keepdims=True) + EPSILON) * t["gamma"]),
    "rms_axes": (lambda ops, t: ops.rms_normalization(t["image"], axis=(1, -1)),
                 lambda t: t["image"] / np.sqrt(np.mean(t["image"] ** 2, (1, 3), keepdims=True) + EPSILON)),
    "layer_norm": (lambda ops, t: ops.layer_normalization(t["image"], t["gamma"], t["beta"]),
                   lambda t: _layer_norm(t["image"], t["gamma"], t["beta"], -1)),
    "layer_norm_axes": (lambda ops, t: ops.layer_normalization(t["image"], t["noisy"][0, 0], axis=(2, 3)),
                        lambda t: _layer_norm(t["image"], t["noisy"][0, 0], 0.0, (2, 3))),
    "batch_norm": (lambda ops, t: ops.batch_normalization(t["image"][:, :, :1, :3], t["mean"], t["variance"], axis=1,
                                                          offset=t["beta"][:3], scale=t["gamma"][:3], epsilon=1e-2),
                   lambda t: (t["image"][:, :, :1, :3] - t["mean"][:, None, None])
                   / np.sqrt(t["variance"][:, None, None] + 1e-2) * t["gamma"][:3, None, None]
                   + t["beta"][:3, None, None]),
    "batch_norm_plain": (lambda ops, t: ops.batch_normalization(t["image"][..., :3], t["mean"], t["variance"], -1),
                         lambda t: (t["image"][..., :3] - t["mean"]) / np.sqrt(t["variance"] + 1e-3)),
    "psnr": (lambda ops, t: ops.psnr(t["image"], t["noisy"], 2.0),
             lambda t: 20 * np.log10(2.0) - 10 * np.log10(np.mean((t["image"] - t["noisy"]) ** 2))),
    "glu": (lambda ops, t: ops.glu(t["image"], axis=2), lambda t: _glu(t["image"], 2)),
    "ctc_loss": (lambda ops, t: ops.ctc_loss(t["ctc_labels"], t["ctc_logits"], t["ctc_label_lengths"],
                                             t["ctc_output_lengths"]),
                 lambda t: _ctc(t["ctc_labels"], t["ctc_logits"], t["ctc_label_lengths"], t["ctc_output_lengths"])),
    "ctc_loss_blank_2": (lambda ops, t: ops.ctc_loss(t["ctc_labels"] - 1, t["ctc_logits"], t["ctc_label_lengths"],
                                                     t["ctc_output_lengths"], mask_index=2),
                         lambda t: _ctc(t["ctc_labels"] - 1, t["ctc_logits"], t["ctc_label_lengths"],
                                        t["ctc_output_lengths"], blank=2)),
    "sparsemax": (lambda ops, t: ops.sparsemax(t["logits"] / 4.0, axis=0), lambda t: _sparsemax(t["logits"] / 4.0, 0)),
    "sparsemax_rows": (lambda ops, t: ops.sparsemax(t["image"]), lambda t: _sparsemax(t["image"])),
}
#: The composites that are not differentiable in their float inputs at these points, or not float (multi_hot).
INTEGER_COMPOSITES = {
    "multi_hot": (lambda ops, t: ops.multi_hot(t["ids"], 6),
                  lambda t: np.array([[1, 0, 0, 1, 0, 0], [0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 0, 1]], np.float64)),
    "multi_hot_vector": (lambda ops, t: ops.multi_hot(t["labels"], num_classes=5, dtype="int32"),
                         lambda t: np.array([1, 0, 1, 0, 1], np.int32)),
    "multi_hot_axis0": (lambda ops, t: ops.multi_hot(t["ids"], 6, axis=0),
                        lambda t: _one_hot(t["ids"], 6).transpose(2, 0, 1).max(1)),
}


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
