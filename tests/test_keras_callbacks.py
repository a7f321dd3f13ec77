"""Keras' callbacks in the toolkit's fit, as they are (issue 47): each run equals Keras' own fit with the same
callbacks (the hooks called, their order, indices and logs, the stop, the restored weights, the CSV file), float64
within 1e-10; the Keras callbacks the fit cannot run yet are refused by name before any step; the model view
answers what Keras' callbacks ask and names what it does not have."""

from __future__ import annotations

import csv
import importlib.util

import numpy as np
import pytest

import toolkit
from toolkit.keras.callbacks import REFUSED, TrainerView

pytestmark = pytest.mark.skipif(importlib.util.find_spec("keras") is None
                                or importlib.util.find_spec("tensorflow") is None,
                                reason='needs keras on TensorFlow (pip install "multigpu-toolkit[tensorflow]")')

#: A learning rate exact in float32, as Keras on TensorFlow may round one there.
LR = 2.0 ** -4
#: float64 agreement with Keras on TensorFlow: the same formulas, summed in possibly different orders.
TOLERANCE = 1e-10
#: 4 batches an epoch.
EXAMPLES, BATCH = 16, 4
#: Where the recording callback sets stop_training: epoch 1, after its batch 1 (the epoch ends there, validated).
STOP_AT = (1, 1)
#: The batch whose targets overflow the loss to Inf (TerminateOnNaN's case).
OVERFLOW_BATCH = 2

RNG = np.random.default_rng(47)
X, Y = RNG.normal(size=(EXAMPLES, 3)), RNG.normal(size=(EXAMPLES, 1))
VX, VY = RNG.normal(size=(8, 3)), RNG.normal(size=(8, 1))
#: Y with the rows of batch OVERFLOW_BATCH so large that their squared error is Inf (finite: the fit takes them).
Y_OVERFLOW = Y.copy()
Y_OVERFLOW[OVERFLOW_BATCH * BATCH:(OVERFLOW_BATCH + 1) * BATCH] *= 1e200


def _model(keras):
    keras.utils.set_random_seed(47)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(LR), "mse")
    return model


def _recorder(keras):
    """A user's Keras callback recording every training hook with its index and logs, and stopping at STOP_AT."""

    class Recorder(keras.callbacks.Callback):
        def __init__(self, stop: bool):
            super().__init__()
            self.events, self.stop, self.epoch = [], stop, None

        def on_train_begin(self, logs=None):
            self.events.append(("train_begin", self.params, logs))

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch
            self.events.append(("epoch_begin", epoch, logs))

        def on_train_batch_begin(self, batch, logs=None):
            self.events.append(("batch_begin", batch, logs))

        def on_train_batch_end(self, batch, logs=None):
            self.events.append(("batch_end", batch, logs))
            if self.stop and (self.epoch, batch) == STOP_AT:
                self.model.stop_training = True

        def on_epoch_end(self, epoch, logs=None):
            self.events.append(("epoch_end", epoch, logs))

        def on_train_end(self, logs=None):
            self.events.append(("train_end", None, logs))

    return Recorder


def _callbacks(keras, path, case: str) -> list:
    recorder = _recorder(keras)(stop=case == "stopped")
    if case == "stopped":
        # no epoch improves by 1000: the stop at epoch 1, and epoch 0's weights restored
        seen = []  # what a LambdaCallback records
        lambdas = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: seen.append((epoch, logs)),
                                                 on_train_end=lambda logs: seen.append(("end", logs)))
        lambdas.seen = seen
        return [recorder, keras.callbacks.CSVLogger(str(path)),
                keras.callbacks.EarlyStopping(monitor="val_loss", min_delta=1e3, patience=1,
                                              restore_best_weights=True), lambdas]
    return [recorder, keras.callbacks.TerminateOnNaN()]


#: What each case fits on: the targets, epochs and validation data.
CASES = {"stopped": (Y, 3, (VX, VY)), "overflow": (Y_OVERFLOW, 2, None)}
_KERAS_RUNS: dict = {}


def _keras_run(keras, tmp_path_factory, case: str) -> tuple:
    """Keras' own fit of each case, once per process: the callbacks and the weights after it."""
    if case not in _KERAS_RUNS:
        model, (y, epochs, validation) = _model(keras), CASES[case]
        callbacks = _callbacks(keras, tmp_path_factory.mktemp("keras") / "log.csv", case)
        model.fit(X, y, batch_size=BATCH, epochs=epochs, shuffle=False, verbose=0, validation_data=validation,
                  callbacks=callbacks)
        _KERAS_RUNS[case] = callbacks, [np.array(w) for w in model.get_weights()]
    return _KERAS_RUNS[case]


