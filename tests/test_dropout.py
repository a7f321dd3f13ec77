"""Per-example randomness (dropout): the random numbers, the masks at the rate, the same masks for any device count
and split, and replayed after a restore (model state and batch normalization: tests/test_model_state.py)."""

from __future__ import annotations

import numpy as np
import pytest

import toolkit
from tests.conftest import THEANO, needs_backend
from tests.helpers import max_abs_diff
from tests.model_state_cases import DROPOUT, X, Y, _dropout_forward, _dropout_init, _train
from toolkit import layers
from toolkit.nn import context
from toolkit.tolerances import FLOAT64_ATOL

# --- the random numbers ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_example_uniform_equals_the_numpy_reference(backend, dtype):
    keys = context.example_keys(seed=3, step=2, rows=np.arange(5))
    device = backend.list_devices()[0]

    def draw(ops, keys):
        with context.running(context.RunContext(training=True, keys=ops.unwrap(keys))):
            return ops.example_uniform((5, 3, 4)), ops.example_uniform((5, 7))

    first, second = (backend.to_numpy(a) for a in backend.call(draw, device, {"keys": keys}, dtype))
    assert first.dtype == dtype and second.dtype == dtype
    np.testing.assert_array_equal(first, context.uniform_reference(keys, 0, (5, 3, 4)).astype(dtype))
    np.testing.assert_array_equal(second, context.uniform_reference(keys, 1, (5, 7)).astype(dtype))


def test_uniform_numbers_look_uniform_and_keys_differ():
    keys = context.example_keys(seed=0, step=1, rows=np.arange(2000))
    u = context.uniform_reference(keys, 0, (2000, 50))
    assert 0.0 <= u.min() and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002
    assert abs(np.corrcoef(u[:, 0], u[:, 1])[0, 1]) < 0.1 and abs(np.corrcoef(u[:-1, 0], u[1:, 0])[0, 1]) < 0.1
    assert len(set(keys.tolist())) == len(keys)  # an invertible hash of distinct rows
    assert not np.array_equal(context.example_keys(0, 2, np.arange(10)), keys[:10])  # the step changes them
    assert not np.array_equal(context.example_keys(1, 1, np.arange(10)), keys[:10])  # so does the seed


def test_a_steps_keys_are_the_example_keys_of_its_rows():
    """The trainer's keys (consecutive rows, their hashes kept between steps) equal example_keys, and a caller that
    writes into its keys does not change the next step's."""
    for seed, step, first, count in [(0, 1, 0, 256), (2**40 + 5, 2**33 + 7, 1000, 3), (7, 3, 5, 1), (1, 1, 0, 0)]:
        keys = context.consecutive_example_keys(seed, step, first, count)
        assert keys.dtype == np.uint32
        np.testing.assert_array_equal(keys, context.example_keys(seed, step, np.arange(first, first + count)))
    keys = context.consecutive_example_keys(0, 1, 0, 8)
    keys[:] = 0
    np.testing.assert_array_equal(context.consecutive_example_keys(0, 1, 0, 8),
                                  context.example_keys(0, 1, np.arange(8)))


# --- dropout ---------------------------------------------------------------------------------------------------------

def test_dropout_zeroes_at_the_rate_and_scales_the_rest(backend):
    x = np.ones((400, 50))
    keys = context.example_keys(1, 1, np.arange(400))

    def run(ops, x, keys, training):
        with context.running(context.RunContext(training=training, keys=ops.unwrap(keys) if training else None)):
            return layers.dropout(ops, x, 0.3), layers.dropout(ops, x, 0.3, noise_shape=(None, 1))

    device = backend.list_devices()[0]
    out, shared = (backend.to_numpy(a) for a in backend.call(lambda o, x, k: run(o, x, k, True), device,
                                                              {"x": x, "k": keys}, "float64"))
    assert set(np.unique(out)) <= {0.0, 1 / 0.7}
    assert abs((out == 0).mean() - 0.3) < 0.01
    assert all(len(np.unique(row)) == 1 for row in shared)  # one draw per example along the shared axis
    inference = backend.call(lambda o, x, k: run(o, x, k, False), device, {"x": x, "k": keys}, "float64")
    for a in inference:
        np.testing.assert_array_equal(backend.to_numpy(a), x)


