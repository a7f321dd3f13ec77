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

from toolkit.errors import ArgumentError, ArgumentTypeError, CheckpointError, DTypeError, ShapeError
from toolkit.training import metrics as metrics_module
from toolkit.training.batches import (
    class_weights,
    declared_shapes,
    free_axes,
    keeps,
    named,
    rows,
    sample_weights,
    several,
    step_weights,
)
from toolkit.training.batches import count as batch_count  # fit's own ``count`` is the examples there
from toolkit.training.callbacks import Callback

#: ``verbose`` values: 0 silent, 1 a progress bar (rich) per epoch, 2 one line per epoch; "auto": 1 on a terminal.
VERBOSITY = (0, 1, 2, "auto")

#: The entry of an epoch's running sums that adds up the examples' weights: a weighted metric's divisor (Keras'
#: weighted metrics are means weighed by sample_weight over the epoch; the loss and the others, by batch size).
_WEIGHT = "_weight"


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
    table = trainer.backend.all_reduce_sum(table.ravel(), "the sizes of fit").reshape(cluster.num_processes, 3)
    if np.any(table != table[0]):
        raise ShapeError("fit across processes needs the same number of examples, batch size and epochs in every "
                         "process (each step is taken by all of them); got, per process, "
                         + ", ".join(f"{int(n)} examples / batch {int(b)} / {int(e)} epochs" for n, b, e in table))


@dataclass
class Progress:
    """Where a fit is: the epoch running (its number), the batches of it done, the RNG state the epoch's order was
    drawn from, the epoch's running sums (batch-size-weighted) and example count, and the history of the epochs
    done; plus what the fit is (example count, batch size, shuffle) so that a resume can check it is the same fit.
    :class:`~toolkit.callbacks.BackupAndRestore` writes it into its checkpoints and gives it back on a resume, which
    then draws the same order and skips the batches done."""

    epoch: int
    count: int
    batch_size: int
    shuffle: bool
    batch: int = 0
    epoch_rng: dict | None = None
    totals: dict[str, float] = field(default_factory=dict)
    seen: int = 0
    history: History = field(default_factory=History)

    def to_json(self) -> dict:
        return {"epoch": self.epoch, "count": self.count, "batch_size": self.batch_size, "shuffle": self.shuffle,
                "batch": self.batch, "epoch_rng": self.epoch_rng, "totals": self.totals, "seen": self.seen,
                "history": self.history.history, "epochs": self.history.epoch}

    def resume(self, saved: Any) -> None:
        """Continue from ``saved`` (:meth:`to_json` of a fit's progress), which must be this fit's.

        Raises:
            CheckpointError: ``saved`` is malformed or was written by a fit over other data or batches.
        """
        mine = {"count": self.count, "batch_size": self.batch_size, "shuffle": self.shuffle}
        try:
            theirs = {key: saved[key] for key in mine}
            if theirs != mine:
                raise CheckpointError(f"the backup was written by a fit with {theirs}; this fit has {mine}: pass "
                                      "the same data and arguments to resume, or another backup_dir to start over")
            epoch, batch, seen = (_count(saved[k], k, 0) for k in ("epoch", "batch", "seen"))
            totals = {str(k): float(v) for k, v in saved["totals"].items()}
            history = History({str(k): [float(v) for v in values] for k, values in saved["history"].items()},
                              [int(e) for e in saved["epochs"]])
            epoch_rng = saved["epoch_rng"]
            if batch:  # the epoch's order is drawn again from it
                np.random.default_rng().bit_generator.state = epoch_rng
        except CheckpointError:
            raise
        except Exception as error:  # a malformed entry: KeyError, TypeError, ValueError, ... by entry and field
            raise CheckpointError(f"the backup's fit progress is malformed: {type(error).__name__}: {error}") from error
        self.epoch, self.batch, self.seen, self.totals, self.history = epoch, batch, seen, totals, history
        self.epoch_rng = epoch_rng


def _examples(x: Any, y: Any) -> dict[str, tuple]:
    """The shape and dtype kind of one example of each array of a checked batch."""
    return {what: (a.shape[1:], a.dtype.kind) for what, a in named(x, y).items()}


