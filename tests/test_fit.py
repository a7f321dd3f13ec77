"""trainer.fit: exactly the step calls it stands for, its history, resuming from a checkpoint, callbacks, reports
and refusals; on every backend and device count, and for ModelParallel."""

from __future__ import annotations

import csv
import functools
import json
from pathlib import Path

import numpy as np
import pytest

import toolkit
from tests.helpers import max_abs_diff
from tests.test_model_parallel import chain, data, shared_lstm
from tests.test_model_state import BATCH_NORM, DROPOUT, SYNC_BATCH_NORM
from tests.test_model_state import X as STATE_X
from tests.test_model_state import Y as STATE_Y

RNG = np.random.default_rng(8)
X, Y = RNG.normal(size=(23, 5)), RNG.integers(0, 3, size=23)
VX, VY = RNG.normal(size=(9, 5)), RNG.integers(0, 3, size=9)
MODEL = toolkit.models.mlp([5, 7, 3])


def _trainer(backend, n_devices=1, seed=4):
    return toolkit.DataParallel(MODEL, backend, n_devices, toolkit.optim.Adam(0.05), dtype="float64", seed=seed)


def test_fit_is_the_steps_it_stands_for(backend, n_devices):
    """fit's parameters and losses are the step calls' bit for bit; its training metrics are each step's batch
    scored before the update (an MLP's training-mode outputs are its inference outputs, so evaluate gives them),
    averaged over the epoch by batch size; its validation scores are evaluate's."""
    metrics = ["accuracy", toolkit.metrics.sparse_categorical_crossentropy(from_logits=True)]
    fitted, by_hand = _trainer(backend, n_devices), _trainer(backend, n_devices)
    history = fitted.fit(X, Y, epochs=3, batch_size=5, validation_data=(VX, VY), metrics=metrics, verbose=0)
    names = ["accuracy", "sparse_categorical_crossentropy"]
    expected = {name: [] for name in ["loss", *names, "val_loss", *(f"val_{name}" for name in names)]}
    for _ in range(3):
        order, totals = by_hand.rng.permutation(len(Y)), dict.fromkeys(["loss", *names], 0.0)
        for start in range(0, len(Y), 5):  # 5 + 5 + 5 + 5 + 3: the last, smaller batch is trained on
            rows = order[start:start + 5]
            scores = by_hand.evaluate(X[rows], Y[rows], metrics=metrics)
            for name in names:
                totals[name] += scores[name] * len(rows)
            totals["loss"] += by_hand.step(X[rows], Y[rows]) * len(rows)
        for name, total in totals.items():
            expected[name].append(total / len(Y))
        for name, value in by_hand.evaluate(VX, VY, batch_size=5, metrics=metrics).items():
            expected[f"val_{name}"].append(value)
    assert max_abs_diff(fitted.params(), by_hand.params()) == 0.0
    assert fitted.step_count == by_hand.step_count == 15
    assert list(history.history) == list(expected) and history.epoch == [0, 1, 2]
    for name in ("loss", "val_loss", *(f"val_{name}" for name in names)):
        assert history.history[name] == expected[name], name
    for name in names:  # a float64 mean in the step against evaluate's float64 sum and count
        np.testing.assert_allclose(history.history[name], expected[name], rtol=0, atol=1e-12, err_msg=name)
    assert 0 < history.history["accuracy"][-1] < 1


def test_a_restored_fit_draws_the_same_orders(backend, tmp_path):
    straight = _trainer(backend, 2)
    straight.fit(X, Y, epochs=3, batch_size=6, verbose=0)
    first = _trainer(backend, 2)
    first.fit(X, Y, epochs=2, batch_size=6, verbose=0)
    first.save(tmp_path / "two.npz")
    resumed = _trainer(backend, 2, seed=99)
    resumed.restore(tmp_path / "two.npz")
    resumed.fit(X, Y, epochs=1, batch_size=6, verbose=0)
    assert max_abs_diff(resumed.params(), straight.params()) == 0.0


