"""Callbacks for ``trainer.fit``, with Keras' names and meanings: a user's own (:class:`Callback`), early stopping,
checkpoints every N epochs or steps (atomic, the last K kept), and logs of the epochs: CSV, or JSON lines (also of
every step)."""

from __future__ import annotations

import csv
import json
import math
import os
import time
from pathlib import Path
from typing import Any


class Callback:
    """Hooks ``fit`` calls. ``logs`` holds the epoch's ``loss`` (and ``val_*`` entries with validation data) or the
    step's ``loss``. ``self.trainer`` is the trainer being fitted; setting ``self.stop_training = True`` ends
    ``fit`` after the current epoch."""

    trainer: Any = None
    stop_training: bool = False

    def check_logs(self, names: list[str]) -> None:
        """Called before any step with the names each epoch's logs will hold: raise here to refuse a fit that
        would fail later (nothing has been trained yet)."""

    def on_train_begin(self, logs: dict | None = None) -> None: """Before the first epoch."""
    def on_train_end(self, logs: dict | None = None) -> None: """After the last epoch (also when stopped early)."""
    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None: """Before epoch ``epoch`` (0-based)."""
    def on_epoch_end(self, epoch: int, logs: dict) -> None: """After an epoch and its validation."""
    def on_step_end(self, step: int, logs: dict) -> None:
        """After each step; ``step`` is ``trainer.step_count``, ``logs`` that step's own ``loss`` and metrics (the
        epoch's running means are what the progress bar shows)."""