def _check_validation_data(trainer, validation_data: Any, training: dict[str, tuple]) -> None:
    """Validation data is checked like a batch and must hold examples like the training data's (but on the axes the
    model declares free): on a new trainer too, where no step has fixed the model's input shapes yet; its weights
    (a third entry, as Keras takes ``(x, y, sample_weight)``) like ``sample_weight``."""
    if not isinstance(validation_data, (tuple, list)) or len(validation_data) not in (2, 3):
        raise ArgumentError(f"validation_data must be a pair (x, y) or (x, y, sample_weight), got "
                            f"{type(validation_data).__name__}"
                            + (f" of {len(validation_data)}" if isinstance(validation_data, (tuple, list)) else ""))
    checked = trainer.check_batch(*validation_data[:2])
    if len(validation_data) == 3 and validation_data[2] is not None:
        sample_weights(validation_data[2], batch_count(checked[1]), trainer.dtype, "validation_data's sample_weight")
    found = _examples(*checked)
    free = {what: free_axes(shape) for what, shape in
            declared_shapes(trainer.model.input_shape, trainer.model.output_shape, *checked).items()}
    if found.keys() != training.keys() or any(not keeps(found[k][0], training[k][0], free.get(k, frozenset()))
                                              for k in found):
        raise ShapeError(f"validation_data must hold examples shaped like the training data's "
                         f"{ {k: s for k, (s, _) in training.items()} }; got { {k: s for k, (s, _) in found.items()} }")
    kinds = {"f": "floating", "i": "integer labels"}
    for what, (_, kind) in found.items():
        if kind != training[what][1]:
            raise DTypeError(f"validation_data {what} must be {kinds[training[what][1]]} as in the training data; "
                             f"got {kinds[kind]}")


def _fit_weights(trainer, y: np.ndarray, sample_weight: Any, class_weight: Any) -> np.ndarray | None:
    """The examples' weights of a fit: ``sample_weight``, or ``class_weight`` converted (Keras' rules), or None.

    Raises:
        ArgumentError: both given, or a bad class_weight; ShapeError, DTypeError, NonFiniteError: bad weights.
    """
    if sample_weight is not None and class_weight is not None:
        raise ArgumentError("pass sample_weight or class_weight, not both (Keras refuses both too): fold the class "
                            "weights into sample_weight")
    if class_weight is not None:
        if several(y):
            raise ArgumentError("class_weight is only supported for a model of one output (as in Keras): weigh the "
                                "examples of a model of several outputs with sample_weight")
        return class_weights(y, class_weight, trainer.dtype)
    return None if sample_weight is None else sample_weights(sample_weight, batch_count(y), trainer.dtype)


def _means(totals: dict[str, float], seen: int, weighted: set[str], per_step: set[str] = frozenset(),
           steps: int = 1) -> dict[str, float]:
    """An epoch's logs from its running sums: each weighted metric over the weights' sum (0 where that is 0, as
    Keras' divide_no_nan), each of ``per_step`` over the ``steps`` taken, the rest over the examples seen."""
    weight = totals.get(_WEIGHT, 0.0)
    return {name: (total / weight if weight else 0.0) if name in weighted else total / steps if name in per_step
            else total / seen for name, total in totals.items() if name != _WEIGHT}


