"""The base class of ``fit``'s callbacks, with Keras' hook names and the order Keras calls them in."""

from __future__ import annotations

from typing import Any


class Callback:
    """The hooks ``fit`` calls, with Keras' names: subclass it and override the ones you need.

    The order, as Keras' ``fit``: :meth:`on_train_begin`; per epoch :meth:`on_epoch_begin`, then per batch
    :meth:`on_train_batch_begin`, the step, :meth:`on_step_end` and :meth:`on_train_batch_end`; then the validation
    and :meth:`on_epoch_end`; :meth:`on_train_end` last. ``stop_training`` is read after every batch and every
    epoch: set in a batch hook, the epoch ends after that batch (its validation and ``on_epoch_end`` still run) and
    the fit after the epoch.

    Attributes:
        trainer: the trainer being fitted, set by ``fit`` before the first hook.
        params: Keras' ``{"epochs": the number after the last epoch, "steps": per epoch, "verbose"}``.
        stop_training: set it to True to end ``fit`` after the current batch's epoch (see above).
    """

    trainer: Any = None
    params: dict = {}
    stop_training: bool = False

    def check_logs(self, names: list[str]) -> None:
        """Called before any step: raise here to refuse a fit that would fail later (nothing has been trained yet).

        Args:
            names: the names each epoch's logs will hold (``loss``, the metrics, ``val_*``).

        Raises:
            ToolkitError: a subclass refuses the fit with a typed error (the built-in callbacks raise
                :class:`~toolkit.ArgumentError`).
        """

    def on_train_begin(self, logs: dict | None = None) -> None:
        """Before the first epoch.

        Args:
            logs: None (Keras' signature).
        """

    def on_train_end(self, logs: dict | None = None) -> None:
        """After the last epoch, also when stopped early; also when the fit failed, with ``logs=None`` (Keras'
        callbacks are not called then, as Keras does not call them).

        Args:
            logs: the last epoch's logs, or None when the fit failed.
        """

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        """Before an epoch.

        Args:
            epoch: the epoch's number, 0-based.
            logs: None (Keras' signature).
        """

    def on_epoch_end(self, epoch: int, logs: dict) -> None:
        """After an epoch and its validation.

        Args:
            epoch: the epoch's number, 0-based.
            logs: the epoch's means of the loss and metrics, and the ``val_*`` values.
        """

    def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        """Before each step (Keras' hook).

        Args:
            batch: the batch's index within its epoch, 0-based.
            logs: None (Keras' signature).
        """

    def on_train_batch_end(self, batch: int, logs: dict) -> None:
        """After each step, as Keras: ``logs`` are the epoch's running means so far (what the progress bar shows).

        Args:
            batch: the batch's index within its epoch, 0-based.
            logs: the means of the loss and metrics over the epoch's batches up to this one.
        """

    def on_step_end(self, step: int, logs: dict) -> None:
        """After each step, before :meth:`on_train_batch_end`, with that step's own values.

        Args:
            step: ``trainer.step_count`` after the step.
            logs: that step's own ``loss`` and metrics.
        """


__all__ = ["Callback"]
