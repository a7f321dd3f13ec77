"""Keras' callbacks in the toolkit's ``fit``, as they are: Keras' own and users' ``keras.callbacks.Callback``
subclasses, called with Keras' hooks, logs and ``params`` in Keras' order (:mod:`toolkit.training.callback`), their
``self.model`` a :class:`TrainerView` of the trainer.

What works as in Keras' ``fit``: ``EarlyStopping`` (its ``restore_best_weights`` through :meth:`TrainerView.get_weights`
and :meth:`~TrainerView.set_weights`; ``mode="auto"`` on a metric other than a loss needs ``mode`` given, as the
view has no Keras metric objects for Keras to read the direction from: Keras says so with its own error),
``CSVLogger``, ``TerminateOnNaN`` (it stops after the batch whose loss is not finite, which the trainer reaches
only with ``nan_policy="skip"``: the default ``"raise"`` stops the fit at that step itself, with a
:class:`~toolkit.NonFiniteError`), ``LambdaCallback`` (its evaluate and predict hooks refused, as below),
``RemoteMonitor``, and a user's subclass using the hooks and the view. Keras' ``fit`` does not call
``on_train_end`` when the fit raises; neither does the toolkit's, for a Keras callback. The callbacks that need
what the trainer does not have yet are refused by name before any step, with what to use instead (:data:`REFUSED`),
and so is a callback that overrides a hook of ``evaluate`` or ``predict`` (``on_test_*``, ``on_predict_*``),
which the toolkit's ``fit`` does not call.

Nothing here imports Keras: the objects given are Keras', so Keras is already imported.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from toolkit.errors import ArgumentTypeError, KerasCallbackError, ParamsError
from toolkit.training.callback import Callback

_SCHEDULE = ("give the optimizer a learning-rate schedule (toolkit.optim.schedules: ExponentialDecay, "
             "PiecewiseConstantDecay, CosineDecay): the toolkit compiles the learning rate into every step, where a "
             "change during the fit cannot reach it yet")
_SAVE = ("use toolkit.callbacks.ModelCheckpoint (monitor, mode, save_best_only as Keras'; the trainer's checkpoints: "
         "trainer.restore or toolkit.checkpoint.load_checkpoint read them; toolkit.to_keras writes trained weights "
         "into a Keras model)")
#: The Keras callbacks ``fit`` refuses, by their name in ``keras.callbacks``, with what to use instead.
REFUSED = {
    "ModelCheckpoint": _SAVE,
    "OrbaxCheckpoint": _SAVE,
    "BackupAndRestore": "use toolkit.callbacks.BackupAndRestore (it resumes a fit at the step it was interrupted at)",
    "TensorBoard": "use toolkit.callbacks.CSVLogger or JSONLinesLogger (no TensorBoard writer yet)",
    "ReduceLROnPlateau": _SCHEDULE,
    "LearningRateScheduler": _SCHEDULE,
    "SwapEMAWeights": "the toolkit's optimizers keep no moving average of the weights",
    "ProgbarLogger": "fit's own progress bar is verbose=1",
    "History": "fit returns its History (toolkit.training.loop.History: .history and .epoch, as Keras')",
}
#: The hooks of Keras' ``evaluate`` and ``predict``: the toolkit's ``fit`` does not call them yet.
UNCALLED = ("on_test_begin", "on_test_end", "on_test_batch_begin", "on_test_batch_end", "on_predict_begin",
            "on_predict_end", "on_predict_batch_begin", "on_predict_batch_end")


def _refusal(callback: Any) -> str | None:
    """Why ``callback`` (a Keras callback) cannot run in the toolkit's fit, or None."""
    keras = sys.modules["keras"]
    for name, instead in REFUSED.items():
        kind = getattr(keras.callbacks, name, None)
        if kind is not None and isinstance(callback, kind):
            return f"keras.callbacks.{name} is not supported in the toolkit's fit: {instead}"
    base = keras.callbacks.Callback
    # a subclass's own hook, or one set on the instance (LambdaCallback's on_test_end=...)
    overridden = [hook for hook in UNCALLED
                  if getattr(type(callback), hook) is not getattr(base, hook) or hook in vars(callback)]
    if overridden:
        return (f"{type(callback).__name__} overrides {', '.join(overridden)}, which the toolkit's fit does not call "
                f"(its validation runs no test hooks); move that work to on_epoch_end, whose logs hold the val_* "
                f"values")
    return None