def fit(trainer, x: Any, y: Any, epochs: int, batch_size: int, shuffle: bool, validation_data: Any,
        callbacks: Sequence[Callback], verbose: Any, metrics: Sequence, initial_epoch: int | None = None,
        sample_weight: Any = None, class_weight: Any = None) -> History:
    """See :meth:`toolkit.training.trainer.Trainer.fit`."""
    epochs, batch_size = _count(epochs, "epochs", 1), _count(batch_size, "batch_size", 1)
    if initial_epoch is None:  # epochs keep counting from the trainer's (restored) count; ``epochs`` more run
        first, end = trainer.epoch_count, trainer.epoch_count + epochs
    else:  # Keras: run epochs initial_epoch .. epochs - 1
        first, end = _count(initial_epoch, "initial_epoch", 0), epochs
        if first > end:
            raise ShapeError(f"initial_epoch must be at most epochs (the number after the last epoch, as in Keras); "
                             f"got initial_epoch={first}, epochs={end}")
    if verbose not in VERBOSITY:
        raise ArgumentError(f"verbose must be one of {VERBOSITY}, got {verbose!r}")
    if not isinstance(shuffle, (bool, np.bool_)):
        raise ArgumentTypeError(f"shuffle must be True or False, got {shuffle!r}")
    callbacks = list(callbacks)
    for callback in callbacks:
        if not isinstance(callback, Callback):
            raise ArgumentTypeError(f"callbacks must be toolkit.callbacks.Callback objects, got "
                                    f"{type(callback).__name__}")
    x, y = trainer.check_batch(x, y)
    weights = _fit_weights(trainer, y, sample_weight, class_weight)
    metrics = metrics_module.get(metrics or trainer.model.metrics)  # none given: the model's (Keras' compiled)
    if weights is not None:
        # what a step would refuse (weighted metrics across processes)
        step_weights(weights[:1], 1, metrics, trainer.dtype, trainer.cluster is not None)
    names = ["loss", *(m.name for m in metrics)]
    if validation_data is not None:
        _check_validation_data(trainer, validation_data, _examples(x, y))
        names += ["val_loss", *(f"val_{m.name}" for m in metrics)]
    for callback in callbacks:
        callback.check_logs(names)
    count = batch_count(y)
    if trainer.cluster is not None:
        _check_processes_agree(trainer, count, batch_size, end - first)
    steps = -(-count // batch_size)
    if verbose == "auto":
        verbose = 1 if sys.stdout.isatty() else 2
    progress = Progress(first, count, batch_size, bool(shuffle))
    logs = None
    try:
        # A failed fit changes nothing: the trainer goes back to where it was before (RNG and counts included),
        # whatever step failed; stopping a fit by hand keeps its steps, as in Keras.
        with trainer.all_or_nothing():
            trainer.training_state.track_fit(progress)  # what BackupAndRestore writes into its backups
            for callback in callbacks:
                callback.trainer, callback.stop_training = trainer, False
                callback.params = {"epochs": end, "steps": steps, "verbose": verbose}
                callback.on_train_begin()
            _epochs(trainer, x, y, progress, end, metrics, names, validation_data, callbacks,
                    {0: _Silent, 1: _Bar, 2: _Lines}[verbose](end, steps), weights)
            logs = {name: values[-1] for name, values in progress.history.history.items()}
    finally:
        trainer.training_state.track_fit(None)
        for callback in callbacks:
            callback.on_train_end(logs)
    return progress.history


def _epochs(trainer, x, y, progress: Progress, end: int, metrics: tuple, names: list[str], validation_data: Any,
            callbacks: list[Callback], report: _Lines, weights: np.ndarray | None = None) -> None:
    """The epochs of a fit from ``progress`` (the first, or a resumed one) to ``end``, the examples weighed by
    ``weights`` (or not)."""
    count, batch_size = progress.count, progress.batch_size
    weighted = {metric.name for metric in metrics if metric.weighted}
    # Keras' fit logs each output's loss as the plain mean of its steps' values (its trackers get no batch size:
    # the batch axis of its traced step is unknown), where the loss is weighed by batch size
    per_step = {metric.name for metric in metrics if metric.as_loss}
    try:
        while progress.epoch < end:
            epoch = progress.epoch
            if progress.batch == 0:
                progress.epoch_rng = trainer.rng.bit_generator.state
                progress.totals, progress.seen = dict.fromkeys([*names[:1 + len(metrics)], _WEIGHT], 0.0), 0
            else:  # resumed mid-epoch: draw the epoch's order again, then skip the batches done
                trainer.training_state.set_rng_state(progress.epoch_rng)
            order = trainer.rng.permutation(count) if progress.shuffle else np.arange(count)
            for callback in callbacks:
                callback.on_epoch_begin(epoch)
            report.begin(epoch)
            for done, start in enumerate(range(progress.batch * batch_size, count, batch_size),
                                         start=progress.batch + 1):
                taken = order[start:start + batch_size]
                step_weights = None if weights is None else weights[taken]
                step_logs = trainer.train_step(rows(x, taken), rows(y, taken), metrics, step_weights)
                weight = len(taken) if step_weights is None else float(np.sum(step_weights, dtype=np.float64))
                for name, value in step_logs.items():
                    progress.totals[name] += value * (weight if name in weighted else 1 if name in per_step
                                                      else len(taken))
                progress.totals[_WEIGHT] = progress.totals.get(_WEIGHT, 0.0) + weight
                progress.seen += len(taken)
                progress.batch = done
                for callback in callbacks:
                    callback.on_step_end(trainer.step_count, step_logs)
                report.step(done, _means(progress.totals, progress.seen, weighted, per_step, done))
            logs = _means(progress.totals, count, weighted, per_step, progress.batch)
            if validation_data is not None:
                scores = trainer.evaluate(*validation_data[:2], batch_size=batch_size, metrics=metrics,
                                          sample_weight=validation_data[2] if len(validation_data) == 3 else None)
                logs.update({f"val_{name}": value for name, value in scores.items()})
            for name, value in logs.items():
                progress.history.history.setdefault(name, []).append(value)
            progress.history.epoch.append(epoch)
            progress.epoch, progress.batch = epoch + 1, 0
            trainer.training_state.end_epoch(epoch + 1)
            for callback in callbacks:
                callback.on_epoch_end(epoch, logs)
            report.end(epoch, logs)
            if any(callback.stop_training for callback in callbacks):
                break
    finally:
        report.close()


__all__ = ["VERBOSITY", "History", "Progress", "fit"]
