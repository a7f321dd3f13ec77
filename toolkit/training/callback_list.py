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

    def __init__(self, given: Sequence[Any]) -> None:
        self._callbacks = [_admitted(callback) for callback in given]
        self._keras = {id(callback) for callback, original in zip(self._callbacks, given) if callback is not original}

    def check_logs(self, names: list[str]) -> None:
        for callback in self._callbacks:
            callback.check_logs(names)

    def train_begin(self, trainer: Any, params: dict) -> None:
        """Give each callback the trainer and Keras' ``params``, clear its stop flag, and begin."""
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
        for callback in self._callbacks:
            callback.on_epoch_begin(epoch)

    def batch_begin(self, batch: int) -> None:
        for callback in self._callbacks:
            callback.on_train_batch_begin(batch)

    def batch_end(self, batch: int, step: int, step_logs: dict, running: dict) -> None:
        """After a step: each callback's :meth:`~Callback.on_step_end` with the step's own logs, then each one's
        ``on_train_batch_end`` with the epoch's running means (Keras' batch logs)."""
        for callback in self._callbacks:
            callback.on_step_end(step, step_logs)
        for callback in self._callbacks:
            callback.on_train_batch_end(batch, dict(running))

    def epoch_end(self, epoch: int, logs: dict) -> None:
        for callback in self._callbacks:
            callback.on_epoch_end(epoch, logs)

    @property
    def stop_training(self) -> bool:
        """Whether a callback asked the fit to stop (read after every batch and epoch, as Keras reads it)."""
        return any(callback.stop_training for callback in self._callbacks)

    def train_end(self, logs: dict | None) -> None:
        for callback in self._callbacks:
            callback.on_train_end(logs)


__all__ = ["Callbacks"]
