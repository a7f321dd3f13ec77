"""The function transformations (:mod:`toolkit.ops.functional`): ``vectorize`` on every backend against
``numpy.vectorize`` in float32 and float64 (broadcast loop axes, signatures with several arguments and results,
excluded and None arguments, an empty loop), ``custom_gradient``'s values and the gradient the trainer takes (the
custom one, in each of the forms Keras documents for ``grad_fn``), both in a data-parallel step on 1 and 4 devices,
gradients by central differences and across backends, the typed refusals, and a sample against ``keras.ops``."""

from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest

import toolkit
from tests.conftest import MAX_DEVICES, THEANO, needs_all_backends
from tests.op_checks import FLOAT32_RTOL, FLOAT64_RTOL, check_gradients, gradients, one_device_equals_many, run
from toolkit.errors import ArgumentError, ComputeError, ShapeError
from toolkit.tolerances import FLOAT64_ATOL

RNG = np.random.default_rng(13)
INPUTS = {
    "t": RNG.normal(size=(2, 1, 3)),
    "m": RNG.normal(size=(4, 3)),
    "cube": RNG.normal(size=(3, 2, 2)),
    "mats": RNG.normal(size=(2, 3, 4)),
    "vecs": RNG.normal(size=(5, 1, 4)),
    "e": np.zeros((0, 3)),
    "ids": np.array([[3, -1], [0, 7]], np.int32),
}

