"""Callbacks for ``trainer.fit``, with Keras' names and meanings: early stopping, checkpoints every N epochs or
steps (atomic, the last K kept, or the best only), a backup to resume an interrupted fit from, and the stop at a
loss that is not finite; the logs of the epochs (written in :mod:`toolkit.training.loggers`) and the base class
(:class:`Callback`, a user's own, written in :mod:`toolkit.training.callback`) are given here too, and all are
public in :mod:`toolkit.callbacks`."""

from __future__ import annotations

import contextlib
import math
import os
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from toolkit.errors import ArgumentError, CheckpointError, NonFiniteError
from toolkit.training.callback import Callback
from toolkit.training.checkpoint import load_checkpoint, save_checkpoint, trainer_checkpoint
from toolkit.training.loggers import CSVLogger, JSONLinesLogger


def _number(what: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ArgumentError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def _int(what: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ArgumentError(f"{what} must be an int >= {low}, got {value!r}")
    return value


class _Monitor:
    """What EarlyStopping and ModelCheckpoint watch: a logged value, its direction (``mode``; ``"auto"``: max for
    names containing "acc", else min) and whether a value improves on a reference by more than ``min_delta``
    (Keras' ``MonitorCallback._is_improvement``: the first value always does)."""

    def __init__(self, owner: str, monitor: Any, mode: Any, min_delta: float = 0.0) -> None:
        if not isinstance(monitor, str) or not monitor:
            raise ArgumentError(f"{owner} monitor must be a logged name, got {monitor!r}")
        if mode not in ("auto", "min", "max"):
            raise ArgumentError(f"{owner} mode must be 'auto', 'min' or 'max', got {mode!r}")
        self.owner, self.name, self.min_delta = owner, monitor, min_delta
        self.mode = ("max" if "acc" in monitor else "min") if mode == "auto" else mode

    def check(self, names: list[str]) -> None:
        if self.name not in names:
            raise ArgumentError(f"{self.owner} monitors {self.name!r}, which this fit does not log; it logs "
                                f"{sorted(names)} (val_* entries need validation_data)")

    def improves(self, value: float, reference: float | None) -> bool:
        if reference is None:
            return True
        if self.mode == "min":
            return value + self.min_delta < reference
        return value - self.min_delta > reference


class EarlyStopping(Callback):
    """Stop when ``monitor`` has stopped improving, with Keras 3's rule (``keras.callbacks.EarlyStopping``).

    At the end of each epoch numbered ``start_from_epoch`` or later, the wait grows by one; a value better than the
    best so far by more than ``min_delta`` becomes the best, and resets the wait if it also beats ``baseline``
    (when given). Once the wait reaches ``patience`` (after the first epoch) the fit stops. With
    ``restore_best_weights`` the parameters and model state of the best epoch (or of the first monitored one) are
    put back at the end of training, whether this callback stopped it or the epochs ran out.

    Args:
        monitor: a name the fit logs (``loss``, a metric, ``val_*`` with validation data); checked before the first
            step.
        min_delta: the change below which a value is no improvement (its absolute value is used).
        patience: epochs without improvement before stopping.
        verbose: 0 silent, 1 a line when it stops and when it restores.
        mode: "min", "max", or "auto" (max for names containing "acc", else min).
        baseline: a value to beat for the wait to reset, or None.
        restore_best_weights: put the best epoch's parameters and model state back at the end.
        start_from_epoch: the first epoch number that is monitored (a warm-up before it).

    Raises:
        ArgumentError: a bad argument (``monitor`` not a string, a negative ``patience``, an unknown ``mode``, ...).
    """

    def __init__(self, monitor: str = "val_loss", min_delta: float = 0.0, patience: int = 0, verbose: int = 0,
                 mode: str = "auto", baseline: float | None = None, restore_best_weights: bool = False,
                 start_from_epoch: int = 0) -> None:
        self._monitor = _Monitor("EarlyStopping", monitor, mode, abs(_number("EarlyStopping min_delta", min_delta)))
        if verbose not in (0, 1):
            raise ArgumentError(f"EarlyStopping verbose must be 0 or 1, got {verbose!r}")
        if not isinstance(restore_best_weights, bool):
            raise ArgumentError(f"EarlyStopping restore_best_weights must be True or False, got "
                                f"{restore_best_weights!r}")
        self.monitor, self.min_delta, self.mode = monitor, self._monitor.min_delta, self._monitor.mode
        self.patience = _int("EarlyStopping patience", patience, 0)
        self.start_from_epoch = _int("EarlyStopping start_from_epoch", start_from_epoch, 0)
        self.baseline = None if baseline is None else _number("EarlyStopping baseline", baseline)
        self.verbose, self.restore_best_weights = verbose, restore_best_weights
        self.on_train_begin()

    def on_train_begin(self, logs=None):
        self.best, self.best_epoch, self.wait, self.stopped_epoch, self.best_weights = None, 0, 0, 0, None

    def check_logs(self, names):
        self._monitor.check(names)

    def _improves(self, value: float, reference: float | None) -> bool:
        return self._monitor.improves(value, reference)

    def on_epoch_end(self, epoch, logs):
        if epoch < self.start_from_epoch:
            return
        value = float(logs[self.monitor])
        if self.restore_best_weights and self.best_weights is None:
            self.best_weights, self.best_epoch = (self.trainer.params(), self.trainer.state()), epoch
        self.wait += 1
        if self._improves(value, self.best):
            self.best, self.best_epoch = value, epoch
            if self.restore_best_weights:
                self.best_weights = (self.trainer.params(), self.trainer.state())
            if self.baseline is None or self._improves(value, self.baseline):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch, self.stop_training = epoch, True

    def on_train_end(self, logs=None):
        if logs is None:  # the fit failed: it puts the trainer back itself
            return
        if self.stopped_epoch > 0 and self.verbose:
            print(f"Epoch {self.stopped_epoch + 1}: early stopping")
        if self.restore_best_weights and self.best_weights is not None:
            if self.verbose:
                print(f"Restoring model weights from the end of the best epoch: {self.best_epoch + 1}.")
            params, state = self.best_weights
            self.trainer.set_params(params)
            if state:
                self.trainer.set_state(state)


class ModelCheckpoint(Callback):
    """Save the trainer (``trainer.save``: atomic, with optimizer and model state and the RNG) every
    ``every_epochs`` epochs, or every ``every_steps`` steps, to ``filepath`` formatted with ``epoch`` (1-based, as
    Keras), ``step`` and any value the fit logs (Keras' pattern: ``"ckpt/{epoch:02d}-{val_loss:.2f}.npz"``), keeping
    the last ``keep`` files this callback wrote. A save every ``every_steps`` steps happens mid-epoch, where only the
    step's values (``loss`` and the training metrics) are logged.

    Args:
        filepath: the file of each save, a pattern formatted as above (a folder in it is made when needed).
        every_epochs: save at the end of every this many epochs (None with ``every_steps``).
        every_steps: save after every this many steps (counted by ``trainer.step_count``), instead.
        keep: the number of this callback's latest files kept (None: all).
        monitor: with ``save_best_only``, the logged value that decides (Keras' name and default).
        mode: with ``save_best_only``, "min", "max" or "auto" (max for names containing "acc", else min).
        save_best_only: save at an epoch's end only when ``monitor`` improves on the best so far (the first
            epoch always does, unless ``initial_value_threshold`` is given), as Keras' ``save_best_only``;
            epochs only.
        initial_value_threshold: with ``save_best_only``, the value the first save must beat, or None.

    Raises:
        ArgumentError: both or neither of ``every_epochs`` and ``every_steps``, a count < 1, ``save_best_only``
            with ``every_steps`` (mid-epoch logs are one step's, where Keras' are the epoch's running means), a bad
            ``mode`` or threshold, ``monitor``, ``mode`` or the threshold given without ``save_best_only``; at the
            start of a fit (before any step), a ``filepath`` field or a ``monitor`` (with ``save_best_only``) the
            fit does not log, or a format the values do not take.
    """

    def __init__(self, filepath: str | os.PathLike, every_epochs: int | None = 1, every_steps: int | None = None,
                 keep: int | None = None, *, monitor: str = "val_loss", mode: str = "auto",
                 save_best_only: bool = False, initial_value_threshold: float | None = None) -> None:
        if (every_epochs is None) == (every_steps is None):
            raise ArgumentError(f"ModelCheckpoint takes every_epochs or every_steps (one of them), got every_epochs="
                                f"{every_epochs!r}, every_steps={every_steps!r}")
        if not isinstance(save_best_only, bool):
            raise ArgumentError(f"ModelCheckpoint save_best_only must be True or False, got {save_best_only!r}")
        if save_best_only and every_steps is not None:
            raise ArgumentError("ModelCheckpoint save_best_only saves at epochs' ends only (every_epochs): mid-epoch "
                                "the fit logs one step's values, not the epoch's")
        self._monitor = _Monitor("ModelCheckpoint", monitor, mode)
        unused = {"monitor": monitor != "val_loss", "mode": mode != "auto",
                  "initial_value_threshold": initial_value_threshold is not None}
        if not save_best_only and any(unused.values()):
            raise ArgumentError(f"ModelCheckpoint {', '.join(name for name, given in unused.items() if given)} "
                                f"decide only with save_best_only=True, which was not given")
        self.monitor, self.mode, self.save_best_only = monitor, mode, save_best_only
        self.initial_value_threshold = (None if initial_value_threshold is None else
                                        _number("ModelCheckpoint initial_value_threshold", initial_value_threshold))
        self.best = self.initial_value_threshold
        self.every_epochs = None if every_epochs is None else _int("every_epochs", every_epochs, 1)
        self.every_steps = None if every_steps is None else _int("every_steps", every_steps, 1)
        self.keep = None if keep is None else _int("keep", keep, 1)
        self.filepath, self.written = str(filepath), []
        self._epoch = 0

    def on_train_begin(self, logs=None):
        self.best = self.initial_value_threshold

    def check_logs(self, names):
        if self.save_best_only:
            self._monitor.check(names)
        logged = names if self.every_steps is None else [n for n in names if not n.startswith("val_")]
        try:
            self._path(1, 1, dict.fromkeys(logged, 0.5))
        except (KeyError, AttributeError) as error:
            raise ArgumentError(
                f"ModelCheckpoint filepath {self.filepath!r} names {error}, which is not a value saves get: they get "
                f"epoch, step and {sorted(logged)}"
                + (" (saves every_steps happen mid-epoch: no val_* values)" if self.every_steps else "")) from error
        except (ValueError, TypeError, IndexError) as error:
            raise ArgumentError(f"ModelCheckpoint filepath {self.filepath!r} cannot be formatted with epoch and step "
                                f"(ints) and the logged values (floats): {error}") from error

    def _path(self, epoch: int, step: int, logs: dict) -> Path:
        return Path(self.filepath.format_map({**logs, "epoch": epoch, "step": step}))

    def _save(self, epoch: int, step: int, logs: dict) -> None:
        path = self._path(epoch, step, logs)
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
            self._save(self._epoch, step, logs)

    def on_epoch_end(self, epoch, logs):
        if self.every_epochs is None or (epoch + 1) % self.every_epochs:
            return
        if self.save_best_only:
            if not self._monitor.improves(float(logs[self.monitor]), self.best):
                return
            self.best = float(logs[self.monitor])
        self._save(epoch + 1, self.trainer.step_count, logs)


class BackupAndRestore(Callback):
    """Keras' ``BackupAndRestore``: back the fit up to ``backup_dir`` as it goes, and resume from the backup when
    the same ``fit`` is run again after an interruption (a crash, a SIGKILL, a preempted machine).

    A backup is a trainer checkpoint (parameters, optimizer and model state, counts, RNG) with the fit's progress:
    the epoch, the batches of it done, the RNG state its order was drawn from, its running sums and the history so
    far. A fit that finds one restores it, draws the epoch's order again, skips the batches done and goes on: it ends
    equal, bit for bit, to a fit that was never interrupted, and returns the whole history (Keras returns the
    resumed epochs' only). Backups are written atomically, so the last complete one survives a kill during a save
    (what Keras' ``double_checkpoint`` guards against). EarlyStopping's counters are not backed up, as in Keras.

    Across processes (:func:`toolkit.distributed.initialize`), as Keras' chief-written backups: every process holds
    the same trainer and fit progress, so process 0 alone writes (and at the end deletes) the backup, and every
    process reads it when the fit starts, so ``backup_dir`` must be on a file system they all see. Before any of
    them restores, the processes compare what they found (none, a backup's step and checksum, or an unreadable file)
    and all raise if they differ, rather than resume from different steps.

    Args:
        backup_dir: the folder of the backup (``backup.npz``); give each fit its own.
        save_freq: "epoch" (a backup at the end of every epoch), or an int: a backup every that many steps.
        delete_checkpoint: delete the backup once the fit has finished (not when it failed, so a rerun resumes).

    Raises:
        ArgumentError: an empty ``backup_dir`` or a ``save_freq`` other than "epoch" or an int >= 1.
        CheckpointError: at the start of a fit, a backup that cannot be read or was written by another fit (other
            data, batch size, shuffle, model or optimizer), or processes that found different backups; nothing is
            trained.
    """

    #: The backup's file name in ``backup_dir``.
    FILENAME = "backup.npz"

    def __init__(self, backup_dir: str | os.PathLike, save_freq: str | int = "epoch",
                 delete_checkpoint: bool = True) -> None:
        if not str(backup_dir):
            raise ArgumentError("BackupAndRestore needs a backup_dir, got an empty one")
        if save_freq != "epoch":
            _int("BackupAndRestore save_freq (or 'epoch')", save_freq, 1)
        if not isinstance(delete_checkpoint, bool):
            raise ArgumentError(f"BackupAndRestore delete_checkpoint must be True or False, got {delete_checkpoint!r}")
        self.backup_dir, self.save_freq, self.delete_checkpoint = Path(backup_dir), save_freq, delete_checkpoint
        self.path = self.backup_dir / self.FILENAME
        self._steps = 0

    def on_train_begin(self, logs=None):
        self._steps = 0
        checkpoint, problem, found = None, None, (0, 0, 0)  # found: none, a backup (its step and CRC) or a problem
        try:
            checkpoint = self._read()
            if checkpoint is not None:
                found = (1, checkpoint.step, zlib.crc32(self.path.read_bytes()))
        except CheckpointError as error:  # raised after the other processes learn of it, by all of them
            problem, found = error, (2, 0, 0)
        except (KeyError, TypeError, ValueError) as error:  # a step that is no count: restore would refuse it
            problem, found = CheckpointError(f"{str(self.path)!r} has no valid step: {error!r}"), (2, 0, 0)
        if self.trainer.cluster is not None:
            self._check_processes_agree(found)
        if problem is not None:
            raise problem
        if checkpoint is not None:
            # checked before the trainer changes
            self.trainer.training_state.fit_progress.resume(checkpoint.metadata["fit"])
            self.trainer.restore(checkpoint)

    def _read(self):
        """The backup in ``backup_dir``, or None where there is none."""
        if not self.path.exists():
            return None
        checkpoint = load_checkpoint(self.path)
        if not isinstance(checkpoint.metadata.get("fit"), dict):
            raise CheckpointError(f"{str(self.path)!r} is a checkpoint but no BackupAndRestore backup (it has no "
                                  "fit progress): give BackupAndRestore a folder of its own")
        return checkpoint

    def _check_processes_agree(self, found: tuple) -> None:
        """Every process must resume from the same backup: each one's ``found`` (none, a backup's step and CRC-32,
        or an unreadable file), summed across the job into one table that every process reads, so all of them
        raise alike or none does."""
        cluster = self.trainer.cluster
        table = np.zeros((cluster.num_processes, 3))
        table[cluster.process_id] = found
        table = self.trainer.backend.all_reduce_sum(table.ravel(), "BackupAndRestore's check of the backup")
        table = table.reshape(cluster.num_processes, 3)
        if np.any(table != table[0]):
            words = {0: "none", 1: "the backup of step {:.0f} (CRC-32 {:.0f})", 2: "an unreadable file"}
            raise CheckpointError(
                f"BackupAndRestore: the processes found different backups in {str(self.backup_dir)!r}: "
                + ", ".join(f"process {k}: " + words[int(kind)].format(step, crc)
                            for k, (kind, step, crc) in enumerate(table))
                + "; process 0 writes the backup and every process reads it, so backup_dir must be on a file "
                "system they all see")

    def _save(self):
        if self.trainer.cluster is None or self.trainer.cluster.process_id == 0:  # the chief writes, as in Keras
            progress = self.trainer.training_state.fit_progress.to_json()
            save_checkpoint(self.path, trainer_checkpoint(self.trainer, fit=progress))

    def on_step_end(self, step, logs):
        if self.save_freq != "epoch":
            self._steps += 1
            if self._steps >= self.save_freq:
                self._save()
                self._steps = 0

    def on_epoch_end(self, epoch, logs):
        if self.save_freq == "epoch":
            self._save()

    def on_train_end(self, logs=None):
        chief = self.trainer.cluster is None or self.trainer.cluster.process_id == 0
        if logs is not None and self.delete_checkpoint and chief:
            self.path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # only an empty folder goes: it may hold the user's other files
                self.backup_dir.rmdir()


class TerminateOnNaN(Callback):
    """Stop the fit after a batch whose loss is NaN or Inf, as ``keras.callbacks.TerminateOnNaN``: it reads the
    epoch's running loss after each batch (Keras' batch logs), so the epoch ends after that batch (validated) and
    the fit after the epoch. The trainer reaches such a batch only with ``nan_policy="skip"`` (the update skipped):
    under the default ``"raise"`` the step itself raises :class:`~toolkit.NonFiniteError` first.

    Args:
        raise_error: raise a :class:`~toolkit.NonFiniteError` at that batch instead (the steps before it kept), as
            Keras' ``raise_error=True`` raises a ``RuntimeError``.

    Raises:
        ArgumentError: ``raise_error`` not True or False.
    """

    def __init__(self, raise_error: bool = False) -> None:
        if not isinstance(raise_error, bool):
            raise ArgumentError(f"TerminateOnNaN raise_error must be True or False, got {raise_error!r}")
        self.raise_error = raise_error

    def on_train_batch_end(self, batch, logs):
        loss = logs.get("loss")
        if loss is None or math.isfinite(loss):
            return
        if self.raise_error:
            raise NonFiniteError(f"NaN or Inf loss encountered at batch {batch}. Loss value: {loss}. Terminating "
                                 f"training immediately.")
        print(f"Batch {batch}: Invalid loss, terminating training")
        self.stop_training = True


__all__ = ["BackupAndRestore", "CSVLogger", "Callback", "EarlyStopping", "JSONLinesLogger", "ModelCheckpoint",
           "TerminateOnNaN"]