class TrainerView:
    """What ``self.model`` is to a Keras callback in the toolkit's ``fit``: the trainer, answering what Keras'
    callbacks ask a model for. Anything else, read or assigned, raises a :class:`~toolkit.KerasCallbackError`
    naming it (an ``AttributeError`` too, so ``hasattr`` says False, as Keras' callbacks probe with it).

    Attributes:
        stop_training: set it to True to end the fit after the current batch's epoch, as in Keras.
        trainer: the trainer itself.
        optimizer: a view of the trainer's optimizer (:class:`OptimizerView`).

    Args:
        trainer: the trainer being fitted.
    """

    _NAMES = ("stop_training", "trainer", "optimizer", "get_weights", "set_weights")

    def __init__(self, trainer: Any) -> None:
        object.__setattr__(self, "trainer", trainer)
        object.__setattr__(self, "_stop", False)

    @property
    def stop_training(self) -> bool:
        """Whether a Keras callback asked the fit to stop."""
        return self._stop

    @stop_training.setter
    def stop_training(self, value: Any) -> None:
        if not isinstance(value, (bool, np.bool_)):
            raise ArgumentTypeError(f"model.stop_training must be True or False, got {value!r}")
        object.__setattr__(self, "_stop", bool(value))

    @property
    def optimizer(self) -> OptimizerView:
        """The trainer's optimizer, as Keras' callbacks read one."""
        return OptimizerView(self.trainer)

    def get_weights(self) -> list[np.ndarray]:
        """Copies of the trainer's parameters, then its model state, in the order of ``trainer.params()`` and
        ``trainer.state()`` (for an imported Keras model with no model state, Keras' order of ``get_weights``).

        Returns:
            NumPy arrays.
        """
        return [np.array(value) for value in (*self.trainer.params().values(), *self.trainer.state().values())]

    def set_weights(self, weights: Any) -> None:
        """Write ``weights`` (as :meth:`get_weights` gives them) into the trainer on every device.

        Args:
            weights: one array per parameter, then per model state entry.

        Raises:
            ParamsError: a number of arrays or a shape that differs from :meth:`get_weights`'; DTypeError,
                NonFiniteError: values that are not finite numbers. Nothing is written.
        """
        owner = self.trainer.training_state
        names = [*owner.params, *owner.model_state]
        weights = list(weights)
        if len(weights) != len(names):
            raise ParamsError(f"model.set_weights needs {len(names)} arrays (the parameters, then the model state, "
                              f"as get_weights gives them), got {len(weights)}")
        values = dict(zip(names, weights))
        dtype = self.trainer.dtype
        params = owner.checked(owner.params, {name: values[name] for name in owner.params}, "model.set_weights",
                               dtype)
        state = owner.checked(owner.model_state, {name: values[name] for name in owner.model_state},
                              "model.set_weights", dtype)
        owner.commit(params=params, model_state=state)  # both or neither

    def __getattr__(self, name: str) -> Any:
        raise KerasCallbackError(f"a Keras callback asked its model for {name!r}, which the toolkit's view of the "
                                 f"trainer does not have; it has {', '.join(self._NAMES)} (self.model.trainer is "
                                 f"the trainer itself)")

    def __setattr__(self, name: str, value: Any) -> None:
        if name != "stop_training":
            raise KerasCallbackError(f"a Keras callback set model.{name}, which the toolkit's view of the trainer "
                                     f"does not take; only model.stop_training can be set")
        TrainerView.stop_training.fset(self, value)


