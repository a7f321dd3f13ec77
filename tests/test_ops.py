"""Every neutral op, on every backend, against NumPy; and its gradient across backends."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import toolkit
from tests.conftest import THEANO, needs_all_backends
from tests.op_checks import failures
from toolkit.tolerances import FLOAT64_ATOL

RNG = np.random.default_rng(0)
A = RNG.normal(size=(4, 3))
B = RNG.normal(size=(3, 5))
POSITIVE = RNG.uniform(0.5, 2.0, size=(4, 3))
LABELS = np.array([0, 2, 1, 2], dtype=np.int32)


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# name -> (fn(ops, a, b, p, y), numpy reference(a, b, p, y)); a: (4, 3) normal, b: (3, 5), p: positive, y: labels.
CASES = {
    "matmul": (lambda o, a, b, p, y: o.matmul(a, b), lambda a, b, p, y: a @ b),
    "relu": (lambda o, a, b, p, y: o.relu(a), lambda a, b, p, y: np.maximum(a, 0)),
    "tanh": (lambda o, a, b, p, y: o.tanh(a), lambda a, b, p, y: np.tanh(a)),
    "sigmoid": (lambda o, a, b, p, y: o.sigmoid(a), lambda a, b, p, y: 1 / (1 + np.exp(-a))),
    "softmax": (lambda o, a, b, p, y: o.softmax(a), lambda a, b, p, y: _softmax(a)),
    "softmax_axis0": (lambda o, a, b, p, y: o.softmax(a, axis=0), lambda a, b, p, y: _softmax(a, axis=0)),
    "log_softmax": (lambda o, a, b, p, y: o.log_softmax(a), lambda a, b, p, y: np.log(_softmax(a))),
    "exp": (lambda o, a, b, p, y: o.exp(a), lambda a, b, p, y: np.exp(a)),
    "log": (lambda o, a, b, p, y: o.log(p), lambda a, b, p, y: np.log(p)),
    "sqrt": (lambda o, a, b, p, y: o.sqrt(p), lambda a, b, p, y: np.sqrt(p)),
    "square": (lambda o, a, b, p, y: o.square(a), lambda a, b, p, y: a * a),
    "sum": (lambda o, a, b, p, y: o.sum(a), lambda a, b, p, y: a.sum()),
    "sum_axis_keepdims": (lambda o, a, b, p, y: o.sum(a, axis=1, keepdims=True),
                          lambda a, b, p, y: a.sum(axis=1, keepdims=True)),
    "mean": (lambda o, a, b, p, y: o.mean(a, axis=0), lambda a, b, p, y: a.mean(axis=0)),
    "max": (lambda o, a, b, p, y: o.max(a, axis=1), lambda a, b, p, y: a.max(axis=1)),
    "max_all_keepdims": (lambda o, a, b, p, y: o.max(a, keepdims=True), lambda a, b, p, y: a.max(keepdims=True)),
    "zeros_like": (lambda o, a, b, p, y: o.zeros_like(a) + p, lambda a, b, p, y: p),
    "indexing": (lambda o, a, b, p, y: a[:, 1:] * p[1, 0], lambda a, b, p, y: a[:, 1:] * p[1, 0]),
    "reshape": (lambda o, a, b, p, y: o.reshape(a, (2, -1)), lambda a, b, p, y: a.reshape(2, -1)),
    "concat": (lambda o, a, b, p, y: o.concat([a, p], axis=1), lambda a, b, p, y: np.concatenate([a, p], axis=1)),
    "stack": (lambda o, a, b, p, y: o.stack([a, p], axis=0), lambda a, b, p, y: np.stack([a, p])),
    "squeeze": (lambda o, a, b, p, y: o.squeeze(o.reshape(a, (4, 1, 3)), axis=1), lambda a, b, p, y: a),
    "ones_like": (lambda o, a, b, p, y: o.ones_like(a), lambda a, b, p, y: np.ones_like(a)),
    "one_hot": (lambda o, a, b, p, y: o.one_hot(y, 3), lambda a, b, p, y: np.eye(3)[y]),
    "arithmetic": (lambda o, a, b, p, y: (a - p) * 2.0 / p + a ** 2 - -a,
                   lambda a, b, p, y: (a - p) * 2.0 / p + a ** 2 + a),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_ops_match_numpy_on_the_device_of_their_inputs(backend, dtype):
    """Every case in one compiled call (on the Theano family each distinct graph compiles for seconds), on a device
    other than the first where there is one: values, dtype, and each output on its inputs' device."""
    device = backend.select_devices(["cpu:1"])[0] if len(backend.list_devices()) > 1 else backend.list_devices()[0]
    inputs = {"a": A.astype(dtype), "b": B.astype(dtype), "p": POSITIVE.astype(dtype), "y": LABELS}
    placed = {k: backend.place(v, device) for k, v in inputs.items()}
    outs = backend.call(lambda ops, a, b, p, y: [fn(ops, a, b, p, y) for fn, _ in CASES.values()], device, placed,
                        dtype)
    tolerance = {"rtol": 1e-5, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-12}

    def check(name, out):
        result = backend.to_numpy(out)
        assert result.dtype == np.dtype(dtype), f"{name} returned {result.dtype}"
        assert backend.device_of(out) == device
        np.testing.assert_allclose(result, CASES[name][1](A, B, POSITIVE, LABELS), **tolerance)

    failed = failures({name: functools.partial(check, name, out) for name, out in zip(CASES, outs)})
    assert not failed, failed


