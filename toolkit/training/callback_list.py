"""The callbacks of one ``fit``: the toolkit's own and Keras' (through :mod:`toolkit.keras.callbacks`), called in
the order given, with Keras' hooks in Keras' order."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from toolkit.errors import ArgumentTypeError
from toolkit.training.callback import Callback


def _admitted(callback: Any) -> Callback:
    """``callback`` as fit calls it: a toolkit one as it is, a Keras one wrapped (or refused by name)."""
    if isinstance(callback, Callback):
        return callback
    keras = sys.modules.get("keras")  # a Keras callback exists only where Keras was imported
    if keras is not None and isinstance(callback, keras.callbacks.Callback):
        from toolkit.keras.callbacks import KerasCallback

        return KerasCallback(callback)
    raise ArgumentTypeError(f"callbacks must be toolkit.callbacks.Callback or keras.callbacks.Callback objects, got "
                            f"{type(callback).__name__}")


class Callbacks:
    """What ``fit`` tells its callbacks, each hook to every callback in the order given.

    Args:
        given: :class:`~toolkit.callbacks.Callback` and ``keras.callbacks.Callback`` objects.

    Raises:
        ArgumentTypeError: an object that is neither, or a Keras callback the fit refuses (naming the toolkit's
            equivalent); before anything is called.
    """

    def __init__(self, given: Sequence[Any] | None) -> None:
        self._callbacks = [_admitted(callback) for callback in given or ()]
        self._keras = {id(callback) for callback in self._callbacks if _is_keras(callback)}
        self._last: dict | None = None  # the last epoch's own logs: Keras' on_train_end gets them

    def check_logs(self, names: list[str]) -> None:
        """Let each callback refuse the fit before any step (:meth:`Callback.check_logs`).

        Args:
            names: the names each epoch's logs will hold.
        """
        for callback in self._callbacks:
            callback.check_logs(names)

    def train_begin(self, trainer: Any, params: dict) -> None:
        """Give each callback the trainer and Keras' ``params``, clear its stop flag, and begin.

        Args:
            trainer: the trainer being fitted.
            params: Keras' ``{"epochs", "steps", "verbose"}``.
        """
        self._last = None
        if self._keras:  # Keras' callbacks share one model, as in Keras (its stop_training flag is the fit's)
            from toolkit.keras.callbacks import TrainerView

            view = TrainerView(trainer)
        for callback in self._callbacks:
            if id(callback) in self._keras:
                callback.start(view, params)
            else:
                callback.trainer, callback.stop_training, callback.params = trainer, False, dict(params)
            callback.on_train_begin()

    def epoch_begin(self, epoch: int) -> None:
        """Before an epoch.

        Args:
            epoch: its number, 0-based.
        """
        for callback in self._callbacks:
            callback.on_epoch_begin(epoch)

    def batch_begin(self, batch: int) -> None:
        """Before a step.

        Args:
            batch: the batch's index in its epoch.
        """
        for callback in self._callbacks:
            callback.on_train_batch_begin(batch)

    def batch_end(self, batch: int, step: int, step_logs: dict, running: dict) -> None:
        """After a step: each callback's :meth:`~Callback.on_step_end` with the step's own logs, then each one's
        ``on_train_batch_end`` with the epoch's running means (Keras' batch logs).

        Args:
            batch: the batch's index in its epoch.
            step: the trainer's step count after the step.
            step_logs: the step's own loss and metrics.
            running: the epoch's running means so far.
        """
        for callback in self._callbacks:
            callback.on_step_end(step, step_logs)
        for callback in self._callbacks:
            callback.on_train_batch_end(batch, dict(running))

    def epoch_end(self, epoch: int, logs: dict) -> None:
        """After an epoch and its validation.

        Args:
            epoch: its number, 0-based.
            logs: its loss, metrics and ``val_*`` values.
        """
        self._last = dict(logs)
        for callback in self._callbacks:
            callback.on_epoch_end(epoch, logs)

    @property
    def stop_training(self) -> bool:
        """Whether a callback asked the fit to stop (read after every batch and epoch, as Keras reads it)."""
        return any(callback.stop_training for callback in self._callbacks)

    def train_end(self, logs: dict | None) -> None:
        """After the last epoch, or a failed fit.

        Args:
            logs: the fit's last values of each log (a toolkit callback's), or None when the fit failed: then
                Keras' callbacks are not called, as Keras' fit does not call them; otherwise they get the last
                epoch's own logs (None where no epoch ran), as Keras gives them.
        """
        for callback in self._callbacks:
            if id(callback) in self._keras:
                callback.end(None if logs is None else self._last, failed=logs is None)
            else:
                callback.on_train_end(logs)


def _is_keras(callback: Callback) -> bool:
    module = sys.modules.get("toolkit.keras.callbacks")  # loaded by the first Keras callback wrapped
    return module is not None and isinstance(callback, module.KerasCallback)


__all__ = ["Callbacks"]
