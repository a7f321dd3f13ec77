"""Parity: TensorFlow and Aesara give the same results from the same initial parameters and data."""

from __future__ import annotations

import numpy as np
import pytest

import toolkit
from tests.conftest import THEANO, needs_all_backends
from tests.helpers import SMALL_MLP, batch, max_abs, max_abs_diff
from toolkit.datasets import digits
from toolkit.nn.models import accuracy, mlp
from toolkit.tolerances import FLOAT32_GRAD_RTOL, FLOAT32_RTOL, FLOAT64_ATOL, adaptive_float32_atol

pytestmark = [pytest.mark.parity, needs_all_backends]

BACKENDS = ("tensorflow", THEANO)
STEPS = 10
LR = 0.01
#: float32 Adam/RMSprop runs use this eps so that the bound of ``adaptive_float32_atol`` is tight enough to test
#: (see its docstring); float64 runs use the optimizers' default eps.
FLOAT32_TEST_EPS = 1e-3

OPTIMIZERS = {
    "sgd": lambda eps: toolkit.optim.SGD(0.1),
    "momentum": lambda eps: toolkit.optim.SGD(0.1, momentum=0.9),
    "adam": lambda eps: toolkit.optim.Adam(LR) if eps is None else toolkit.optim.Adam(LR, eps=eps),
    "rmsprop": lambda eps: toolkit.optim.RMSprop(LR) if eps is None else toolkit.optim.RMSprop(LR, eps=eps),
}

DIGITS_MLP = mlp([64, 32, 10], name="digits-mlp")


def train_both(model, n_devices, optimizer, dtype, x, y, steps=STEPS):
    trainers = {name: toolkit.DataParallel(model, name, n_devices, optimizer, dtype=dtype) for name in BACKENDS}
    losses = {name: [t.step(x, y) for _ in range(steps)] for name, t in trainers.items()}
    return trainers, losses


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("optimizer_name", list(OPTIMIZERS))
def test_backends_agree_after_ten_steps(optimizer_name, dtype, n_devices):
    x_train, y_train, _, _ = digits()
    x, y = x_train[:64], y_train[:64]
    adaptive = optimizer_name in ("adam", "rmsprop")
    optimizer = OPTIMIZERS[optimizer_name](FLOAT32_TEST_EPS if adaptive and dtype == "float32" else None)
    gradient = toolkit.DataParallel(DIGITS_MLP, THEANO, n_devices, optimizer, dtype=dtype).gradients(x, y)
    trainers, losses = train_both(DIGITS_MLP, n_devices, optimizer, dtype, x, y)
    tf_params, aesara_params = (trainers[name].params() for name in BACKENDS)
    difference, scale = max_abs_diff(tf_params, aesara_params), max_abs(aesara_params)
    if dtype == "float64":
        bound = FLOAT64_ATOL
    elif adaptive:
        bound = adaptive_float32_atol(LR, FLOAT32_TEST_EPS, STEPS, max_abs(gradient), scale)
    else:
        bound = FLOAT32_RTOL * scale
    assert difference <= bound, f"{optimizer_name} {dtype} on {n_devices} devices: {difference:.3g} > {bound:.3g}"
    assert losses["tensorflow"][-1] < losses["tensorflow"][0]
    np.testing.assert_allclose(losses["tensorflow"], losses[THEANO], rtol=FLOAT32_RTOL if dtype == "float32" else 0,
                               atol=FLOAT64_ATOL if dtype == "float64" else 0)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("size, weights", [(7, None), (2, None), (9, [3, 1, 1, 1])])
def test_gradients_agree_for_any_split(dtype, size, weights):
    x, y = batch(size, seed=5)
    grads = {name: toolkit.DataParallel(SMALL_MLP, name, 4, toolkit.optim.SGD(0.1), dtype=dtype,
                                        weights=weights).gradients(x, y) for name in BACKENDS}
    full = toolkit.DataParallel(SMALL_MLP, "tensorflow", 1, toolkit.optim.SGD(0.1), dtype=dtype).gradients(x, y)
    bound = FLOAT64_ATOL if dtype == "float64" else FLOAT32_GRAD_RTOL * max_abs(full)
    assert max_abs_diff(grads["tensorflow"], grads[THEANO]) <= bound
    assert max_abs_diff(grads[THEANO], full) <= bound


def test_digits_training_on_two_devices_agrees_and_learns():
    x_train, y_train, x_test, y_test = digits(seed=0)
    trainers = {name: toolkit.DataParallel(DIGITS_MLP, name, 2, toolkit.optim.Adam(0.01), dtype="float64")
                for name in BACKENDS}
    rng = np.random.default_rng(0)
    for _ in range(3):  # epochs
        order = rng.permutation(len(x_train))
        for start in range(0, len(order), 128):
            index = order[start:start + 128]
            losses = {name: t.step(x_train[index], y_train[index]) for name, t in trainers.items()}
            assert abs(losses["tensorflow"] - losses[THEANO]) <= FLOAT64_ATOL
    params = {name: t.params() for name, t in trainers.items()}
    assert max_abs_diff(params["tensorflow"], params[THEANO]) <= FLOAT64_ATOL
    logits = toolkit.get_backend("tensorflow").make_parallel(
        lambda ops, x: DIGITS_MLP.forward(ops, params["tensorflow"], x), 2, x=x_test)
    assert accuracy(toolkit.get_backend("tensorflow").to_numpy(logits), y_test) > 0.9