DIFFERENTIABLE = [n for n in CASES if n not in ("ones_like", "one_hot")]


def _gradients(backend_name: str) -> dict[str, dict[str, np.ndarray]]:
    """Each differentiable case's float64 gradients for a, b and p, all cases through one trainer: each case reads
    its own copy of the inputs, so a copy's gradient is that case's alone. Each of 2 examples scores every case's
    output with its own random weights, so every element has a gradient."""
    weights = {name: np.random.default_rng(3).normal(size=np.shape(CASES[name][1](A, B, POSITIVE, LABELS)))
               for name in DIFFERENTIABLE}

    def init(rng):
        return {f"{name}__{k}": v.copy() for name in DIFFERENTIABLE for k, v in (("a", A), ("b", B), ("p", POSITIVE))}

    def forward(ops, params, x):  # the differentiable cases use no labels
        outs = [CASES[name][0](ops, *(params[f"{name}__{k}"] for k in "abp"), None) for name in DIFFERENTIABLE]
        return ops.concatenate([ops.reshape(out, (-1,)) for out in outs], axis=0)

    def loss(ops, out, target):
        return ops.sum(ops.stack([out, out]) * target, axis=1)

    flat = np.concatenate([w.ravel() for w in weights.values()])
    trainer = toolkit.DataParallel(toolkit.Model(init, forward, loss), backend_name, 1, toolkit.optim.SGD(0.1),
                                   dtype="float64")
    grads = trainer.gradients(np.zeros((2, 1)), np.stack([flat, 2.0 * flat]))
    return {name: {k: grads[f"{name}__{k}"] for k in "abp"} for name in DIFFERENTIABLE}


@pytest.mark.parity
@needs_all_backends
def test_op_gradients_agree_across_backends():
    tf_grads, theano_grads = _gradients("tensorflow"), _gradients(THEANO)

    def check(name):
        for key in "abp":
            np.testing.assert_allclose(tf_grads[name][key], theano_grads[name][key], rtol=0, atol=FLOAT64_ATOL)

    failed = failures({name: functools.partial(check, name) for name in DIFFERENTIABLE})
    assert not failed, failed


def test_sums_of_allocated_arrays_count_every_element(backend):
    """Sums over made arrays larger than 127 elements: PyTensor 3.0 rewrites ``sum(ones(shape))`` into the product
    of the shape's sizes in their constants' dtype, which overflowed int8 (16 * 8 * 8 gave 0: batch normalization's
    statistics then divided by 1) until the backend made its static sizes int64."""
    x = np.random.default_rng(1).normal(size=(16, 8, 8, 3))

    def sums(ops, x):
        def total(made):  # over the leading axes, as ops.moments sums its weights
            return ops.reshape(ops.sum(made, axis=(0, 1, 2), keepdims=True), (-1,))

        ones = ops.ones_like(x)  # the weights of ops.moments: the sum of x * ones and of ones, then their ratio
        weighted = ops.stack([ops.sum(x * ones, axis=(0, 1, 2), keepdims=True), ops.sum(ones, axis=(0, 1, 2),
                                                                                         keepdims=True)])
        return ops.stack([total(ones), ops.reshape(weighted[1], (-1,)),
                          total(ops.broadcast_to(ops.ones_like(x[:1]), (16, 8, 8, 3))),
                          total(ops.pad(ops.zeros_like(x), [(0, 0), (1, 1), (1, 1), (0, 0)], constant_values=1.0))])

    out = backend.to_numpy(backend.call(sums, backend.list_devices()[0], {"x": x}, "float64"))
    np.testing.assert_array_equal(out, np.array([[16 * 8 * 8] * 3] * 3 + [[16 * (10 * 10 - 8 * 8)] * 3]))