def test_callbacks(backend, tmp_path):
    calls = []

    class Recorder(toolkit.callbacks.Callback):
        def on_epoch_end(self, epoch, logs):
            calls.append((epoch, sorted(logs), self.trainer.step_count))

    trainer = _trainer(backend)
    stopper = toolkit.callbacks.EarlyStopping(monitor="val_accuracy", min_delta=2.0, patience=1,
                                              restore_best_weights=True)
    saver = toolkit.callbacks.ModelCheckpoint(tmp_path / "ckpt" / "s{step:03d}.npz", every_epochs=None,
                                              every_steps=2, keep=2)
    log = tmp_path / "log.csv"
    best = {}

    class Best(toolkit.callbacks.Callback):
        def on_epoch_end(self, epoch, logs):
            if epoch == 0:
                best.update(self.trainer.params())

    history = trainer.fit(X, Y, epochs=10, batch_size=8, validation_data=(VX, VY), metrics=["accuracy"], verbose=0,
                          callbacks=[Recorder(), Best(), stopper, saver, toolkit.callbacks.CSVLogger(log),
                                     toolkit.callbacks.JSONLinesLogger(tmp_path / "log.jsonl", steps=True)])
    # No epoch improves val_accuracy by 2: the first is the best, and with patience 1 the second stops the fit.
    assert history.epoch == [0, 1] and stopper.stopped_epoch == 1
    assert calls == [(e, ["accuracy", "loss", "val_accuracy", "val_loss"], 3 * (e + 1)) for e in range(2)]
    assert max_abs_diff(trainer.params(), best) == 0.0  # restore_best_weights
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["s004.npz", "s006.npz"]
    assert toolkit.load_checkpoint(tmp_path / "ckpt" / "s006.npz").metadata["step"] == 6
    rows = list(csv.DictReader(log.open()))
    assert [r["epoch"] for r in rows] == ["0", "1"]
    assert float(rows[1]["val_loss"]) == history.history["val_loss"][1]
    records = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    epochs = [r for r in records if "epoch" in r]
    assert [(r["epoch"], r["step"]) for r in epochs] == [(0, 3), (1, 6)]
    steps = [r for r in records if "epoch" not in r]
    assert [r["step"] for r in steps] == list(range(1, 7)) and all(0 <= r["accuracy"] <= 1 for r in steps)
    assert epochs[1]["val_loss"] == history.history["val_loss"][1] and epochs[1]["loss"] == history.history["loss"][1]


def test_reports(backend, capsys):
    _trainer(backend).fit(X, Y, epochs=2, batch_size=10, verbose=2)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[1].startswith("epoch 2/2 - 3 steps - ") and " - loss " in lines[1]
    _trainer(backend).fit(X, Y, epochs=2, batch_size=10, verbose=0)
    assert capsys.readouterr().out == ""
    _trainer(backend).fit(X, Y, epochs=1, batch_size=10, verbose=1)  # the bar is transient; the epoch line stays
    assert capsys.readouterr().out.splitlines()[-1].startswith("epoch 1/1 - 3 steps - ")