def _positive_int(what: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be an int >= 1, got {value!r}")
    return value


class EarlyStopping(Callback):
    """Stop when ``monitor`` has not improved by more than ``min_delta`` for ``patience`` epochs (Keras'
    ``EarlyStopping``). ``mode`` "min", "max" or "auto" (max for names containing "acc", else min). With
    ``restore_best_weights`` the parameters and model state of the best epoch are put back at the end."""

    def __init__(self, monitor: str = "val_loss", min_delta: float = 0.0, patience: int = 0, mode: str = "auto",
                 restore_best_weights: bool = False) -> None:
        if mode not in ("auto", "min", "max"):
            raise ValueError(f"EarlyStopping mode must be 'auto', 'min' or 'max', got {mode!r}")
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 0:
            raise ValueError(f"EarlyStopping patience must be an int >= 0, got {patience!r}")
        self.monitor, self.min_delta, self.patience = monitor, abs(float(min_delta)), patience
        self.mode = ("max" if "acc" in monitor else "min") if mode == "auto" else mode
        self.restore_best_weights = restore_best_weights
        self.best, self.wait, self.stopped_epoch, self._best_values = None, 0, None, None

    def on_train_begin(self, logs=None):
        self.best, self.wait, self.stopped_epoch, self._best_values = None, 0, None, None

    def check_logs(self, names):
        if self.monitor not in names:
            raise KeyError(f"EarlyStopping monitors {self.monitor!r}, which this fit does not log; it logs "
                           f"{sorted(names)} (val_* entries need validation_data)")

    def on_epoch_end(self, epoch, logs):
        value = float(logs[self.monitor])
        sign = 1.0 if self.mode == "min" else -1.0
        if self.best is None or sign * (self.best - value) > self.min_delta:
            self.best, self.wait = value, 0
            if self.restore_best_weights:
                self._best_values = (self.trainer.params(), self.trainer.state())
            return
        self.wait += 1
        if self.wait > self.patience:
            self.stopped_epoch, self.stop_training = epoch, True

    def on_train_end(self, logs=None):
        if self.restore_best_weights and self._best_values is not None and self.stopped_epoch is not None:
            params, state = self._best_values
            self.trainer.set_params(params)
            if state:
                self.trainer.set_state(state)


class ModelCheckpoint(Callback):
    """Save the trainer (``trainer.save``: atomic, with optimizer and model state and the RNG) every
    ``every_epochs`` epochs, or every ``every_steps`` steps, to ``filepath`` formatted with ``epoch`` (1-based) and
    ``step`` (for example ``"ckpt/{epoch:03d}.npz"``), keeping the last ``keep`` files this callback wrote."""

    def __init__(self, filepath: str | os.PathLike, every_epochs: int | None = 1, every_steps: int | None = None,
                 keep: int | None = None) -> None:
        if (every_epochs is None) == (every_steps is None):
            raise ValueError("ModelCheckpoint takes every_epochs or every_steps (one of them)")
        self.every_epochs = None if every_epochs is None else _positive_int("every_epochs", every_epochs)
        self.every_steps = None if every_steps is None else _positive_int("every_steps", every_steps)
        self.keep = None if keep is None else _positive_int("keep", keep)
        self.filepath, self.written = str(filepath), []
        self._epoch = 0

    def _save(self, epoch: int, step: int) -> None:
        path = Path(self.filepath.format(epoch=epoch, step=step))
        path.parent.mkdir(parents=True, exist_ok=True)
        self.trainer.save(path)
        if path in self.written:
            self.written.remove(path)
        self.written.append(path)
        while self.keep is not None and len(self.written) > self.keep:
            self.written.pop(0).unlink(missing_ok=True)

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch + 1

    def on_step_end(self, step, logs):
        if self.every_steps is not None and step % self.every_steps == 0:
            self._save(self._epoch, step)

    def on_epoch_end(self, epoch, logs):
        if self.every_epochs is not None and (epoch + 1) % self.every_epochs == 0:
            self._save(epoch + 1, self.trainer.step_count)


class CSVLogger(Callback):
    """One CSV row per epoch: ``epoch`` (0-based, as Keras) and every logged value, written as each epoch ends."""

    def __init__(self, filename: str | os.PathLike, append: bool = False) -> None:
        self.filename, self.append = Path(filename), append
        self._file, self._writer = None, None

    def on_train_begin(self, logs=None):
        exists = self.append and self.filename.exists() and self.filename.stat().st_size > 0
        self._file = self.filename.open("a" if self.append else "w", newline="")
        self._writer, self._header = None, exists

    def on_epoch_end(self, epoch, logs):
        row = {"epoch": epoch, **{k: ("nan" if math.isnan(v) else repr(float(v))) for k, v in logs.items()}}
        if self._writer is None:
            self._writer = csv.DictWriter(self._file, fieldnames=list(row))
            if not self._header:
                self._writer.writeheader()
        self._writer.writerow(row)
        self._file.flush()

    def on_train_end(self, logs=None):
        if self._file is not None:
            self._file.close()
            self._file = None


class JSONLinesLogger(Callback):
    """One JSON object per line, written and flushed as each epoch ends: ``{"epoch": 0-based, "step":
    trainer.step_count, "seconds": since fit began, **logs}``; with ``steps=True`` also one per step, ``{"step",
    "seconds", "loss"}``. A non-finite value is written as null (JSON has no NaN). Each process writes the file it
    is given (the logs are the same in every process)."""

    def __init__(self, filename: str | os.PathLike, append: bool = False, steps: bool = False) -> None:
        self.filename, self.append, self.steps = Path(filename), append, bool(steps)
        self._file, self._started = None, 0.0

    def _write(self, record: dict) -> None:
        record = {k: v if not isinstance(v, float) or math.isfinite(v) else None for k, v in record.items()}
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()

    def on_train_begin(self, logs=None):
        self.filename.parent.mkdir(parents=True, exist_ok=True)
        self._file, self._started = self.filename.open("a" if self.append else "w"), time.perf_counter()

    def on_step_end(self, step, logs):
        if self.steps:
            self._write({"step": step, "seconds": time.perf_counter() - self._started,
                         **{k: float(v) for k, v in logs.items()}})

    def on_epoch_end(self, epoch, logs):
        self._write({"epoch": epoch, "step": self.trainer.step_count, "seconds": time.perf_counter() - self._started,
                     **{k: float(v) for k, v in logs.items()}})

    def on_train_end(self, logs=None):
        if self._file is not None:
            self._file.close()
            self._file = None


__all__ = ["CSVLogger", "Callback", "EarlyStopping", "JSONLinesLogger", "ModelCheckpoint"]