def test_booleans_multiply_as_and_and_refuse_subtraction(backend):
    """NumPy's and Keras' rules for booleans on every backend: their product is the logical and (TensorFlow has no
    boolean multiply), their difference is refused with a typed error (it was a raw error on both)."""
    from tests.op_checks import run
    from toolkit.errors import DTypeError

    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    product = run(backend, lambda ops, a, b: ops.multiply(a, b), {"a": a, "b": b})
    assert product.dtype == np.bool_ and product.tolist() == [True, False, False, False]
    with pytest.raises(DTypeError, match="subtract of booleans"):
        run(backend, lambda ops, a, b: a - b, {"a": a, "b": b})
    difference = run(backend, lambda ops, a, b: ops.subtract(ops.cast(a, "int32"), b), {"a": a, "b": b})
    assert difference.tolist() == [0, 1, -1, 0]


def test_softplus_is_exact_in_its_tails_and_its_gradient_is_the_sigmoid(backend_name):
    """softplus(-40) is 4.2e-18, not 0, and its gradient is sigmoid(x) everywhere, 0.5 at 0 (its relu/abs form gave
    0 there), as in Keras and JAX."""
    from tests.op_checks import check_gradients, run

    x = np.array([-40.0, -3.0, 0.0, 2.5, 40.0])
    reference = np.logaddexp(0.0, x)
    np.testing.assert_allclose(run(toolkit.get_backend(backend_name), lambda ops, x: ops.softplus(x), {"x": x}),
                               reference, rtol=1e-15, atol=0)
    grads = check_gradients(backend_name, lambda ops, x: ops.softplus(x), lambda x: np.logaddexp(0.0, x), {"x": x})
    weights = np.random.default_rng(1).normal(size=x.shape)  # the weights check_gradients draws first
    np.testing.assert_allclose(grads["x"], weights / (1 + np.exp(-x)), rtol=1e-12, atol=1e-30)


def test_ones_and_zeros_like_take_keras_dtype(backend):
    from tests.op_checks import run

    x = np.array([[1.5, -2.0, 3.0]])
    out = run(backend, lambda ops, x: {"ones": ops.ones_like(x, dtype="int32"), "zeros": ops.zeros_like(x, "bool"),
                                       "same": ops.ones_like(x)}, {"x": x})
    assert out["ones"].dtype == np.int32 and out["ones"].tolist() == [[1, 1, 1]]
    assert out["zeros"].dtype == np.bool_ and not out["zeros"].any()
    assert out["same"].dtype == np.float64 and out["same"].shape == (1, 3)


def test_float_floor_division_is_numpys_divmod(backend):
    """Aesara and PyTensor rewrote a float ``x // 1.0`` into ``x`` (1.5 // 1.0 gave 1.5); ``floor(x1 / x2)`` rounds
    the quotient before the floor (``1.0 // 0.1`` gave 10, NumPy's divmod 9, as Python's)."""
    from tests.op_checks import run

    x = np.array([1.5, -1.5, 2.0, -0.25, 1.0, -1.0])
    out = run(backend, lambda ops, x: {"one": x // 1.0, "two": ops.floor_divide(x, 2.0), "mod": x % 1.0,
                                       "tenth": x // 0.1, "tenth_mod": x % 0.1}, {"x": x})
    np.testing.assert_array_equal(out["one"], np.floor_divide(x, 1.0))
    np.testing.assert_array_equal(out["two"], np.floor_divide(x, 2.0))
    np.testing.assert_array_equal(out["mod"], np.mod(x, 1.0))
    np.testing.assert_array_equal(out["tenth"], np.floor_divide(x, 0.1))
    np.testing.assert_array_equal(out["tenth_mod"], np.mod(x, 0.1))


def test_a_cast_to_a_dtype_the_engine_lacks_is_refused_by_name(backend_name):
    """float8 exists in TensorFlow (Keras' test_cast_float8 passes there); Aesara and PyTensor have no float8, and a
    cast to it raised a raw KeyError."""
    from tests.op_checks import run
    from toolkit.errors import DTypeError

    backend, x = toolkit.get_backend(backend_name), np.ones((2, 2))
    if backend_name == "tensorflow":
        out = run(backend, lambda ops, x: ops.cast(ops.cast(x, "float8_e4m3fn"), "float32"), {"x": x}, "float32")
        np.testing.assert_array_equal(out, x)
    else:
        with pytest.raises(DTypeError, match="float8_e4m3fn"):
            run(backend, lambda ops, x: ops.cast(x, "float8_e4m3fn"), {"x": x}, "float32")