def test_refusals_change_nothing(backend):
    trainer = _trainer(backend)
    params, rng = trainer.params(), trainer.rng.bit_generator.state
    cases = [
        (dict(epochs=0), toolkit.ShapeError, "epochs must be an int >= 1"),
        (dict(batch_size=2.5), toolkit.ShapeError, "batch_size must be an int >= 1"),
        (dict(verbose=3), toolkit.ArgumentError, "verbose must be one of"),
        (dict(callbacks=[print]), toolkit.ArgumentTypeError, "callbacks must be toolkit.callbacks.Callback"),
        (dict(validation_data=(VX,)), toolkit.ArgumentError, "validation_data must be a pair"),
        (dict(validation_data=(VX, VY), metrics=["top9"]), toolkit.ArgumentError, "unknown metric 'top9'"),
        (dict(metrics=["accuracy", "accuracy"]), toolkit.ArgumentError, "metric names must be unique"),
        (dict(callbacks=[toolkit.callbacks.EarlyStopping(monitor="val_loss")]), toolkit.ArgumentError,
         "monitors 'val_loss'"),
        # Validation data is checked against the training data on a new trainer too (no step has run yet).
        (dict(validation_data=(VX[:, :4], VY)), toolkit.ShapeError, r"shaped like the training data's \{'x': \(5,\)"),
        (dict(validation_data=(VX, VY.astype(float))), toolkit.DTypeError, "y must be integer labels"),
        (dict(initial_epoch=3, epochs=2), toolkit.ShapeError, "initial_epoch must be at most epochs"),
        (dict(shuffle="batch"), toolkit.ArgumentTypeError, "shuffle must be True or False"),
        (dict(callbacks=[toolkit.callbacks.ModelCheckpoint("{epoch}-{val_acc:.2f}.npz")],
              validation_data=(VX, VY)), toolkit.ArgumentError, "names 'val_acc', which is not a value saves get"),
        (dict(callbacks=[toolkit.callbacks.ModelCheckpoint("{loss:03d}.npz")]), toolkit.ArgumentError,
         "cannot be formatted"),
        (dict(callbacks=[toolkit.callbacks.ModelCheckpoint("{val_loss}.npz", every_epochs=None, every_steps=2)],
              validation_data=(VX, VY)), toolkit.ArgumentError, "mid-epoch: no val_"),
    ]
    for options, error, words in cases:
        with pytest.raises(error, match=words):
            trainer.fit(X, Y, **{"verbose": 0, **options})
    assert trainer.step_count == 0 and max_abs_diff(trainer.params(), params) == 0.0
    assert trainer.rng.bit_generator.state == rng
    with pytest.raises(toolkit.ArgumentError, match="every_epochs or every_steps"):
        toolkit.callbacks.ModelCheckpoint("x.npz", every_epochs=1, every_steps=1)
    for options, words in [(dict(patience=-1), "patience must be an int >= 0"), (dict(mode="up"), "mode must be"),
                           (dict(baseline=float("nan")), "baseline must be a finite number"),
                           (dict(start_from_epoch=1.5), "start_from_epoch must be an int >= 0")]:
        with pytest.raises(toolkit.ArgumentError, match=words):
            toolkit.callbacks.EarlyStopping(**options)
    for options, words in [(dict(backup_dir=""), "needs a backup_dir"), (dict(backup_dir="b", save_freq=0),
                                                                          "save_freq .* must be an int >= 1")]:
        with pytest.raises(toolkit.ArgumentError, match=words):
            toolkit.callbacks.BackupAndRestore(**options)


def test_a_failed_fit_keeps_the_steps_it_completed(backend):
    """As Keras: a fit that fails at its first step (the wrong feature count on a new trainer: found by the
    framework) leaves the trainer as it was, RNG included; one that fails later (a callback raising after step 5:
    epoch 1's second of batches of 8) keeps its steps and its completed epoch: the trainer is the one that took
    those steps by hand (parameters, optimizer state, counts, RNG), and fitting on continues from there."""
    trainer, fresh = _trainer(backend), _trainer(backend)
    with pytest.raises(toolkit.ComputeError):
        trainer.fit(X[:, :4], Y, epochs=2, batch_size=8, verbose=0)
    assert trainer.step_count == 0 and trainer.rng.bit_generator.state == fresh.rng.bit_generator.state

    class FailAt(toolkit.callbacks.Callback):
        def on_step_end(self, step, logs):
            if step == 5:
                raise RuntimeError("a callback failed")

    with pytest.raises(RuntimeError, match="a callback failed"):
        trainer.fit(X, Y, epochs=3, batch_size=8, verbose=0, callbacks=[FailAt()])
    assert (trainer.step_count, trainer.epoch_count) == (5, 1)
    fresh.fit(X, Y, epochs=1, batch_size=8, verbose=0)
    order = fresh.rng.permutation(len(Y))
    for start in (0, 8):
        fresh.step(X[order[start:start + 8]], Y[order[start:start + 8]])
    assert trainer.rng.bit_generator.state == fresh.rng.bit_generator.state
    assert max_abs_diff(trainer.params(), fresh.params()) == 0.0
    assert all(max_abs_diff(values, fresh.optimizer_state()[slot]) == 0.0
               for slot, values in trainer.optimizer_state().items())
    assert trainer.fit(X, Y, verbose=0).history == fresh.fit(X, Y, verbose=0).history


