"""Convolution, pooling and LSTM on every backend against NumPy references, and their gradients across backends."""

from __future__ import annotations

import numpy as np
import pytest

import toolkit
from tests.conftest import THEANO, needs_all_backends
from tests.helpers import max_abs_diff
from toolkit import layers
from toolkit.nn.models import sparse_softmax_cross_entropy
from toolkit.ops.window_shapes import same_padding
from toolkit.tolerances import FLOAT64_ATOL

RNG = np.random.default_rng(3)


def conv2d_numpy(x, kernel, padding):
    kh, kw = kernel.shape[:2]
    if padding == "same":
        (t, b), (left, r) = same_padding(x.shape[1], kh), same_padding(x.shape[2], kw)
        x = np.pad(x, ((0, 0), (t, b), (left, r), (0, 0)))
    out_h, out_w = x.shape[1] - kh + 1, x.shape[2] - kw + 1
    out = np.zeros((x.shape[0], out_h, out_w, kernel.shape[3]))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nhwc,cf->nhwf", x[:, i:i + out_h, j:j + out_w, :], kernel[i, j])
    return out


def max_pool_numpy(x, size):
    n, h, w, c = x.shape
    rows, cols = h // size, w // size
    return x[:, :rows * size, :cols * size].reshape(n, rows, size, cols, size, c).max(axis=(2, 4))


def lstm_numpy(params, x, units):
    sigmoid = lambda v: 1 / (1 + np.exp(-v))
    h = c = np.zeros((x.shape[0], units))
    for t in range(x.shape[1]):
        z = x[:, t] @ params["lstm/kernel"] + h @ params["lstm/recurrent"] + params["lstm/bias"]
        i, f = sigmoid(z[:, :units]), sigmoid(z[:, units:2 * units])
        g, o = np.tanh(z[:, 2 * units:3 * units]), sigmoid(z[:, 3 * units:])
        c = f * c + i * g
        h = o * np.tanh(c)
    return h


def run(backend, fn, dtype="float64", **inputs):
    device = backend.list_devices()[-1]
    out = backend.call(fn, device, {k: backend.place(v, device) for k, v in inputs.items()}, dtype)
    assert backend.device_of(out) == device
    return backend.to_numpy(out)


@pytest.mark.parametrize("padding", ["valid", "same"])
@pytest.mark.parametrize("kernel_size", [1, 2, 3])
def test_conv2d(backend, padding, kernel_size):
    x, kernel = RNG.normal(size=(2, 7, 6, 3)), RNG.normal(size=(kernel_size, kernel_size, 3, 4))
    result = run(backend, lambda ops, x, k: ops.conv2d(x, k, padding=padding), x=x, k=kernel)
    np.testing.assert_allclose(result, conv2d_numpy(x, kernel, padding), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("size", [1, 2, 3])
def test_pooling(backend, size):
    x = RNG.normal(size=(2, 7, 6, 3))
    np.testing.assert_array_equal(run(backend, lambda ops, x: ops.max_pool2d(x, size), x=x), max_pool_numpy(x, size))
    np.testing.assert_array_equal(run(backend, lambda ops, x: layers.global_max_pool2d(ops, x), x=x), x.max((1, 2)))


def test_lstm(backend):
    params = layers.lstm_init(RNG, 3, 5)
    x = RNG.normal(size=(4, 6, 3))
    result = run(backend, lambda ops, x, kernel, recurrent, bias: layers.lstm(
        ops, {"lstm/kernel": kernel, "lstm/recurrent": recurrent, "lstm/bias": bias}, x, steps=6, units=5),
        x=x, kernel=params["lstm/kernel"], recurrent=params["lstm/recurrent"], bias=params["lstm/bias"])
    np.testing.assert_allclose(result, lstm_numpy(params, x, 5), rtol=1e-12, atol=1e-12)


def test_layer_errors(backend):
    x, kernel = np.zeros((1, 4, 4, 1)), np.zeros((2, 2, 1, 1))
    with pytest.raises(ValueError, match="padding must be one of"):
        run(backend, lambda ops, x, k: ops.conv2d(x, k, padding="full"), x=x, k=kernel)
    with pytest.raises(ValueError, match="pool size must be an int >= 1"):
        run(backend, lambda ops, x: ops.max_pool2d(x, 0), x=x)


def conv_model():
    def init(rng):
        return {**layers.conv2d_init(rng, 1, 4, 3, prefix="conv"), **layers.conv2d_init(rng, 4, 3, 2, prefix="same"),
                **layers.dense_init(rng, 3, 3)}

    def forward(ops, params, x):
        h = layers.conv2d(ops, params, x, prefix="conv", activation="relu")
        h = ops.max_pool2d(layers.conv2d(ops, params, h, prefix="same", padding="same", activation="tanh"), 2)
        return layers.dense(ops, params, layers.global_max_pool2d(ops, h))

    return toolkit.Model(init, forward, sparse_softmax_cross_entropy(3), name="conv-test")


def lstm_model():
    def init(rng):
        return {**layers.lstm_init(rng, 2, 4), **layers.dense_init(rng, 4, 3)}

    def forward(ops, params, x):
        return layers.dense(ops, params, layers.lstm(ops, params, x, steps=5, units=4))

    return toolkit.Model(init, forward, sparse_softmax_cross_entropy(3), name="lstm-test")


@pytest.mark.parity
@needs_all_backends
@pytest.mark.parametrize("make_model, x_shape", [(conv_model, (6, 8, 8, 1)), (lstm_model, (6, 5, 2))])
def test_layer_gradients_agree_across_backends_after_five_sgd_steps(make_model, x_shape, n_devices):
    model, rng = make_model(), np.random.default_rng(8)
    x, y = rng.normal(size=x_shape), rng.integers(0, 3, x_shape[0])
    trainers = {name: toolkit.DataParallel(model, name, n_devices, toolkit.optim.SGD(0.2), dtype="float64")
                for name in ("tensorflow", THEANO)}
    grads = {name: t.gradients(x, y) for name, t in trainers.items()}
    assert max_abs_diff(grads["tensorflow"], grads[THEANO]) <= FLOAT64_ATOL
    for _ in range(5):
        losses = [t.step(x, y) for t in trainers.values()]
        assert abs(losses[0] - losses[1]) <= FLOAT64_ATOL
    assert max_abs_diff(trainers["tensorflow"].params(), trainers[THEANO].params()) <= FLOAT64_ATOL
