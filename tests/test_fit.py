"""trainer.fit: exactly the step calls it stands for, its history, resuming from a checkpoint, callbacks, reports
and refusals; on every backend and device count, and for ModelParallel."""

from __future__ import annotations

import csv
import functools
import json

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
    # No epoch improves val_accuracy by 2: the first is the best, and with patience 1 the third stops the fit.
    assert history.epoch == [0, 1, 2] and stopper.stopped_epoch == 2
    assert calls == [(e, ["accuracy", "loss", "val_accuracy", "val_loss"], 3 * (e + 1)) for e in range(3)]
    assert max_abs_diff(trainer.params(), best) == 0.0  # restore_best_weights
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["s006.npz", "s008.npz"]
    assert toolkit.load_checkpoint(tmp_path / "ckpt" / "s008.npz").metadata["step"] == 8
    rows = list(csv.DictReader(log.open()))
    assert [r["epoch"] for r in rows] == ["0", "1", "2"]
    assert float(rows[1]["val_loss"]) == history.history["val_loss"][1]
    records = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    epochs = [r for r in records if "epoch" in r]
    assert [(r["epoch"], r["step"]) for r in epochs] == [(0, 3), (1, 6), (2, 9)]
    steps = [r for r in records if "epoch" not in r]
    assert [r["step"] for r in steps] == list(range(1, 10)) and all(0 <= r["accuracy"] <= 1 for r in steps)
    assert epochs[1]["val_loss"] == history.history["val_loss"][1] and epochs[2]["loss"] == history.history["loss"][2]


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
    params = trainer.params()
    cases = [
        (dict(epochs=0), toolkit.ShapeError, "epochs must be an int >= 1"),
        (dict(batch_size=2.5), toolkit.ShapeError, "batch_size must be an int >= 1"),
        (dict(verbose=3), ValueError, "verbose must be one of"),
        (dict(callbacks=[print]), TypeError, "callbacks must be toolkit.callbacks.Callback"),
        (dict(validation_data=(VX,)), ValueError, "validation_data must be a pair"),
        (dict(validation_data=(VX, VY), metrics=["top9"]), ValueError, "unknown metric 'top9'"),
        (dict(metrics=["accuracy", "accuracy"]), ValueError, "metric names must be unique"),
        (dict(callbacks=[toolkit.callbacks.EarlyStopping(monitor="val_loss")]), KeyError, "monitors 'val_loss'"),
    ]
    for options, error, words in cases:
        with pytest.raises(error, match=words):
            trainer.fit(X, Y, **{"verbose": 0, **options})
    assert trainer.step_count == 0 and max_abs_diff(trainer.params(), params) == 0.0
    with pytest.raises(ValueError, match="every_epochs or every_steps"):
        toolkit.callbacks.ModelCheckpoint("x.npz", every_epochs=1, every_steps=1)
    with pytest.raises(ValueError, match="patience must be an int >= 0"):
        toolkit.callbacks.EarlyStopping(patience=-1)


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
    if not fused:
        trainer._fused_steps = None
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
