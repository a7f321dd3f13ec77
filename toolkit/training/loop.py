"""``trainer.fit``: Keras' training loop over a dataset in memory, written once for every trainer.

Each epoch draws an order of the examples from ``trainer.rng`` (so a trainer restored from a checkpoint draws the
orders the original would have), takes batches of ``batch_size`` in that order, the last one smaller when the
size does not divide (it is trained on, not dropped), and calls ``trainer.step`` on each: ``fit`` is exactly those
``step`` calls. The epoch's ``loss`` and each metric's value are the means of the steps' values weighted by batch
size (Keras' running means); a step scores the metrics on its own training-mode outputs, before its update (dropout
on, batch statistics), as Keras does. With ``validation_data`` each epoch ends with ``trainer.evaluate`` on it,
logged as ``val_loss`` and ``val_<metric>``. Across processes each process fits on its own part (the same number
of examples in each, checked); losses and scores are the global batch's, so every process gets the same history.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from toolkit.errors import ShapeError
from toolkit.training import metrics as metrics_module
from toolkit.training.callbacks import Callback
from toolkit.training.trainer import rows

#: ``verbose`` values: 0 silent, 1 a progress bar (rich) per epoch, 2 one line per epoch; "auto": 1 on a terminal.
VERBOSITY = (0, 1, 2, "auto")


@dataclass
class History:
    """What ``fit`` returns, as Keras' ``History``: ``history[name]`` is one value per epoch run, ``epoch`` their
    0-based numbers."""

    history: dict[str, list[float]] = field(default_factory=dict)
    epoch: list[int] = field(default_factory=list)


def _count(value: Any, what: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ShapeError(f"{what} must be an int >= {low}, got {value!r}")
    return int(value)


class _Lines:
    """verbose=2: one line per epoch."""

    def __init__(self, epochs: int, steps: int) -> None:
        self.epochs, self.steps = epochs, steps

    def begin(self, epoch: int) -> None:
        self.started = time.perf_counter()

    def step(self, done: int, logs: dict) -> None:
        pass

    def end(self, epoch: int, logs: dict) -> None:
        seconds = time.perf_counter() - self.started
        values = " - ".join(f"{k} {v:.6g}" for k, v in logs.items())
        print(f"epoch {epoch + 1}/{self.epochs} - {self.steps} steps - {seconds:.2f}s "
              f"({1000 * seconds / self.steps:.1f} ms/step) - {values}", flush=True)

    def close(self) -> None:
        pass


class _Bar(_Lines):
    """verbose=1: a rich progress bar per epoch with the running loss and metrics and the time per step."""

    def begin(self, epoch: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        super().begin(epoch)
        self.progress = Progress(TextColumn(f"epoch {epoch + 1}/{self.epochs}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[info]}"), transient=True)
        self.progress.start()
        self.task = self.progress.add_task("fit", total=self.steps, info="")

    def step(self, done: int, logs: dict) -> None:
        ms = 1000 * (time.perf_counter() - self.started) / done
        values = " - ".join(f"{k} {v:.4g}" for k, v in logs.items())
        self.progress.update(self.task, completed=done, info=f"{values} - {ms:.1f} ms/step")

    def end(self, epoch: int, logs: dict) -> None:
        self.close()
        super().end(epoch, logs)

    def close(self) -> None:
        if getattr(self, "progress", None) is not None:
            self.progress.stop()
            self.progress = None


class _Silent(_Lines):
    def end(self, epoch: int, logs: dict) -> None:
        pass


def _check_processes_agree(trainer, count: int, batch_size: int, epochs: int) -> None:
    """Across processes every step is a collective, so every process must take the same steps: the same example
    count, batch size and epochs (each fits on its own part; the global batch is the parts' batches together).
    Refused in every process alike (they all see the same reduced numbers), before any step."""
    cluster = trainer.cluster
    table = np.zeros((cluster.num_processes, 3))
    table[cluster.process_id] = (count, batch_size, epochs)
    table = trainer._all_reduce(table.ravel(), "the sizes of fit").reshape(cluster.num_processes, 3)
    if np.any(table != table[0]):
        raise ShapeError("fit across processes needs the same number of examples, batch size and epochs in every "
                         "process (each step is taken by all of them); got, per process, "
                         + ", ".join(f"{int(n)} examples / batch {int(b)} / {int(e)} epochs" for n, b, e in table))


def fit(trainer, x: Any, y: Any, epochs: int, batch_size: int, shuffle: bool, validation_data: Any,
        callbacks: Sequence[Callback], verbose: Any, metrics: Sequence) -> History:
    """See :meth:`toolkit.training.trainer.Trainer.fit`."""
    epochs, batch_size = _count(epochs, "epochs", 1), _count(batch_size, "batch_size", 1)
    if verbose not in VERBOSITY:
        raise ValueError(f"verbose must be one of {VERBOSITY}, got {verbose!r}")
    callbacks = list(callbacks)
    for callback in callbacks:
        if not isinstance(callback, Callback):
            raise TypeError(f"callbacks must be toolkit.callbacks.Callback objects, got {type(callback).__name__}")
    x, y = trainer._check_batch(x, y)
    metrics = metrics_module.get(metrics or trainer.model.metrics)  # none given: the model's (Keras' compiled)
    names = ["loss", *(m.name for m in metrics)]
    if validation_data is not None:
        if not isinstance(validation_data, (tuple, list)) or len(validation_data) != 2:
            raise ValueError("validation_data must be a pair (x, y)")
        names += ["val_loss", *(f"val_{m.name}" for m in metrics)]
        trainer._check_batch(*validation_data)
    for callback in callbacks:
        callback.check_logs(names)
    count = len(y)
    if getattr(trainer, "cluster", None) is not None:
        _check_processes_agree(trainer, count, batch_size, epochs)
    steps = -(-count // batch_size)
    if verbose == "auto":
        verbose = 1 if sys.stdout.isatty() else 2
    report = {0: _Silent, 1: _Bar, 2: _Lines}[verbose](epochs, steps)
    history = History()
    for callback in callbacks:
        callback.trainer, callback.stop_training = trainer, False
        callback.on_train_begin()
    try:
        for epoch in range(epochs):
            order = trainer.rng.permutation(count) if shuffle else np.arange(count)
            for callback in callbacks:
                callback.on_epoch_begin(epoch)
            report.begin(epoch)
            totals, seen = dict.fromkeys(names[:1 + len(metrics)], 0.0), 0
            for done, start in enumerate(range(0, count, batch_size), start=1):
                taken = order[start:start + batch_size]
                loss, scores = trainer._step(rows(x, taken), y[taken], 1, metrics)
                step_logs = {"loss": loss, **scores}
                for name, value in step_logs.items():
                    totals[name] += value * len(taken)
                seen += len(taken)
                for callback in callbacks:
                    callback.on_step_end(trainer.step_count, step_logs)
                report.step(done, {name: total / seen for name, total in totals.items()})
            logs = {name: total / count for name, total in totals.items()}
            if validation_data is not None:
                scores = trainer.evaluate(*validation_data, batch_size=batch_size, metrics=metrics)
                logs.update({f"val_{name}": value for name, value in scores.items()})
            for name, value in logs.items():
                history.history.setdefault(name, []).append(value)
            history.epoch.append(epoch)
            for callback in callbacks:
                callback.on_epoch_end(epoch, logs)
            report.end(epoch, logs)
            if any(callback.stop_training for callback in callbacks):
                break
    finally:
        report.close()
        for callback in callbacks:
            callback.on_train_end()
    return history


__all__ = ["VERBOSITY", "History", "fit"]
