"""DataParallel on one backend: any split gives the full-batch result."""

from __future__ import annotations

import numpy as np
import pytest

import toolkit
from tests.helpers import (
    LINEAR,
    SMALL_MLP,
    batch,
    check_fused_step_follows_outside_writes,
    linear_gradient_numpy,
    max_abs_diff,
)
from toolkit.tolerances import FLOAT64_ATOL

# (batch size, devices, weights): even, uneven, smaller than the device count, weighted.
SPLITS = [(8, 2, None), (7, 3, None), (2, 4, None), (1, 4, None), (9, 4, [3, 1, 1, 1]), (10, 2, [1, 4]),
          (1, 2, [1, 3])]  # the last leaves the first device empty


@pytest.mark.parametrize("size, n, weights", SPLITS)
def test_gradients_of_any_split_equal_the_full_batch_gradient(backend, size, n, weights):
    x, y = batch(size)
    trainer = toolkit.DataParallel(LINEAR, backend, n, toolkit.optim.SGD(0.1), dtype="float64", weights=weights)
    expected = linear_gradient_numpy(trainer.params(), x, y)
    assert max_abs_diff(trainer.gradients(x, y), expected) <= FLOAT64_ATOL


@pytest.mark.parametrize("size, n, weights", SPLITS)
def test_training_on_n_devices_matches_one_device(backend, size, n, weights):
    x, y = batch(size, seed=1)
    optimizer = toolkit.optim.Adam(0.05)
    many = toolkit.DataParallel(SMALL_MLP, backend, n, optimizer, dtype="float64", weights=weights)
    one = toolkit.DataParallel(SMALL_MLP, backend, 1, optimizer, dtype="float64")
    losses_many = [many.step(x, y) for _ in range(10)]
    losses_one = [one.step(x, y) for _ in range(10)]
    np.testing.assert_allclose(losses_many, losses_one, rtol=0, atol=FLOAT64_ATOL)
    assert max_abs_diff(many.params(), one.params()) <= FLOAT64_ATOL
    for replica in many.replica_params():  # every device holds the same parameters
        assert max_abs_diff(replica, many.params()) == 0.0
    assert many.step_count == 10


def test_step_reports_the_mean_loss_and_reduces_it(backend, n_devices):
    x, y = batch(32, seed=2)
    trainer = toolkit.DataParallel(SMALL_MLP, backend, n_devices, toolkit.optim.SGD(0.5), dtype="float32")
    before = trainer.loss(x, y)
    first = trainer.step(x, y)
    assert first == pytest.approx(before, rel=1e-6)
    for _ in range(20):
        last = trainer.step(x, y)
    assert last < 0.8 * first
    assert all(v.dtype == np.float32 for v in trainer.params().values())


def test_same_seed_same_init_and_set_params(backend):
    a = toolkit.DataParallel(SMALL_MLP, backend, 2, toolkit.optim.SGD(0.1), seed=3)
    b = toolkit.DataParallel(SMALL_MLP, backend, 1, toolkit.optim.SGD(0.1), seed=3)
    assert max_abs_diff(a.params(), b.params()) == 0.0
    new = {k: np.full(v.shape, 0.5) for k, v in a.params().items()}
    a.set_params(new)
    for replica in a.replica_params():
        assert max_abs_diff(replica, new) == 0.0
        assert all(v.dtype == np.float32 for v in replica.values())


def test_set_params_errors_change_nothing(backend):
    trainer = toolkit.DataParallel(SMALL_MLP, backend, 2, toolkit.optim.SGD(0.1))
    before = trainer.params()
    good = {k: np.zeros(v.shape) for k, v in before.items()}
    cases = [
        ({k: v for k, v in good.items() if k != "w0"}, "missing ['w0']"),
        ({**good, "extra": np.zeros(1)}, "extra ['extra']"),
        ({**good, "b1": np.zeros(99)}, "set_params['b1']: expected shape (3,), got (99,)"),
        ([1, 2], "needs a dict"),
    ]
    for params, words in cases:
        with pytest.raises(toolkit.ParamsError) as info:
            trainer.set_params(params)
        assert words in str(info.value)
    assert max_abs_diff(trainer.params(), before) == 0.0