class _InfiniteAtStep(toolkit.optim.schedules.Schedule):
    """Finite, then 0.05 / 0 = Inf where the schedule's step (0-based) is ``step`` (a schedule gone wrong; the
    gradients stay finite)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def __call__(self, ops, step):
        return 0.05 / (float(self.step) - step)

    def peak(self):
        return float("inf")


def test_a_fit_that_turns_non_finite_keeps_the_epochs_before(backend):
    """nan_policy="raise": the step that would write Inf writes nothing and raises NonFiniteError; the steps and the
    epochs before it are kept, as Keras keeps them (step 7 of batches of 8, 3 an epoch: the third epoch's first)."""
    def sgd():
        return toolkit.DataParallel(MODEL, backend, 1, toolkit.optim.SGD(_InfiniteAtStep(6)), dtype="float64", seed=4,
                                    nan_policy="raise")

    trainer, by_hand = sgd(), sgd()
    with pytest.raises(toolkit.NonFiniteError, match="step 7"):
        trainer.fit(X, Y, epochs=3, batch_size=8, verbose=0)
    by_hand.fit(X, Y, epochs=2, batch_size=8, verbose=0)
    assert (trainer.step_count, trainer.epoch_count) == (6, 2)
    assert max_abs_diff(trainer.params(), by_hand.params()) == 0.0


def test_model_checkpoint_names_files_with_any_logged_value(backend, tmp_path):
    """Keras' pattern: {epoch} (1-based) and logged values such as val_loss in the file name."""
    trainer = _trainer(backend)
    saver = toolkit.callbacks.ModelCheckpoint(tmp_path / "ck-{epoch:02d}-{val_loss:.3f}-{accuracy:.2f}.npz")
    history = trainer.fit(X, Y, epochs=2, batch_size=8, validation_data=(VX, VY), metrics=["accuracy"], verbose=0,
                          callbacks=[saver])
    expected = [f"ck-{e + 1:02d}-{history.history['val_loss'][e]:.3f}-{history.history['accuracy'][e]:.2f}.npz"
                for e in range(2)]
    assert sorted(p.name for p in tmp_path.iterdir()) == expected


def test_epochs_keep_counting_and_initial_epoch_is_keras(backend, tmp_path):
    """Epoch numbers go on across fits and through a checkpoint (files named by epoch are not overwritten, an
    appended CSV log counts on); initial_epoch runs epochs initial_epoch .. epochs - 1, as Keras."""
    log = tmp_path / "log.csv"

    def callbacks():
        return [toolkit.callbacks.ModelCheckpoint(tmp_path / "e{epoch}.npz"), toolkit.callbacks.CSVLogger(log, True)]

    trainer = _trainer(backend)
    assert trainer.fit(X, Y, epochs=2, batch_size=8, verbose=0, callbacks=callbacks()).epoch == [0, 1]
    assert trainer.fit(X, Y, epochs=1, batch_size=8, verbose=0, callbacks=callbacks()).epoch == [2]
    restored = _trainer(backend, seed=5)
    restored.restore(tmp_path / "e3.npz")
    assert restored.epoch_count == 3 and restored.step_count == 9
    assert restored.fit(X, Y, epochs=1, batch_size=8, verbose=0, callbacks=callbacks()).epoch == [3]
    assert sorted(p.name for p in tmp_path.glob("*.npz")) == ["e1.npz", "e2.npz", "e3.npz", "e4.npz"]
    assert [r["epoch"] for r in csv.DictReader(log.open())] == ["0", "1", "2", "3"]
    keras_style = _trainer(backend)
    assert keras_style.fit(X, Y, epochs=3, initial_epoch=1, batch_size=8, verbose=0).epoch == [1, 2]
    assert keras_style.epoch_count == 3 and keras_style.step_count == 6


def test_model_parallel_fits_too(backend):
    """ModelParallel's fit is its step calls; its training metrics (scored on the last part's outputs) equal
    DataParallel's on one device."""
    model = chain()
    x, y = data(model, n=10)
    fitted = toolkit.ModelParallel(model, backend, toolkit.optim.SGD(0.1), dtype="float64", seed=1)
    by_hand = toolkit.ModelParallel(model, backend, toolkit.optim.SGD(0.1), dtype="float64", seed=1)
    single = toolkit.DataParallel(model, backend, 1, toolkit.optim.SGD(0.1), dtype="float64", seed=1)
    metrics = ["accuracy", toolkit.metrics.Metric("loss_again", model.loss)]
    history = fitted.fit(x, y, epochs=2, batch_size=4, verbose=0, metrics=metrics)
    expected = single.fit(x, y, epochs=2, batch_size=4, verbose=0, metrics=metrics)
    for _ in range(2):
        order = by_hand.rng.permutation(10)
        for start in range(0, 10, 4):
            by_hand.step(x[order[start:start + 4]], y[order[start:start + 4]])
    assert max_abs_diff(fitted.params(), by_hand.params()) == 0.0 and len(history.history["loss"]) == 2
    assert list(history.history) == ["loss", "accuracy", "loss_again"] == list(expected.history)
    for name, values in expected.history.items():
        np.testing.assert_allclose(history.history[name], values, rtol=0, atol=1e-12, err_msg=name)
    np.testing.assert_allclose(history.history["loss_again"], history.history["loss"], rtol=0, atol=1e-12)


@pytest.mark.parametrize("model, fused", [
    pytest.param(model, fused, id=f"{model.name}-{'fused' if fused else 'composed'}")
    for model in (DROPOUT, BATCH_NORM, SYNC_BATCH_NORM) for fused in (True, False)
    if fused or model is not SYNC_BATCH_NORM])  # synchronized statistics need the fused step (composed refuses)
def test_training_metrics_score_the_steps_own_outputs(backend, n_devices, model, fused):
    """A metric that is the model's own loss gives exactly the step's loss, with dropout masks and batch
    statistics, on every step path and device count (batches of 5, 5 and 2: uneven splits, empty shards on 4
    devices), while the
    validation loss of the same parameters (inference mode) differs: the metrics are the training-mode outputs'."""
    trainer = toolkit.DataParallel(model, backend, n_devices, toolkit.optim.Adam(0.01), dtype="float64", seed=7)
    trainer.fused = fused
    again = toolkit.metrics.Metric("loss_again", model.loss)
    fit = functools.partial(trainer.fit, STATE_X, STATE_Y, epochs=2, batch_size=5, verbose=0, metrics=[again],
                            validation_data=(STATE_X, STATE_Y))
    history = fit()
    np.testing.assert_allclose(history.history["loss_again"], history.history["loss"], rtol=0, atol=1e-12)
    assert abs(history.history["loss"][-1] - history.history["val_loss"][-1]) > 1e-6


@pytest.mark.parametrize("make_model", [shared_lstm, chain], ids=["branches", "chain"])
def test_model_parallel_predicts_evaluates_and_accumulates_like_one_device(backend, make_model):
    """ModelParallel's predict and evaluate (part by part on the parts' devices) and its gradient accumulation
    equal DataParallel on one device; fit takes validation data."""
    model = make_model()
    x, y = data(model, n=10)
    parted = toolkit.ModelParallel(model, backend, toolkit.optim.Adam(0.05), dtype="float64", seed=1)
    single = toolkit.DataParallel(model, backend, 1, toolkit.optim.Adam(0.05), dtype="float64", seed=1)
    np.testing.assert_allclose(parted.predict(x, batch_size=4), single.predict(x), rtol=0, atol=1e-12)
    scores = parted.evaluate(x, y, batch_size=3, metrics=["accuracy"])
    expected = single.evaluate(x, y, metrics=["accuracy"])
    assert scores.keys() == expected.keys() and all(abs(scores[k] - expected[k]) <= 1e-12 for k in scores)
    for _ in range(2):
        assert abs(parted.step(x, y, micro_batches=3) - single.step(x, y)) <= 1e-12
    assert max_abs_diff(parted.params(), single.params()) <= 1e-12
    history = parted.fit(x, y, epochs=1, batch_size=5, validation_data=(x, y), metrics=["accuracy"], verbose=0)
    assert sorted(history.history) == ["accuracy", "loss", "val_accuracy", "val_loss"]


#: EarlyStopping(monitor="loss", **options) fed these losses, one per epoch: (the epochs run, stopped_epoch,
#: best_epoch, the epoch whose weights are restored at the end or None), as Keras 3.15.1's own EarlyStopping gives
#: them (test_the_early_stopping_table_is_keras checks that where Keras is installed).
EARLY_STOPPING = {
    "patience-1-stops-after-a-worse-epoch": ([1.0, 2.0, 3.0, 4.0, 5.0], dict(patience=1), ([0, 1], 1, 0, None)),
    "patience-0": ([1.0, 2.0, 3.0], dict(patience=0), ([0, 1], 1, 0, None)),
    "min-delta": ([1.0, 0.95, 0.8, 0.79, 0.85, 0.7, 0.6], dict(patience=2, min_delta=0.1), ([0, 1, 2, 3, 4], 4, 2,
                                                                                             None)),
    "baseline-never-beaten": ([0.9, 0.8, 0.85, 0.82, 0.7], dict(patience=2, baseline=0.5), ([0, 1, 2], 2, 1, None)),
    "start-from-epoch": ([5.0, 6.0, 7.0, 8.0, 9.0], dict(patience=1, start_from_epoch=2), ([0, 1, 2, 3], 3, 2, None)),
    "restore-when-epochs-run-out": ([3.0, 1.0, 2.0, 4.0], dict(patience=5, restore_best_weights=True),
                                    ([0, 1, 2, 3], 0, 1, 1)),
    "max-mode-restore": ([0.1, 0.5, 0.4, 0.3, 0.2], dict(patience=1, mode="max", restore_best_weights=True),
                         ([0, 1, 2], 2, 1, 1)),
    "all-together": ([1.0, 5.0, 4.0, 6.0, 7.0], dict(patience=1, baseline=3.0, start_from_epoch=1,
                                                      restore_best_weights=True), ([0, 1, 2, 3], 3, 2, 2)),
}


class _EpochWeights:
    """A stand-in trainer and Keras model whose weights are the number of the epoch that ended last."""

    stop_training = False

    def __init__(self):
        self.epoch, self.restored = None, None

    def params(self):
        return {"w": np.array([self.epoch])}

    def state(self):
        return {}

    def set_params(self, params):
        self.restored = int(params["w"][0])

    def get_weights(self):
        return [np.array([self.epoch])]

    def set_weights(self, weights):
        self.restored = int(weights[0][0])


def _drive(callback, holder, losses):
    """Feed ``losses`` to ``callback`` epoch by epoch as a fit does, until it stops the fit."""
    callback.on_train_begin()
    ran = []
    for epoch, loss in enumerate(losses):
        holder.epoch = epoch
        ran.append(epoch)
        callback.on_epoch_end(epoch, {"loss": loss})
        if getattr(callback, "stop_training", False) or holder.stop_training:  # ours, or Keras' (on its model)
            break
    callback.on_train_end({"loss": loss})
    return ran, callback.stopped_epoch, callback.best_epoch, holder.restored


@pytest.mark.parametrize("case", list(EARLY_STOPPING))
def test_early_stopping_is_keras(case):
    losses, options, expected = EARLY_STOPPING[case]
    callback, holder = toolkit.callbacks.EarlyStopping(monitor="loss", **options), _EpochWeights()
    callback.trainer = holder
    assert _drive(callback, holder, losses) == expected


@pytest.mark.parity
@pytest.mark.parametrize("case", list(EARLY_STOPPING))
def test_the_early_stopping_table_is_keras(case):
    pytest.importorskip("keras")
    toolkit.get_backend("tensorflow")  # its logical devices, before Keras starts TensorFlow
    import keras

    losses, options, expected = EARLY_STOPPING[case]
    callback, holder = keras.callbacks.EarlyStopping(monitor="loss", **options), _EpochWeights()
    callback.set_model(holder)
    assert _drive(callback, holder, losses) == expected


#: ModelCheckpoint(save_best_only=True, monitor="loss"): the losses of the epochs, the options, the epochs (1-based)
#: saved. test_the_best_only_table_is_keras checks Keras' ModelCheckpoint saves at the same epochs.
BEST_ONLY = {
    "min": ([3.0, 2.0, 2.5, 1.0, 1.0], {}, [1, 2, 4]),
    "max": ([0.1, 0.3, 0.2, 0.4], {"mode": "max"}, [1, 2, 4]),
    "threshold": ([3.0, 2.0, 2.5, 1.0], {"initial_value_threshold": 2.2}, [2, 4]),
}


class _Saves:
    """What a checkpoint callback saves through: the epochs of its files (ours: ``trainer.save``; Keras':
    ``model.save``)."""

    step_count, stop_training = 0, False

    def __init__(self):
        self.saved = []

    def save(self, path, overwrite=True):
        self.saved.append(int(Path(path).stem))


def _saved_epochs(callback, holder, losses) -> list[int]:
    callback.on_train_begin()
    for epoch, loss in enumerate(losses):
        callback.on_epoch_begin(epoch)
        callback.on_epoch_end(epoch, {"loss": loss})
    return holder.saved


@pytest.mark.parametrize("case", list(BEST_ONLY))
def test_model_checkpoint_saves_the_best_only_as_keras(case, tmp_path):
    losses, options, expected = BEST_ONLY[case]
    callback = toolkit.callbacks.ModelCheckpoint(tmp_path / "{epoch}.npz", monitor="loss", save_best_only=True,
                                                 **options)
    callback.trainer = holder = _Saves()
    callback.check_logs(["loss"])
    assert _saved_epochs(callback, holder, losses) == expected
    with pytest.raises(toolkit.ArgumentError, match="monitors 'val_loss', which this fit does not log"):
        toolkit.callbacks.ModelCheckpoint(tmp_path / "{epoch}.npz", save_best_only=True).check_logs(["loss"])
    with pytest.raises(toolkit.ArgumentError, match="save_best_only saves at epochs' ends only"):
        toolkit.callbacks.ModelCheckpoint(tmp_path / "{epoch}.npz", None, 5, save_best_only=True)
    with pytest.raises(toolkit.ArgumentError, match="mode must be 'auto', 'min' or 'max', got 'up'"):
        toolkit.callbacks.ModelCheckpoint(tmp_path / "{epoch}.npz", mode="up")
    with pytest.raises(toolkit.ArgumentError, match="monitor, initial_value_threshold decide only with "
                                                    "save_best_only=True"):
        toolkit.callbacks.ModelCheckpoint(tmp_path / "{epoch}.npz", monitor="loss", initial_value_threshold=1.0)


@pytest.mark.parity
@pytest.mark.parametrize("case", list(BEST_ONLY))
def test_the_best_only_table_is_keras(case, tmp_path):
    pytest.importorskip("keras")
    toolkit.get_backend("tensorflow")  # its logical devices, before Keras starts TensorFlow
    import keras

    losses, options, expected = BEST_ONLY[case]
    callback = keras.callbacks.ModelCheckpoint(str(tmp_path / "{epoch}.keras"), monitor="loss", save_best_only=True,
                                               **options)
    callback.set_model(holder := _Saves())
    assert _saved_epochs(callback, holder, losses) == expected


def test_early_stopping_restores_the_best_epoch_of_a_fit_that_ran_out(backend):
    """restore_best_weights puts the best epoch back at the end of training, also when the epochs ran out."""
    best = {}

    class Keep(toolkit.callbacks.Callback):
        def on_epoch_end(self, epoch, logs):
            best[epoch] = (logs["loss"], self.trainer.params())

    trainer = _trainer(backend)
    stopper = toolkit.callbacks.EarlyStopping(monitor="loss", patience=10, restore_best_weights=True)
    trainer.fit(X, Y, epochs=3, batch_size=8, verbose=0, callbacks=[Keep(), stopper])
    assert stopper.stopped_epoch == 0 and stopper.best_epoch == min(best, key=lambda e: best[e][0])
    assert max_abs_diff(trainer.params(), best[stopper.best_epoch][1]) == 0.0