def _same_logs(mine, theirs, where) -> None:
    if not isinstance(theirs, dict):
        assert mine == theirs, where
        return
    assert list(mine) == list(theirs), where
    np.testing.assert_allclose(list(mine.values()), list(theirs.values()), rtol=0, atol=TOLERANCE, err_msg=where)


def _csv_rows(path) -> list[dict]:
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def test_keras_callbacks_run_as_in_keras_fit(keras, backend, tmp_path, tmp_path_factory):
    """A user's callback sees the hooks, indices, params and logs (the batches' running means, the epochs' with
    val_loss) that Keras' fit shows it, and so does a LambdaCallback; its stop_training in a batch hook ends that epoch
    after the batch, validated; EarlyStopping stops at the epoch Keras' stops at and restores the same weights;
    CSVLogger writes Keras' rows; TerminateOnNaN stops after the batch whose loss is Inf (nan_policy="skip": the trainer
    skips that update, which Keras applies), on two devices."""
    model = _model(keras)
    trainer = toolkit.DataParallel(toolkit.from_keras(model), backend, 2, toolkit.optim.SGD(LR), dtype="float64",
                                   nan_policy="skip")
    start = trainer.params()
    for case, (y, epochs, validation) in CASES.items():
        trainer.set_params(start)
        expected, weights = _keras_run(keras, tmp_path_factory, case)
        callbacks = _callbacks(keras, tmp_path / "log.csv", case)
        trainer.fit(X, y, batch_size=BATCH, epochs=epochs, initial_epoch=0, shuffle=False, verbose=0,
                    validation_data=validation, callbacks=callbacks)
        mine, theirs = callbacks[0].events, expected[0].events
        assert [event[:2] for event in mine] == [event[:2] for event in theirs], case
        for event, keras_event in zip(mine, theirs):
            _same_logs(event[2], keras_event[2], f"{case}: {event[:2]}")
        if case == "stopped":
            assert callbacks[2].stopped_epoch == expected[2].stopped_epoch == 1
            assert [when for when, _ in callbacks[3].seen] == [when for when, _ in expected[3].seen] == [0, 1, "end"]
            for (when, logs), (_, keras_logs) in zip(callbacks[3].seen, expected[3].seen):
                _same_logs(logs, keras_logs, f"LambdaCallback {when}")
            np.testing.assert_allclose(np.concatenate([w.ravel() for w in TrainerView(trainer).get_weights()]),
                                       np.concatenate([w.ravel() for w in weights]), rtol=0, atol=TOLERANCE)
            rows, keras_rows = _csv_rows(tmp_path / "log.csv"), _csv_rows(expected[1].filename)
            assert [list(row) for row in rows] == [list(row) for row in keras_rows] == [["epoch", "loss",
                                                                                          "val_loss"]] * 2
            np.testing.assert_allclose([[float(v) for v in row.values()] for row in rows],
                                       [[float(v) for v in row.values()] for row in keras_rows], rtol=0,
                                       atol=TOLERANCE)
        else:
            assert mine[-3][:2] == ("batch_end", OVERFLOW_BATCH) and mine[-2][:2] == ("epoch_end", 0)
            assert trainer.skipped_steps == 1
            # Keras applied that step's update (its gradient is finite: weights near 1e198), the trainer skipped it
            assert np.isinf(mine[-2][2]["loss"]) and np.abs(weights[0]).max() > 1e100
            assert max(np.abs(w).max() for w in TrainerView(trainer).get_weights()) < 10
            # the toolkit's TerminateOnNaN stops where Keras' does, or raises at that batch
            trainer.set_params(start)
            callbacks = [_recorder(keras)(stop=False), toolkit.callbacks.TerminateOnNaN()]
            trainer.fit(X, y, batch_size=BATCH, epochs=epochs, initial_epoch=0, shuffle=False, verbose=0,
                        callbacks=callbacks)
            assert [event[:2] for event in callbacks[0].events] == [event[:2] for event in theirs]
            assert trainer.skipped_steps == 2
            with pytest.raises(toolkit.NonFiniteError, match=f"NaN or Inf loss encountered at batch {OVERFLOW_BATCH}"):
                trainer.fit(X, y, batch_size=BATCH, epochs=epochs, initial_epoch=0, shuffle=False, verbose=0,
                            callbacks=[toolkit.callbacks.TerminateOnNaN(raise_error=True)])
            assert trainer.skipped_steps == 3