def test_bad_batches_raise_and_change_nothing(backend):
    trainer = toolkit.DataParallel(SMALL_MLP, backend, 2, toolkit.optim.Adam(0.1))
    x, y = batch(6)
    trainer.step(x, y)
    before = trainer.params()
    cases = [
        ((x, y[:5]), toolkit.ShapeError, "same number of examples; got 6 and 5"),
        ((x[:0], y[:0]), toolkit.ShapeError, "batch is empty"),
        ((np.float64(1.0), y), toolkit.ShapeError, "need a batch axis"),
        ((x.astype(str), y), toolkit.DTypeError, "x must hold numbers"),
    ]
    for args, error, words in cases:
        with pytest.raises(error) as info:
            trainer.step(*args)
        assert words in str(info.value)
    assert trainer.step_count == 1
    assert max_abs_diff(trainer.params(), before) == 0.0


def test_constructor_errors(backend):
    with pytest.raises(toolkit.DTypeError, match="float32"):
        toolkit.DataParallel(SMALL_MLP, backend, 1, toolkit.optim.SGD(0.1), dtype="int32")
    with pytest.raises(TypeError, match="toolkit.Model"):
        toolkit.DataParallel(object(), backend, 1, toolkit.optim.SGD(0.1))
    with pytest.raises(TypeError, match="optimizer"):
        toolkit.DataParallel(SMALL_MLP, backend, 1, "adam")
    with pytest.raises(toolkit.DeviceNotFoundError):
        toolkit.DataParallel(SMALL_MLP, backend, "gpu:0", toolkit.optim.SGD(0.1))
    with pytest.raises(ValueError, match="finite numbers > 0"):
        toolkit.DataParallel(SMALL_MLP, backend, 2, toolkit.optim.SGD(0.1), weights=[1, 0])


def test_weights_set_after_a_step_change_the_next_split(backend):
    trainer = toolkit.DataParallel(SMALL_MLP, backend, 2, toolkit.optim.SGD(0.1), dtype="float64")
    shares = []  # each step's shares of the batch, one per shard, as the compiled step receives them

    def recorded(step):
        return lambda indices, xs, ys, parts, number: shares.append(list(parts)) or step(indices, xs, ys, parts,
                                                                                        number)

    if not trainer.wrap_fused_step(recorded):
        pytest.skip(f"{backend.name} composes its step from primitives (no fused step)")
    trainer.step(*batch(6))
    trainer.weights = [2, 1]  # a trainer keeps each batch size's split: a new weighting is a new split
    trainer.step(*batch(6))
    assert shares == [[0.5, 0.5], [pytest.approx(4 / 6), pytest.approx(2 / 6)]]
    assert trainer.step_count == 2


@pytest.mark.parametrize("make, words", [
    (lambda: toolkit.optim.SGD(-0.1), "SGD lr"),
    (lambda: toolkit.optim.SGD(0.0), "SGD lr"),
    (lambda: toolkit.optim.SGD(0.1, momentum=1.0), "SGD momentum"),
    (lambda: toolkit.optim.Adam(float("nan")), "Adam lr"),
    (lambda: toolkit.optim.Adam(0.1, beta1=1.5), "Adam beta1"),
    (lambda: toolkit.optim.Adam(0.1, eps=0), "Adam eps"),
    (lambda: toolkit.optim.RMSprop(0.1, rho=-0.1), "RMSprop rho"),
])
def test_optimizer_hyperparameters_are_checked(make, words):
    with pytest.raises(ValueError, match=words):
        make()


@pytest.mark.parametrize("size, n, weights", SPLITS)
def test_a_fused_step_equals_the_composed_step(backend, size, n, weights):
    optimizer = toolkit.optim.Adam(0.05)
    fused = toolkit.DataParallel(SMALL_MLP, backend, n, optimizer, dtype="float64", weights=weights)
    taken = []
    if not fused.wrap_fused_step(lambda step: lambda *args: taken.append(step(*args)) or taken[-1]):
        pytest.skip(f"{backend.name} composes its step from primitives (no fused step)")
    composed = toolkit.DataParallel(SMALL_MLP, backend, n, optimizer, dtype="float64", weights=weights)
    composed.fused = False
    x, y = batch(size, seed=6)
    for _ in range(5):
        assert abs(fused.step(x, y) - composed.step(x, y)) <= FLOAT64_ATOL
    assert None not in taken  # every split fused, uneven and weighted too (the MLP is rows_independent)
    assert max_abs_diff(fused.params(), composed.params()) <= FLOAT64_ATOL
    assert max_abs_diff(fused.optimizer_state()["m"], composed.optimizer_state()["m"]) <= FLOAT64_ATOL
    for replica in fused.replica_params():
        assert max_abs_diff(replica, fused.params()) == 0.0


def test_a_fused_step_follows_set_params_skipped_steps_and_restore(backend, n_devices, tmp_path):
    check_fused_step_follows_outside_writes(backend, n_devices, tmp_path / "checkpoint.npz")