@pytest.mark.parametrize("rate, noise_shape, message", [
    (1.0, None, r"rate must be in \[0, 1\)"), (-0.1, None, r"rate must be in \[0, 1\)"),
    (0.5, (None, 3), "does not broadcast"), (0.5, (None,), "does not broadcast"),
])
def test_dropout_refuses_bad_arguments(backend, rate, noise_shape, message):
    def run(ops, x, keys):
        with context.running(context.RunContext(training=True, keys=ops.unwrap(keys))):
            return layers.dropout(ops, x, rate, noise_shape=noise_shape)

    with pytest.raises(ValueError, match=message):
        backend.call(run, backend.list_devices()[0], {"x": np.ones((4, 5)),
                                                      "keys": context.example_keys(0, 1, np.arange(4))}, "float64")


def test_random_numbers_outside_a_training_step_are_a_typed_error(backend):
    def run(ops, x):
        with context.running(context.RunContext(training=True)):
            return ops.example_uniform((4, 5))

    with pytest.raises(toolkit.ModelStateError, match="need a training step of DataParallel"):
        backend.call(run, backend.list_devices()[0], {"x": np.ones((4, 5))}, "float64")


def test_dropout_masks_follow_the_example_not_the_device(backend, n_devices):
    """N devices equal 1 device (float64) with dropout on, on the fused and the composed step, and for an
    uneven split."""
    _, reference = _train(DROPOUT, backend, 1)
    reference_params = _train(DROPOUT, backend, 1)[0].params()
    for fused in (True, False):
        trainer, losses = _train(DROPOUT, backend, n_devices, fused=fused)
        np.testing.assert_allclose(losses, reference, rtol=0, atol=FLOAT64_ATOL)
        assert max_abs_diff(trainer.params(), reference_params) <= FLOAT64_ATOL
    trainer, losses = _train(DROPOUT, backend, n_devices, weights=[1, 3, 1, 2][:n_devices])
    np.testing.assert_allclose(losses, reference, rtol=0, atol=FLOAT64_ATOL)
    without = toolkit.DataParallel(toolkit.Model(_dropout_init, lambda o, p, x: _dropout_forward(o, p, x) * 1.0,
                                                 DROPOUT.loss), backend, 1, toolkit.optim.Adam(0.01),
                                   dtype="float64", seed=7)
    assert without.loss(X, Y) == pytest.approx(reference[0], abs=1e-12)  # same masks for the same seed and step


def test_the_step_and_the_seed_change_the_masks(backend):
    trainer = toolkit.DataParallel(DROPOUT, backend, 1, toolkit.optim.SGD(1e-300), dtype="float64", seed=7)
    first = trainer.step(X, Y)
    second = trainer.step(X, Y)  # lr 1e-300: the same parameters, the next step's masks
    other = toolkit.DataParallel(DROPOUT, backend, 1, toolkit.optim.SGD(1e-300), dtype="float64", seed=7)
    other.set_params(trainer.params())
    other.seed = 8
    assert first != second and other.loss(X, Y) != first


@pytest.mark.parametrize("other", ["tensorflow", THEANO])
def test_restoring_a_checkpoint_replays_the_masks(backend, other, tmp_path):
    needs = needs_backend(other)
    if needs.args[0]:
        pytest.skip(needs.kwargs["reason"])
    trainer, _ = _train(DROPOUT, backend, 2, steps=2)
    trainer.save(tmp_path / "c.npz")
    continued = [trainer.step(X, Y) for _ in range(2)]
    restored = toolkit.DataParallel(DROPOUT, other, 1, toolkit.optim.Adam(0.01), dtype="float64", seed=99)
    restored.restore(tmp_path / "c.npz")
    np.testing.assert_allclose([restored.step(X, Y) for _ in range(2)], continued, rtol=0, atol=FLOAT64_ATOL)
