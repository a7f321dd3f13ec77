"""Learning-rate schedules: their values against NumPy on every backend and against Keras' schedules; training with
one equals the same steps with the rates given by hand; optimizer hyperparameters refuse changes that the
compiled steps would ignore."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

import toolkit
from toolkit.tolerances import FLOAT64_ATOL

schedules = toolkit.optim.schedules

STEPS = np.arange(0, 40, dtype=np.float64)


def _cosine(step, initial, decay_steps, alpha=0.0, warmup_target=None, warmup_steps=0):
    if warmup_target is None:
        t = np.minimum(step, decay_steps)
        return initial * ((1 - alpha) * 0.5 * (1 + np.cos(np.pi * t / decay_steps)) + alpha)
    t = np.minimum(step, warmup_steps + decay_steps)
    warm = initial + (warmup_target - initial) * t / warmup_steps
    return np.where(t < warmup_steps, warm, _cosine(t - warmup_steps, warmup_target, decay_steps, alpha))


def _piecewise(step, boundaries, values):
    return np.asarray(values)[np.searchsorted(boundaries, step, side="left")]


# name -> (schedule, NumPy reference, Keras' schedule class name and arguments)
CASES = {
    "exponential": (schedules.ExponentialDecay(0.1, 7, 0.5), lambda s: 0.1 * 0.5 ** (s / 7),
                    ("ExponentialDecay", (0.1, 7, 0.5), {})),
    "exponential_staircase": (schedules.ExponentialDecay(0.1, 7, 0.5, staircase=True),
                              lambda s: 0.1 * 0.5 ** np.floor(s / 7),
                              ("ExponentialDecay", (0.1, 7, 0.5), {"staircase": True})),
    "piecewise": (schedules.PiecewiseConstantDecay([5, 12, 30], [1.0, 0.5, 0.25, 0.125]),
                  lambda s: _piecewise(s, [5, 12, 30], [1.0, 0.5, 0.25, 0.125]),
                  ("PiecewiseConstantDecay", ([5, 12, 30], [1.0, 0.5, 0.25, 0.125]), {})),
    "cosine": (schedules.CosineDecay(0.2, 25, alpha=0.1), lambda s: _cosine(s, 0.2, 25, alpha=0.1),
               ("CosineDecay", (0.2, 25), {"alpha": 0.1})),
    "cosine_warmup": (schedules.CosineDecay(0.0, 20, warmup_target=0.5, warmup_steps=8),
                      lambda s: _cosine(s, 0.0, 20, warmup_target=0.5, warmup_steps=8),
                      ("CosineDecay", (0.0, 20), {"warmup_target": 0.5, "warmup_steps": 8})),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(CASES))
def test_schedule_values_equal_numpy(backend, name, dtype):
    schedule, reference, _ = CASES[name]
    device = backend.list_devices()[0]
    rates = backend.call(lambda ops, steps: ops.stack([schedule(ops, steps[i]) for i in range(len(STEPS))]),
                         device, {"steps": STEPS.astype(dtype)}, dtype)
    rates = backend.to_numpy(rates)
    assert rates.dtype == np.dtype(dtype)
    tolerance = 1e-6 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(rates, reference(STEPS), rtol=tolerance, atol=tolerance)


@pytest.mark.skipif(importlib.util.find_spec("keras") is None,
                    reason='needs keras (pip install "multigpu-toolkit[tensorflow]")')
@pytest.mark.parametrize("name", list(CASES))
def test_numpy_references_equal_keras(name):
    toolkit.get_backend("tensorflow")  # its logical devices, before Keras starts TensorFlow
    import keras

    _, reference, (cls, args, kwargs) = CASES[name]
    keras_schedule = getattr(keras.optimizers.schedules, cls)(*args, **kwargs)
    keras_rates = [float(keras_schedule(int(s))) for s in STEPS]
    np.testing.assert_allclose(keras_rates, reference(STEPS), rtol=1e-6, atol=1e-7)  # Keras computes in float32


def test_training_with_a_schedule_equals_the_rates_given_by_hand(backend, n_devices):
    """The schedule's rate at update t (t updates done before) is the rate SGD uses: the same run with a fresh
    optimizer per step at that rate, its parameters carried over, gives the same parameters."""
    schedule = schedules.PiecewiseConstantDecay([1, 2], [0.5, 0.1, 0.02])
    model = toolkit.Model(lambda rng: {"w": rng.normal(size=(3, 2))}, lambda ops, p, x: ops.matmul(x, p["w"]),
                          lambda ops, out, y: ops.mean(ops.square(out - y), axis=1))
    x, y = np.random.default_rng(0).normal(size=(8, 3)), np.random.default_rng(1).normal(size=(8, 2))
    scheduled = toolkit.DataParallel(model, backend, n_devices, toolkit.optim.SGD(schedule), dtype="float64", seed=3)
    params = scheduled.params()
    for step in range(4):
        scheduled.step(x, y)
        by_hand = toolkit.DataParallel(model, backend, 1, toolkit.optim.SGD(_piecewise(step, [1, 2], [0.5, 0.1, 0.02])),
                                       dtype="float64")
        by_hand.set_params(params)
        by_hand.step(x, y)
        params = by_hand.params()
        np.testing.assert_allclose(scheduled.params()["w"], params["w"], rtol=0, atol=FLOAT64_ATOL)


def test_a_restored_checkpoint_resumes_the_schedule(backend, tmp_path):
    adam = toolkit.optim.Adam(schedules.CosineDecay(0.0, 6, warmup_target=0.05, warmup_steps=2))
    model = toolkit.Model(lambda rng: {"w": rng.normal(size=(3, 2))}, lambda ops, p, x: ops.matmul(x, p["w"]),
                          lambda ops, out, y: ops.mean(ops.square(out - y), axis=1))
    x, y = np.random.default_rng(0).normal(size=(8, 3)), np.random.default_rng(1).normal(size=(8, 2))
    straight = toolkit.DataParallel(model, backend, 2, adam, dtype="float64", seed=3)
    for step in range(5):
        straight.step(x, y)
        if step == 2:
            straight.save(tmp_path / "at3.npz")
    config = toolkit.load_checkpoint(tmp_path / "at3.npz").metadata["optimizer_config"]
    assert config["lr"] == {"schedule": "CosineDecay", **vars(adam.lr)}
    resumed = toolkit.DataParallel(model, backend, 2, adam, dtype="float64", seed=9)
    resumed.restore(tmp_path / "at3.npz")
    resumed.step(x, y)
    resumed.step(x, y)
    np.testing.assert_allclose(resumed.params()["w"], straight.params()["w"], rtol=0, atol=FLOAT64_ATOL)


@pytest.mark.parametrize("optimizer", [toolkit.optim.SGD(0.1, momentum=0.9), toolkit.optim.Adam(1e-3),
                                       toolkit.optim.RMSprop(1e-3)], ids=lambda o: type(o).__name__)
def test_a_changed_hyperparameter_raises_rather_than_being_ignored(backend, optimizer):
    trainer = toolkit.DataParallel(toolkit.Model(lambda rng: {"w": np.ones((3, 2))},
                                                 lambda ops, p, x: ops.matmul(x, p["w"]),
                                                 lambda ops, out, y: ops.mean(ops.square(out - y), axis=1)),
                                   backend, 1, optimizer, dtype="float64")
    trainer.step(np.ones((4, 3)), np.zeros((4, 2)))
    before = repr(optimizer)
    with pytest.raises(toolkit.OptimizerError, match=r"lr cannot change once the optimizer is built .* schedule"):
        trainer.optimizer.lr = 0.0
    assert repr(optimizer) == before


@pytest.mark.parametrize("make, message", [
    (lambda: schedules.ExponentialDecay(0.1, 0, 0.5), "decay_steps must be a finite number > 0"),
    (lambda: schedules.PiecewiseConstantDecay([3, 2], [1.0, 0.5, 0.1]), "boundaries must increase"),
    (lambda: schedules.PiecewiseConstantDecay([3], [1.0]), "one more value than boundaries"),
    (lambda: schedules.CosineDecay(0.1, 10, warmup_target=0.5), "warmup_target needs warmup_steps > 0"),
    (lambda: schedules.CosineDecay(math.nan, 10), "initial_learning_rate must be a finite number"),
    (lambda: toolkit.optim.Adam("fast"), "Adam lr must be a finite number"),
])
def test_bad_schedules_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_parity_bounds_use_a_schedule_peak():
    assert schedules.CosineDecay(0.0, 20, warmup_target=0.5, warmup_steps=8).peak() == 0.5
    assert schedules.PiecewiseConstantDecay([5], [0.1, 0.3]).peak() == 0.3
    with pytest.raises(ValueError, match="grows without bound"):
        schedules.ExponentialDecay(0.1, 5, 2.0).peak()