class OptimizerView:
    """``self.model.optimizer`` for a Keras callback: its ``learning_rate`` (read only) and ``iterations``.

    Args:
        trainer: the trainer whose optimizer it shows.
    """

    def __init__(self, trainer: Any) -> None:
        object.__setattr__(self, "_trainer", trainer)

    @property
    def iterations(self) -> int:
        """The updates done: the trainer's ``step_count`` (Keras' ``optimizer.iterations``)."""
        return self._trainer.step_count

    @property
    def learning_rate(self) -> float:
        """The optimizer's constant learning rate.

        Raises:
            KerasCallbackError: the rate is a schedule, which the trainer evaluates only inside its steps.
        """
        lr = self._trainer.optimizer.lr
        if not isinstance(lr, (int, float)):
            raise KerasCallbackError(_scheduled(lr))
        return float(lr)

    def __getattr__(self, name: str) -> Any:
        if name == "learning_rate":  # the property raised: Python asks here next, and the reason is the schedule
            raise KerasCallbackError(_scheduled(self._trainer.optimizer.lr))
        raise KerasCallbackError(f"a Keras callback asked model.optimizer for {name!r}, which the toolkit's view of "
                                 f"the optimizer does not have; it has learning_rate and iterations")

    def __setattr__(self, name: str, value: Any) -> None:
        hint = f"; {_SCHEDULE}" if name in ("learning_rate", "lr") else ""
        raise KerasCallbackError(f"a Keras callback set model.optimizer.{name} = {value!r}, which the toolkit's "
                                 f"view of the optimizer does not take{hint}")


def _scheduled(lr: Any) -> str:
    return (f"model.optimizer.learning_rate is the schedule {lr!r}, which the trainer evaluates only inside its "
            f"compiled steps")


class KerasCallback(Callback):
    """A Keras callback called by the toolkit's ``fit`` with Keras' hooks and logs (each callback's logs its own
    copy, where Keras hands one dict to every callback: what one writes into them reaches no other).

    Args:
        callback: a ``keras.callbacks.Callback``.

    Raises:
        ArgumentTypeError: a callback of :data:`REFUSED`, or one overriding a hook of :data:`UNCALLED`.
    """

    def __init__(self, callback: Any) -> None:
        reason = _refusal(callback)
        if reason is not None:
            raise ArgumentTypeError(reason)
        self.callback, self.view = callback, None

    def start(self, view: TrainerView, params: dict) -> None:
        """Give the callback the fit's model view and Keras' ``params``.

        Args:
            view: the fit's view of the trainer (one for all its Keras callbacks).
            params: Keras' ``{"epochs", "steps", "verbose"}``.
        """
        self.view = view
        self.callback.set_model(view)
        self.callback.set_params(dict(params))

    @property
    def stop_training(self) -> bool:
        """Whether the callback set ``self.model.stop_training``."""
        return self.view is not None and self.view.stop_training

    def on_train_begin(self, logs=None):
        self.callback.on_train_begin({})

    def on_epoch_begin(self, epoch, logs=None):
        self.callback.on_epoch_begin(epoch, {})

    def on_train_batch_begin(self, batch, logs=None):
        self.callback.on_train_batch_begin(batch, {})

    def on_train_batch_end(self, batch, logs):
        self.callback.on_train_batch_end(batch, _keras_logs(logs))

    def on_epoch_end(self, epoch, logs):
        self.callback.on_epoch_end(epoch, _keras_logs(logs))

    def end(self, logs: dict | None, failed: bool) -> None:
        """The end of the fit: ``on_train_end`` with the last epoch's logs, unless the fit failed (Keras' fit
        calls no ``on_train_end`` then).

        Args:
            logs: the last epoch's own logs, or None where no epoch ran.
            failed: whether the fit raised.
        """
        if not failed:
            self.callback.on_train_end(None if logs is None else _keras_logs(logs))


def _keras_logs(logs: dict) -> dict:
    """Logs as Keras' callback list hands them over: floats, in the order of their names."""
    return {name: float(value) for name, value in sorted(logs.items())}


__all__ = ["REFUSED", "UNCALLED", "KerasCallback", "OptimizerView", "TrainerView"]
