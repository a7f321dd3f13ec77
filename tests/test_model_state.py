"""Model state (batch-norm statistics) and training and inference modes: the same numbers on every backend, device
count, split and compiled path (per-example randomness, dropout: tests/test_dropout.py)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import toolkit
from tests.conftest import THEANO, needs_backend
from tests.helpers import max_abs_diff
from tests.model_state_cases import (
    BATCH_NORM,
    DROPOUT,
    RNG,
    SYNC_BATCH_NORM,
    X,
    Y,
    _bn_forward,
    _bn_init,
    _dropout_forward,
    _dropout_init,
    _sync_bn_forward,
    _train,
)
from toolkit import layers
from toolkit.nn import context
from toolkit.nn.models import sparse_softmax_cross_entropy
from toolkit.placement.splitting import shard_bounds
from toolkit.tolerances import FLOAT64_ATOL


def _bn_numpy(p, state, x, training, momentum=0.99, epsilon=1e-3):
    """The MLP with batch normalization in NumPy: outputs and the new moving statistics."""
    h = x @ p["d1/kernel"] + p["d1/bias"]
    mean, var = (h.mean(0), h.var(0)) if training else (state["bn/moving_mean"], state["bn/moving_variance"])
    out = np.maximum((h - mean) / np.sqrt(var + epsilon) * p["bn/gamma"] + p["bn/beta"], 0) @ p["d2/kernel"]
    new = {"bn/moving_mean": state["bn/moving_mean"] * momentum + mean * (1 - momentum),
           "bn/moving_variance": state["bn/moving_variance"] * momentum + var * (1 - momentum)}
    return out + p["d2/bias"], new


def test_state_is_kept_apart_updated_and_predict_uses_it(backend, n_devices):
    trainer = toolkit.DataParallel(BATCH_NORM, backend, n_devices, toolkit.optim.SGD(1e-300), dtype="float64", seed=1)
    assert set(trainer.params()) == {"d1/kernel", "d1/bias", "bn/gamma", "bn/beta", "d2/kernel", "d2/bias"}
    assert {k: v.tolist() for k, v in trainer.state().items()} == {"bn/moving_mean": [0.0] * 8,
                                                                   "bn/moving_variance": [1.0] * 8}
    params = trainer.params()
    trainer.step(X, Y)  # lr 1e-300: only the state moves
    # Per-replica statistics: each replica's moving statistics from its own shard, averaged by shard size.
    shards = np.array_split(np.arange(len(X)), n_devices)
    new = [_bn_numpy(params, {"bn/moving_mean": np.zeros(8), "bn/moving_variance": np.ones(8)}, X[s], True)[1]
           for s in shards]
    expected = {k: sum(len(s) * n[k] for s, n in zip(shards, new)) / len(X) for k in new[0]}
    assert max_abs_diff(trainer.state(), expected) <= FLOAT64_ATOL
    replicas = trainer.replica_state()
    assert len(replicas) == n_devices
    for replica in replicas:
        assert max_abs_diff(replica, trainer.state()) == 0
    outputs, _ = _bn_numpy(params, trainer.state(), X, training=False)
    np.testing.assert_allclose(trainer.predict(X, batch_size=5), outputs, rtol=0, atol=FLOAT64_ATOL)


def test_per_replica_statistics_differ_from_one_device(backend):
    """What plain MirroredStrategy gives: each replica normalises with its shard's statistics, so the loss and the
    moving variance depend on the device count (the moving mean does not: a mean of shard means is the mean)."""
    one, losses_one = _train(BATCH_NORM, backend, 1, steps=1)
    two, losses_two = _train(BATCH_NORM, backend, 2, steps=1)
    assert abs(losses_one[0] - losses_two[0]) > 1e-3
    np.testing.assert_allclose(two.state()["bn/moving_mean"], one.state()["bn/moving_mean"], atol=FLOAT64_ATOL)
    assert np.all(two.state()["bn/moving_variance"] < one.state()["bn/moving_variance"])  # within-shard variance


def _splits(n_devices):
    """Equal shards and, on several devices, a weighted split (uneven shards: TensorFlow traces them together,
    Aesara's pmapped step pads them to one size)."""
    return [None] + ([[1, 3, 1, 2][:n_devices]] if n_devices > 1 else [])


def test_synchronized_statistics_make_n_devices_train_as_one(backend_name, n_devices):
    backend = toolkit.get_backend(backend_name)
    one, one_losses = _train(SYNC_BATCH_NORM, backend, 1)
    for weights in _splits(n_devices):
        many, losses = _train(SYNC_BATCH_NORM, backend, n_devices, weights=weights)
        np.testing.assert_allclose(losses, one_losses, rtol=0, atol=FLOAT64_ATOL)
        assert max_abs_diff(many.params(), one.params()) <= FLOAT64_ATOL
        assert max_abs_diff(many.state(), one.state()) <= FLOAT64_ATOL
        for replica in many.replica_params()[1:]:
            assert max_abs_diff(replica, many.params()) == 0.0
    _check_one_device_synchronized_is_plain(backend)


def _check_one_device_synchronized_is_plain(backend):
    synchronized, synchronized_losses = _train(SYNC_BATCH_NORM, backend, 1)
    plain, plain_losses = _train(BATCH_NORM, backend, 1)
    np.testing.assert_allclose(synchronized_losses, plain_losses, rtol=0, atol=FLOAT64_ATOL)
    assert max_abs_diff(synchronized.params(), plain.params()) <= FLOAT64_ATOL
    assert max_abs_diff(synchronized.state(), plain.state()) <= FLOAT64_ATOL


@needs_backend(THEANO)
def test_synchronized_statistics_on_the_c_linker_are_the_plain_ones():
    _check_one_device_synchronized_is_plain(toolkit.get_backend(THEANO, linker="c"))


def test_synchronized_statistics_are_the_global_batch(backend_name, n_devices):
    trainer = toolkit.DataParallel(SYNC_BATCH_NORM, backend_name, n_devices, toolkit.optim.SGD(1e-300),
                                   dtype="float64", seed=1, weights=_splits(n_devices)[-1])
    params = trainer.params()
    trainer.step(X, Y)  # lr 1e-300: only the state moves
    _, expected = _bn_numpy(params, {"bn/moving_mean": np.zeros(8), "bn/moving_variance": np.ones(8)}, X, True)
    assert max_abs_diff(trainer.state(), expected) <= FLOAT64_ATOL


def test_synchronized_statistics_are_refused_where_replicas_do_not_meet(backend_name):
    """A step composed per device (every backend's composed path: trainer.gradients, accumulated micro-batches)
    and model code outside a trainer cannot sum over replicas: a typed error, nothing changed."""
    trainer = toolkit.DataParallel(SYNC_BATCH_NORM, backend_name, 2, toolkit.optim.SGD(0.1), dtype="float64")
    trainer.fused = False
    params, state = trainer.params(), trainer.state()
    with pytest.raises(toolkit.ComputeError, match="cross_replica_sum .* needs a data-parallel training step "
                                                   "that runs its replicas together") as error:
        trainer.step(X, Y)
    assert isinstance(error.value.__cause__, toolkit.ModelStateError)
    assert "one device's part of a step composed per device" in str(error.value)
    assert max_abs_diff(trainer.params(), params) == 0.0 and max_abs_diff(trainer.state(), state) == 0.0
    assert trainer.step_count == 0
    np.testing.assert_allclose(trainer.predict(X), _bn_numpy(params, state, X, False)[0], atol=FLOAT64_ATOL)
    backend = toolkit.get_backend(backend_name)
    with pytest.raises(toolkit.ModelStateError, match="outside a trainer's training step"):
        backend.call(lambda ops, x: ops.cross_replica_sum(x), backend.list_devices()[0], {"x": X}, "float64")


def _two_norms_init(rng):
    return {**_bn_init(rng), **layers.batch_norm_init(rng, 3, "bn2")}


def _two_norms_forward(ops, p, x):
    """Synchronized statistics, then per-replica ones: on Aesara's padded step both must leave the padding out."""
    return layers.batch_norm(ops, p, _sync_bn_forward(ops, p, x), "bn2")


TWO_NORMS = toolkit.Model(_two_norms_init, _two_norms_forward, sparse_softmax_cross_entropy(3), name="two-norms")


def test_padded_shards_weigh_nothing_in_either_statistics(backend_name):
    """Uneven shards, one of them empty (Aesara pads them all to one size): the synchronized statistics are the
    global batch's and the per-replica ones each shard's own, averaged by shard size, as NumPy computes them."""
    trainer = toolkit.DataParallel(TWO_NORMS, backend_name, 4, toolkit.optim.SGD(1e-300), dtype="float64",
                                   seed=1, weights=[1, 3, 1, 2])
    params, x, y = trainer.params(), X[:4], Y[:4]  # shards of 1, 2, 0 and 1 rows
    loss = trainer.step(x, y)
    h, synchronized = _bn_numpy(params, {"bn/moving_mean": np.zeros(8), "bn/moving_variance": np.ones(8)}, x, True)
    assert toolkit.split_sizes(len(x), 4, [1, 3, 1, 2]) == [1, 2, 0, 1]
    shards = [(lo, hi) for lo, hi in shard_bounds([1, 2, 0, 1]) if hi > lo]
    normalized, moving = np.empty_like(h), {"bn2/moving_mean": 0.0, "bn2/moving_variance": 0.0}
    for lo, hi in shards:
        mean, var = h[lo:hi].mean(0), h[lo:hi].var(0)
        normalized[lo:hi] = (h[lo:hi] - mean) / np.sqrt(var + 1e-3)
        moving["bn2/moving_mean"] += (hi - lo) / len(x) * mean * 0.01
        moving["bn2/moving_variance"] += (hi - lo) / len(x) * (0.99 + var * 0.01)
    logits = normalized - normalized.max(1, keepdims=True)
    expected_loss = np.mean(np.log(np.exp(logits).sum(1)) - logits[np.arange(len(y)), y])
    assert loss == pytest.approx(expected_loss, abs=FLOAT64_ATOL)
    assert max_abs_diff(trainer.state(), {**synchronized, **moving}) <= FLOAT64_ATOL


def test_a_sum_over_padded_rows_is_refused():
    """Aesara pads uneven shards: a cross-replica sum the model makes of its rows would count the padding, so it
    is a typed error that says what to use; TensorFlow traces uneven shards as they are and takes it."""
    def forward(ops, p, x):
        h = ops.matmul(x, p["d1/kernel"])
        return h - ops.cross_replica_sum(ops.sum(h, axis=0)) / 12.0

    model = toolkit.Model(lambda rng: layers.dense_init(rng, 6, 3, "d1"), forward, sparse_softmax_cross_entropy(3))
    for name in ("tensorflow", THEANO):
        if needs_backend(name).args[0]:
            continue
        trainer = toolkit.DataParallel(model, name, 2, toolkit.optim.SGD(0.1), dtype="float64", weights=[1, 2])
        if name == "tensorflow":
            assert np.isfinite(trainer.step(X, Y))
            continue
        params = trainer.params()
        with pytest.raises(toolkit.ComputeError, match="would count the padding rows; make row statistics with "
                                                       r"ops.moments\(..., synchronized=True\)") as error:
            trainer.step(X, Y)
        assert isinstance(error.value.__cause__, toolkit.ModelStateError)
        assert max_abs_diff(trainer.params(), params) == 0.0 and trainer.step_count == 0
        even = toolkit.DataParallel(model, name, 2, toolkit.optim.SGD(0.1), dtype="float64")
        assert np.isfinite(even.step(X, Y))  # equal shards: no padding, the sum is the model's to make


def test_state_equals_on_every_compiled_path(backend, n_devices):
    fused, losses = _train(BATCH_NORM, backend, n_devices)
    composed, composed_losses = _train(BATCH_NORM, backend, n_devices, fused=False)
    np.testing.assert_allclose(losses, composed_losses, rtol=0, atol=FLOAT64_ATOL)
    assert max_abs_diff(fused.state(), composed.state()) <= FLOAT64_ATOL


def test_a_skipped_step_leaves_the_state(backend):
    """Inputs of 1e200 overflow the batch variance: the moving variance would become Inf while the loss stays
    finite (the normalised values are 0); the step is skipped as a whole."""
    trainer = toolkit.DataParallel(BATCH_NORM, backend, 2, toolkit.optim.SGD(0.1), dtype="float64",
                                   nan_policy="skip")
    before = trainer.state()
    trainer.step(X * 1e200, Y)
    assert trainer.skipped_steps == 1
    assert max_abs_diff(trainer.state(), before) == 0.0


def test_state_is_checkpointed_and_restored_on_another_backend(backend, tmp_path):
    trainer, _ = _train(BATCH_NORM, backend, 2)
    trainer.save(tmp_path / "bn.npz")
    checkpoint = toolkit.load_checkpoint(tmp_path / "bn.npz")
    assert max_abs_diff(checkpoint.model_state, trainer.state()) == 0.0
    for other in toolkit.available_backends():
        restored = toolkit.DataParallel(BATCH_NORM, other, 1, toolkit.optim.Adam(0.01), dtype="float64")
        restored.restore(tmp_path / "bn.npz")
        assert max_abs_diff(restored.state(), trainer.state()) == 0.0
    restored.set_state({k: v + 1 for k, v in trainer.state().items()})
    assert max_abs_diff(restored.state(), {k: v + 1 for k, v in trainer.state().items()}) == 0.0
    with pytest.raises(toolkit.ParamsError, match="missing"):
        restored.set_state({})


def test_state_errors_are_typed(backend):
    def writes_unknown(ops, p, x):
        ops.update_state("nope", x)
        return layers.dense(ops, p, x, "d1")

    def writes_a_wrong_shape(ops, p, x):
        ops.update_state("bn/moving_mean", ops.zeros_like(x))
        return layers.dense(ops, p, x, "d1")

    for forward, words in ((writes_unknown, "declares no state of that name"),
                           (writes_a_wrong_shape, r"the new value has shape \(12, 6\), the state has \(8,\)")):
        model = toolkit.Model(_bn_init, forward, sparse_softmax_cross_entropy(3))
        trainer = toolkit.DataParallel(model, backend, 1, toolkit.optim.SGD(0.1), dtype="float64")
        params, state = trainer.params(), trainer.state()
        with pytest.raises(toolkit.ComputeError, match=words) as error:
            trainer.step(X, Y)
        assert isinstance(error.value.__cause__, toolkit.ModelStateError)
        assert max_abs_diff(trainer.params(), params) == 0.0 and max_abs_diff(trainer.state(), state) == 0.0
        assert trainer.step_count == 0
    with pytest.raises(toolkit.ParamsError, match="ModelParallel does not carry model state"):
        toolkit.ModelParallel(toolkit.PartedModel.build(
            _bn_init, [toolkit.Part("all", lambda o, p, x: _bn_forward(o, p, x), ("x",),
                                    tuple(_bn_init(np.random.default_rng(0))), "cpu:0")],
            BATCH_NORM.loss), backend, toolkit.optim.SGD(0.1))


def test_model_parallel_parts_train_in_training_mode(backend):
    """A part with dropout fails loudly under ModelParallel (no per-example keys there yet) rather than silently
    running without dropout."""
    parted = toolkit.PartedModel.build(_dropout_init, [
        toolkit.Part("all", lambda o, p, x: _dropout_forward(o, p, x), ("x",), tuple(_dropout_init(
            np.random.default_rng(0))), "cpu:0")], DROPOUT.loss)
    trainer = toolkit.ModelParallel(parted, backend, toolkit.optim.SGD(0.1), dtype="float64")
    with pytest.raises(toolkit.ComputeError, match="ModelParallel does not yet"):
        trainer.step(X, Y)


@pytest.mark.skipif(importlib.util.find_spec("keras") is None,
                    reason='needs keras (pip install "multigpu-toolkit[tensorflow]")')
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("synchronized", [False, True])
def test_batch_norm_equals_keras(backend, training, synchronized):
    toolkit.get_backend("tensorflow")
    import keras

    x = RNG.normal(size=(10, 4, 3)) * 2 + 1
    layer = keras.layers.BatchNormalization(dtype="float64", synchronized=synchronized)
    layer.build(x.shape)
    gamma, beta, mean, var = (RNG.normal(size=3) * 0.3 + base for base in (1.0, 0.0, 0.5, 2.0))
    var = np.abs(var)
    layer.set_weights([gamma, beta, mean, var])
    expected = np.asarray(layer(x, training=training))
    params = {"bn/gamma": gamma, "bn/beta": beta, "bn/moving_mean": mean, "bn/moving_variance": var}
    run = context.RunContext(training=training, state={}, replica_sum=context.single_replica)

    def apply(ops, p, x):
        run.state = {k: ops.unwrap(v) for k, v in p.items() if "moving" in k}
        with context.running(run):
            out = layers.batch_norm(ops, p, x, "bn", synchronized=synchronized)
        return out, {k: run.updates.get(k, run.state[k]) for k in run.state}

    out, state = backend.call(apply, backend.list_devices()[0], {"p": params, "x": x}, "float64")
    np.testing.assert_allclose(backend.to_numpy(out), expected, rtol=1e-10, atol=1e-10)
    keras_state = {"bn/moving_mean": np.asarray(layer.moving_mean), "bn/moving_variance":
                   np.asarray(layer.moving_variance)}
    assert max_abs_diff({k: backend.to_numpy(v) for k, v in state.items()}, keras_state) <= 1e-12


@pytest.mark.parametrize("batch_size", [0, -1, 2.5, True])
def test_predict_refuses_a_bad_batch_size(backend, batch_size):
    trainer = toolkit.DataParallel(BATCH_NORM, backend, 2, toolkit.optim.SGD(0.1), dtype="float64")
    with pytest.raises(toolkit.ShapeError, match="batch_size must be an int >= 1 or None"):
        trainer.predict(X, batch_size=batch_size)


def test_predict_takes_any_batch_size_and_keeps_the_order(backend):
    trainer = toolkit.DataParallel(DROPOUT, backend, 4, toolkit.optim.SGD(0.1), dtype="float64")
    whole = trainer.predict(X)
    assert whole.shape == (12, 3)
    for size in (1, 5, 12, 100):
        np.testing.assert_allclose(trainer.predict(X, batch_size=size), whole, rtol=0, atol=FLOAT64_ATOL)


def test_micro_batches_take_the_update_of_the_whole_batch(backend, n_devices):
    """Gradient accumulation: the batch in 3 consecutive parts (5 + 4 + 3 rows, each split over the devices) takes
    the whole batch's update, dropout masks included (each example keeps its key)."""
    whole, _ = _train(DROPOUT, backend, n_devices, steps=0)
    accumulated, _ = _train(DROPOUT, backend, n_devices, steps=0)
    for _ in range(2):
        assert abs(whole.step(X, Y) - accumulated.step(X, Y, micro_batches=3)) <= FLOAT64_ATOL
    assert max_abs_diff(whole.params(), accumulated.params()) <= FLOAT64_ATOL
    assert accumulated.step_count == 2
    params = accumulated.params()
    for bad in (0, 13, True, 1.5):
        with pytest.raises(toolkit.ShapeError, match="micro_batches must be an int from 1 to the batch's 12"):
            accumulated.step(X, Y, micro_batches=bad)
    assert accumulated.step_count == 2 and max_abs_diff(accumulated.params(), params) == 0.0