#: name: (the toolkit's call on ``ops`` and inputs ``a``, the NumPy reference). ``ops`` may be ``keras.ops``.
CASES = {
    "broadcast": (lambda o, a: o.vectorize(lambda x, y: x * y + o.sin(x))(a["t"], a["m"]),
                  lambda a: np.vectorize(lambda x, y: x * y + np.sin(x))(a["t"], a["m"])),
    "trace": (lambda o, a: o.vectorize(o.trace, signature="(d,d)->()")(a["cube"]),
              lambda a: np.vectorize(np.trace, signature="(d,d)->()")(a["cube"])),
    "trace_matrix": (lambda o, a: o.vectorize(o.trace, signature="(d,d)->()")(a["cube"][0]),
                     lambda a: np.vectorize(np.trace, signature="(d,d)->()")(a["cube"][0])),
    "diag_matrix": (lambda o, a: o.vectorize(o.diag, signature="(d,d)->(d)")(a["cube"][1]),
                    lambda a: np.vectorize(np.diag, signature="(d,d)->(d)")(a["cube"][1])),
    "diag": (lambda o, a: o.vectorize(o.diag, signature="(d,d)->(d)")(a["cube"]),
             lambda a: np.vectorize(np.diag, signature="(d,d)->(d)")(a["cube"])),
    "matvec": (lambda o, a: o.vectorize(o.matmul, signature="(m,n),(n)->(m)")(a["mats"], a["vecs"]),
               lambda a: np.vectorize(np.matmul, signature="(m,n),(n)->(m)")(a["mats"], a["vecs"])),
    "two_results": (lambda o, a: o.vectorize(lambda v: (o.sum(v), v * 2.0), signature="(n)->(),(n)")(a["m"]),
                    lambda a: np.vectorize(lambda v: (np.sum(v), v * 2.0), signature="(n)->(),(n)")(a["m"])),
    "excluded_axis": (lambda o, a: o.vectorize(lambda x, axis: o.sum(x, axis=axis), excluded={1},
                                               signature="(n,k)->(k)")(a["mats"], 0),
                      lambda a: np.vectorize(lambda x, axis: np.sum(x, axis=axis), excluded={1},
                                             signature="(n,k)->(k)")(a["mats"], 0)),
    "excluded_keyword": (lambda o, a: o.vectorize(lambda x, scale=1.0: x * scale, excluded={"scale"})(a["m"],
                                                                                                      scale=3.0),
                         lambda a: a["m"] * 3.0),
    "none_and_number": (lambda o, a: o.vectorize(lambda x, y, z: x - z if y is None else x)(a["m"], None, 1.5),
                        lambda a: a["m"] - 1.5),
    "empty_loop": (lambda o, a: o.vectorize(lambda v: v * 2.0, signature="(n)->(n)")(a["e"]),
                   lambda a: np.zeros((0, 3))),
    "ints": (lambda o, a: o.vectorize(lambda i: i * 2 + 1)(a["ids"]), lambda a: (a["ids"] * 2 + 1).astype(np.int32)),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_vectorize_matches_numpy(backend, dtype):
    found = run(backend, lambda ops, **a: {name: fn(ops, a) for name, (fn, _) in CASES.items()}, INPUTS, dtype)
    for name, (_, reference) in CASES.items():
        inputs = {n: v.astype(dtype) if v.dtype.kind == "f" else v for n, v in INPUTS.items()}
        expected = reference(inputs)
        results = found[name] if isinstance(expected, tuple) else (found[name],)
        for i, (result, wanted) in enumerate(zip(results, expected if isinstance(expected, tuple) else (expected,))):
            result, wanted = np.asarray(result), np.asarray(wanted)
            assert result.shape == wanted.shape, (name, i, result.shape, wanted.shape)
            assert result.dtype == (np.dtype(dtype) if wanted.dtype.kind == "f" else wanted.dtype), (name, i)
            tolerance = FLOAT32_RTOL if dtype == "float32" else FLOAT64_RTOL
            np.testing.assert_allclose(result, wanted, rtol=tolerance, atol=tolerance, err_msg=f"{name}[{i}]")


def _vectorized(ops, t, m, mats, vecs):
    a = {"t": t, "m": m, "mats": mats, "vecs": vecs, "cube": mats[:, :2, :2]}
    parts = [CASES[name][0](ops, a) for name in ("broadcast", "matvec", "trace")]
    parts += list(CASES["two_results"][0](ops, a))
    return ops.concatenate([ops.reshape(p, (-1,)) for p in parts], axis=0)


def _vectorized_reference(t, m, mats, vecs):
    a = {"t": t, "m": m, "mats": mats, "vecs": vecs, "cube": mats[:, :2, :2]}
    parts = [CASES[name][1](a) for name in ("broadcast", "matvec", "trace")] + list(CASES["two_results"][1](a))
    return np.concatenate([np.reshape(p, -1) for p in parts])


# --- custom_gradient ------------------------------------------------------------------------------------------------
#: The custom gradients below: a scale the true gradient would not have, and a clip of the upstream gradient.
SCALE, CLIP = 3.0, 0.25


def _custom(ops):
    """Functions with custom gradients, one per form of ``grad_fn`` Keras documents."""
    @ops.custom_gradient
    def scaled_sin(x):  # TensorFlow and JAX's form: grad(upstream)
        return ops.sin(x), lambda upstream: upstream * ops.cos(x) * SCALE

    @ops.custom_gradient
    def log1pexp(x):  # Keras' backend-agnostic form (its docstring and test)
        e = ops.exp(x)

        def grad(*args, upstream=None):
            if upstream is None:
                (upstream,) = args
            return ops.multiply(upstream, 1.0 - 1.0 / ops.add(1, e))

        return ops.log(1 + e), grad

    @ops.custom_gradient
    def product(x, y):  # PyTorch's form: grad(*args, upstream); y gets no gradient
        def grad(*args, upstream):
            return ops.clip(upstream, -CLIP, CLIP) * args[1], None

        return x * y, grad

    @ops.custom_gradient
    def pair(x):  # several outputs: one upstream each
        return (x * 2.0, ops.square(x)), lambda up_double, up_square: up_double + up_square

    return scaled_sin, log1pexp, product, pair


def _custom_outputs(ops, x, y):
    scaled_sin, log1pexp, product, pair = _custom(ops)
    double, square = pair(x)
    return ops.concatenate([scaled_sin(x), log1pexp(x * 50.0), product(x, y), double, square], axis=0)


def _custom_reference(x, y):
    return np.concatenate([np.sin(x), np.log(1 + np.exp(x * 50.0)), x * y, x * 2.0, x * x])


def _custom_gradients(x, y, weights):
    """The gradient the custom functions define, for the weighted sum of :func:`_custom_outputs`."""
    w = weights.reshape(5, -1)
    sigmoid = 1.0 / (1.0 + np.exp(-x * 50.0))
    grad_x = w[0] * np.cos(x) * SCALE + w[1] * sigmoid * 50.0 + np.clip(w[2], -CLIP, CLIP) * y + w[3] + w[4]
    return {"x": grad_x, "y": np.zeros_like(y)}


CUSTOM_INPUTS = {"x": np.array([0.5, -1.0, 8.0, 0.0]), "y": np.array([2.0, -3.0, 0.5, 1.0])}


def test_custom_gradient_values_and_the_trainers_gradient(backend_name):
    """Each function gives ``f``'s output, and the gradient the trainer takes is the custom one (not the true one:
    scaled, clipped, missing for ``y``)."""
    found = run(toolkit.get_backend(backend_name), _custom_outputs, CUSTOM_INPUTS)
    # atol: log(1 + exp(-50)) is 0 on TensorFlow, 2e-22 on Aesara (which rewrites it into a softplus).
    np.testing.assert_allclose(found, _custom_reference(**CUSTOM_INPUTS), rtol=FLOAT64_RTOL, atol=1e-20)
    weights = np.random.default_rng(2).normal(size=found.shape)
    grads = gradients(backend_name, _custom_outputs, CUSTOM_INPUTS, weights)
    expected = _custom_gradients(**CUSTOM_INPUTS, weights=weights)
    for name in expected:
        np.testing.assert_allclose(grads[name], expected[name], rtol=FLOAT64_RTOL, atol=FLOAT64_RTOL, err_msg=name)


def test_custom_gradient_with_integer_arguments_and_outputs(backend_name):
    """An integer argument gets no gradient and an integer output passes none (its upstream is zeros)."""
    def fn(ops, x):
        @ops.custom_gradient
        def counted(x, n):
            return (x * ops.cast(n, x.dtype), ops.cast(x > 0, "int32")), lambda up, up_int: (up * SCALE, None)

        scaled, positive = counted(x, np.array([1, 2, 3, 4], np.int32))
        return scaled + ops.cast(positive, x.dtype)

    grads = gradients(backend_name, fn, {"x": CUSTOM_INPUTS["x"]}, CUSTOM_INPUTS["y"])
    np.testing.assert_allclose(grads["x"], CUSTOM_INPUTS["y"] * SCALE, rtol=FLOAT64_RTOL)


def _custom_model(ops, params, x):
    scaled_sin = _custom(ops)[0]
    return scaled_sin(ops.matmul(x, params["w"]))


def _plain_model(ops, params, x):
    return ops.sin(ops.matmul(x, params["w"]))


def test_custom_gradient_in_a_data_parallel_step(backend_name):
    """On 1 device and on 4 over a batch of 5 (uneven shards): the same gradients, and they are the custom ones
    (``SCALE`` times the true gradient, which the same model without the custom gradient gives)."""
    def model(forward):
        return toolkit.Model(lambda rng: {"w": rng.normal(size=(3, 4))}, forward,
                             lambda ops, out, y: ops.mean(ops.square(out - y), axis=1))

    x, y = np.random.default_rng(5).normal(size=(5, 3)), np.zeros((5, 4))
    grad = one_device_equals_many(backend_name, model(_custom_model), x, y, 1e-2, MAX_DEVICES)
    plain = toolkit.DataParallel(model(_plain_model), backend_name, 1, toolkit.optim.SGD(1e-2), dtype="float64")
    np.testing.assert_allclose(grad, SCALE * plain.gradients(x, y)["w"], rtol=1e-12, atol=1e-12)


def test_custom_gradient_inside_a_loop(backend_name):
    """Inside ``ops.map`` and ``ops.vectorize`` (loops that TensorFlow differentiates with its tape, and whose step
    Aesara and PyTensor differentiate with JAX), the gradient is the custom one too."""
    x = CUSTOM_INPUTS["x"].reshape(2, 2)

    def fn(ops, x):
        scaled_sin, _, product, _ = _custom(ops)
        mapped = ops.map(lambda row: scaled_sin(row), x)
        return ops.stack([mapped, ops.vectorize(product)(x, x[::-1])])

    weights = np.random.default_rng(4).normal(size=(2, 2, 2))
    grads = gradients(backend_name, fn, {"x": x}, weights)
    expected = weights[0] * np.cos(x) * SCALE + np.clip(weights[1], -CLIP, CLIP) * x[::-1]
    np.testing.assert_allclose(grads["x"], expected, rtol=FLOAT64_RTOL, atol=FLOAT64_RTOL)


# --- gradients by central differences and across backends ----------------------------------------------------------
GRADIENT_INPUTS = {n: INPUTS[n] for n in ("t", "m", "mats", "vecs")}


def test_vectorize_gradients_match_central_differences(backend_name):
    check_gradients(backend_name, _vectorized, _vectorized_reference, GRADIENT_INPUTS)


@needs_all_backends
@pytest.mark.parametrize("group", ["vectorize", "custom_gradient"])
def test_gradients_agree_across_backends(group):
    fn, inputs = {"vectorize": (_vectorized, GRADIENT_INPUTS), "custom_gradient": (_custom_outputs,
                                                                                  CUSTOM_INPUTS)}[group]
    reference = {"vectorize": _vectorized_reference, "custom_gradient": _custom_reference}[group]
    weights = np.random.default_rng(3).normal(size=reference(**inputs).shape)
    tf_grads = gradients("tensorflow", fn, inputs, weights)
    theano_grads = gradients(THEANO, fn, inputs, weights)
    for name in tf_grads:
        np.testing.assert_allclose(tf_grads[name], theano_grads[name], rtol=0, atol=FLOAT64_ATOL, err_msg=name)


# --- refusals -------------------------------------------------------------------------------------------------------
REFUSALS = [
    (lambda o, m: o.vectorize(3.0), ArgumentError, "callable pyfunc"),
    (lambda o, m: o.vectorize(o.sum, signature="(n)->"), ArgumentError, "signature='(n)->'"),
    (lambda o, m: o.vectorize(o.sum, excluded={-1}), ArgumentError, "excluded={-1}"),
    (lambda o, m: o.vectorize(lambda x, axis=0: x)(m, axis=1), ArgumentError, "['axis'] would not be mapped"),
    (lambda o, m: o.vectorize(o.matmul, signature="(m,n),(n)->(m)")(m), ArgumentError, "takes 2 mapped"),
    (lambda o, m: o.vectorize(o.matmul, signature="(m,n),(n)->(m)")(m, m[0, :2]), ShapeError,
     "core dimension 'n' is 3"),
    (lambda o, m: o.vectorize(o.add)(m, m[:, :2]), ShapeError, "do not broadcast"),
    (lambda o, m: o.vectorize(o.sum, signature="(n)->(n)")(m), ShapeError, "does not match its core"),
    (lambda o, m: o.vectorize(o.sum, signature="(n)->(),()")(m), ShapeError, "not a tuple"),
    (lambda o, m: o.custom_gradient(None), ArgumentError, "callable f"),
    (lambda o, m: o.custom_gradient(lambda x: o.sin(x))(m), ArgumentError, "must return (output, grad_fn)"),
    (lambda o, m: o.custom_gradient(lambda x, s=None: (x, lambda g: g))(m, s=m), ArgumentError, "hold arrays"),
]


@pytest.mark.parametrize("case", range(len(REFUSALS)), ids=lambda i: re.sub(r"\W+", "_", REFUSALS[i][2])[:40])
def test_refusals_are_typed_and_name_the_argument(backend, case):
    fn, error, words = REFUSALS[case]
    with pytest.raises(error, match=re.escape(words)):
        run(backend, lambda ops, m: fn(ops, m), {"m": INPUTS["m"]}, "float32")


@pytest.mark.parametrize("grad_fn, words", [(lambda g: (g, g), "returned 2 gradient(s) for 1"),
                                            (lambda g: g[:2], "of shape (2, 3) for an argument of shape (4, 3)")])
def test_a_wrong_custom_gradient_is_refused_when_differentiated(backend_name, grad_fn, words):
    def fn(ops, m):
        return ops.custom_gradient(lambda x: (x * 2.0, grad_fn))(m)

    with pytest.raises((ShapeError, ComputeError), match=re.escape(words)) as raised:
        gradients(backend_name, fn, {"m": INPUTS["m"]}, np.ones((4, 3)))
    assert isinstance(raised.value if isinstance(raised.value, ShapeError) else raised.value.__cause__, ShapeError)


# --- Keras ----------------------------------------------------------------------------------------------------------
#: Keras 3.15.1's vectorize on TensorFlow refuses any loop axis (its vmap takes ``in_axes`` 0 only, and gets a tuple)
#: and ignores ``excluded``: its own test's calls, on one matrix, are the cases it computes.
KERAS_SAMPLE = ["trace_matrix", "diag_matrix"]


@pytest.mark.skipif(importlib.util.find_spec("keras") is None, reason="keras is not installed "
                    '(pip install "multigpu-toolkit[tensorflow]")')
@pytest.mark.parametrize("name", KERAS_SAMPLE)
def test_numpy_references_are_keras_ops(name):
    """The NumPy references above are what ``keras.ops`` computes (Keras' TensorFlow backend, float64)."""
    toolkit.get_backend("tensorflow")  # TensorFlow starts with the logical devices, not on Keras' first op
    import keras

    fn, reference = CASES[name]
    found = fn(keras.ops, {n: keras.ops.convert_to_tensor(v) for n, v in INPUTS.items()})
    expected = reference(INPUTS)
    for result, wanted in zip(*((v if isinstance(v, tuple) else (v,)) for v in (found, expected))):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(result), wanted, rtol=1e-10, atol=1e-10, err_msg=name)