def test_keras_callbacks_the_fit_cannot_run_are_refused_by_name(keras, backend, tmp_path):
    """Each callback of REFUSED, and a subclass overriding a hook of evaluate, is refused before any step with a
    typed error naming it and what to use instead."""
    trainer = toolkit.DataParallel(toolkit.from_keras(_model(keras)), backend, 1, toolkit.optim.SGD(LR),
                                   dtype="float64")
    made = {"ModelCheckpoint": lambda: keras.callbacks.ModelCheckpoint(str(tmp_path / "m.keras")),
            "BackupAndRestore": lambda: keras.callbacks.BackupAndRestore(str(tmp_path / "backup")),
            "TensorBoard": lambda: keras.callbacks.TensorBoard(str(tmp_path / "logs")),
            "ReduceLROnPlateau": keras.callbacks.ReduceLROnPlateau,
            "LearningRateScheduler": lambda: keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr),
            "SwapEMAWeights": keras.callbacks.SwapEMAWeights,
            "ProgbarLogger": keras.callbacks.ProgbarLogger, "History": keras.callbacks.History}
    assert set(made) == set(REFUSED) - {"OrbaxCheckpoint"}  # Orbax needs a package of its own

    class Scores(keras.callbacks.Callback):
        def on_test_batch_end(self, batch, logs=None):
            pass

    cases = [(name, make(), f"keras.callbacks.{name} is not supported") for name, make in made.items()]
    cases.append(("Scores", Scores(), "Scores overrides on_test_batch_end, which the toolkit's fit does not call"))
    cases.append(("LambdaCallback", keras.callbacks.LambdaCallback(on_test_end=print),
                  "LambdaCallback overrides on_test_end"))
    for name, callback, words in cases:
        with pytest.raises(toolkit.ArgumentTypeError, match=words) as raised:
            trainer.fit(X, Y, batch_size=BATCH, verbose=0, callbacks=[callback])
        assert REFUSED.get(name, "on_epoch_end")[:30] in str(raised.value)
    with pytest.raises(toolkit.ArgumentTypeError, match="toolkit.callbacks.Callback or keras.callbacks.Callback "
                                                        "objects, got str"):
        trainer.fit(X, Y, verbose=0, callbacks=["EarlyStopping"])
    assert trainer.step_count == 0


def test_the_model_view_answers_what_keras_callbacks_ask(keras, backend):
    """get_weights/set_weights in the trainer's order (Keras' for this model), checked; the optimizer's rate and
    iterations; anything else read or set a KerasCallbackError naming it (hasattr False, as Keras probes)."""
    model = _model(keras)
    trainer = toolkit.DataParallel(toolkit.from_keras(model), backend, 1, toolkit.optim.SGD(LR), dtype="float64")
    view = TrainerView(trainer)
    weights = view.get_weights()
    assert [w.shape for w in weights] == [w.shape for w in model.get_weights()]
    assert all(np.array_equal(mine, theirs) for mine, theirs in zip(weights, model.get_weights()))
    view.set_weights([2 * w for w in weights])
    assert all(np.array_equal(mine, 2 * w) for mine, w in zip(view.get_weights(), weights))
    for wrong, words in [(weights[:-1], "needs 4 arrays"), ([w.T for w in weights], "expected shape")]:
        with pytest.raises(toolkit.ParamsError, match=words):
            view.set_weights(wrong)
    assert all(np.array_equal(mine, 2 * w) for mine, w in zip(view.get_weights(), weights))
    assert (view.optimizer.learning_rate, view.optimizer.iterations, view.trainer) == (LR, 0, trainer)
    assert not hasattr(view, "metrics")
    with pytest.raises(toolkit.KerasCallbackError, match="'save_weights', which the toolkit's view"):
        view.save_weights("w.weights.h5")
    with pytest.raises(toolkit.KerasCallbackError, match="set model.history"):
        view.history = None
    with pytest.raises(toolkit.KerasCallbackError, match="learning_rate = 0.1.*toolkit.optim.schedules"):
        view.optimizer.learning_rate = 0.1
    with pytest.raises(toolkit.ArgumentTypeError, match="stop_training must be True or False, got 'yes'"):
        view.stop_training = "yes"
    with pytest.raises(toolkit.NonFiniteError):  # a NaN in the last array: the parameters before it not written
        view.set_weights([*weights[:-1], np.full_like(weights[-1], np.nan)])
    assert all(np.array_equal(mine, 2 * w) for mine, w in zip(view.get_weights(), weights))
    scheduled = toolkit.DataParallel(toolkit.from_keras(model), backend, 1, toolkit.optim.SGD(
        toolkit.optim.schedules.ExponentialDecay(LR, 10, 0.5)), dtype="float64")
    with pytest.raises(toolkit.KerasCallbackError, match="learning_rate is the schedule ExponentialDecay"):
        TrainerView(scheduled).optimizer.learning_rate  # noqa: B018 (the read raises)