@pytest.mark.skipif(importlib.util.find_spec("keras") is None, reason="keras is not installed "
                    '(pip install "multigpu-toolkit[tensorflow]")')
def test_custom_gradients_are_keras_custom_gradients():
    """The same functions under ``keras.ops.custom_gradient`` (Keras' TensorFlow backend, a gradient tape) give the
    gradient :func:`_custom_gradients` expects of the toolkit's."""
    toolkit.get_backend("tensorflow")
    import keras
    import tensorflow as tf

    x, y = (tf.constant(CUSTOM_INPUTS[n]) for n in ("x", "y"))
    weights = np.random.default_rng(2).normal(size=(5, 4))
    weights[2] = 0.0  # Keras on TensorFlow calls grad_fn(upstream): the PyTorch form (product) is left out
    scaled_sin, log1pexp, _, pair = _custom(keras.ops)
    with tf.GradientTape() as tape:
        tape.watch(x)
        parts = [scaled_sin(x), log1pexp(x * 50.0), x * 0.0, *pair(x)]
        total = tf.reduce_sum(tf.stack(parts) * weights)
    expected = _custom_gradients(**CUSTOM_INPUTS, weights=weights.ravel())
    np.testing.assert_allclose(tape.gradient(total, x).numpy(), expected["x"], rtol=1e-12, atol=1e-12)
