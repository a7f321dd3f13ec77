"""``trainer.fit``: Keras' training loop, written once for every trainer, over arrays in memory or a source of
batches (a ``tf.data`` dataset, a PyDataset, a generator: :mod:`toolkit.data`).

Over arrays, each epoch draws an order of the examples from ``trainer.rng`` (so a trainer restored from a checkpoint
draws the orders the original would have), takes batches of ``batch_size`` in that order, the last one smaller when
the size does not divide (it is trained on, not dropped), and calls ``trainer.step`` on each: ``fit`` is exactly those
``step`` calls. A source's batches are taken as they come, each split over the devices as an array batch is, so a fit
from a source equals the fit from arrays giving the same batches. With ``steps_per_epoch`` an epoch is that many
batches, as Keras takes them (:mod:`toolkit.data.feed`). The epoch's ``loss`` and each metric's value are the means
of the steps' values weighted by batch size (Keras' running means); a step scores the metrics on its own
training-mode outputs, before its update (dropout on, batch statistics), as Keras does. With ``validation_data``
(arrays, or a source) or ``validation_split`` an epoch ends with ``trainer.evaluate``, logged as ``val_loss`` and
``val_<metric>``. Across processes each process fits on its own part (the same number of steps in each, checked);
losses and scores are the global batch's, so every process gets the same history.

A fit that raises keeps the steps it completed, as Keras' does: the trainer (parameters, optimizer and model state,
counts) is at the last completed step, where a BackupAndRestore backup or a ModelCheckpoint of it would put it (its
RNG may also have drawn the order of the pass it failed in); one that raises before its first step completes changes
nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from toolkit.data.feed import Feed
from toolkit.errors import ArgumentError, ArgumentTypeError, CheckpointError, DTypeError, ShapeError
from toolkit.training import metrics as metrics_module
from toolkit.training import reports
from toolkit.training.batches import count as batch_count  # fit's own ``count`` is the examples there
from toolkit.training.batches import (
    declared_shapes,
    free_axes,
    keeps,
    named,
    sample_weights,
    step_weights,
)
from toolkit.training.callback_list import Callbacks
from toolkit.training.inputs import (
    DEFAULT_BATCH_SIZE,
    array_batch_size,
    array_feed,
    check_fraction,
    count_argument,
    example_weights,
    in_context,
    is_batches,
    refuse_for_source,
    source_feed,
    split_validation,
    validation_arrays,
)

#: ``verbose`` values (:mod:`toolkit.training.reports`).
VERBOSITY = reports.VERBOSITY

#: The entry of an epoch's running sums that adds up the examples' weights: a weighted metric's divisor (Keras'
#: weighted metrics are means weighed by sample_weight over the epoch; the loss and the others, by batch size).
_WEIGHT = "_weight"


@dataclass
class History:
    """What ``fit`` returns, as Keras' ``History``: ``history[name]`` is one value per epoch run, ``epoch`` their
    0-based numbers."""

    history: dict[str, list[float]] = field(default_factory=dict)
    epoch: list[int] = field(default_factory=list)


def _check_processes_agree(trainer, what: str, sizes: dict[str, int], unknown: str | None = None) -> None:
    """Across processes every step is a collective, so every process must take the same steps: the same ``sizes``
    (example count, batch size and epochs over arrays; steps per epoch, batches a pass and epochs over a source;
    each process fits on its own part, the global batch is the parts' batches together). Refused in every process
    alike (they all see the same reduced numbers, so none waits in a collective the others left), before any step.

    Args:
        trainer: the fit's trainer.
        what: the sizes, for the message.
        sizes: ``{format: value}``, -1 where a value is not known.
        unknown: the refusal where the first size is not known in some process (None: it is always known).

    Raises:
        ArgumentError: ``unknown``; ShapeError: processes that differ.
    """
    cluster = trainer.cluster
    table = np.zeros((cluster.num_processes, len(sizes)))
    table[cluster.process_id] = list(sizes.values())
    table = trainer.backend.all_reduce_sum(table.ravel(), "the sizes of fit").reshape(cluster.num_processes,
                                                                                      len(sizes))
    if unknown is not None and np.any(table[:, 0] < 0):
        raise ArgumentError(unknown)
    if np.any(table != table[0]):
        raise ShapeError(f"fit across processes needs the same {what} in every process (each step is taken by all "
                         "of them); got, per process, "
                         + ", ".join(" / ".join(form.format(int(v) if v >= 0 else None) for form, v
                                                    in zip(sizes, row)) for row in table))


def _or_unknown(value: int | None) -> int:
    """A size for :func:`_check_processes_agree`: -1 where it is None (printed so)."""
    return -1 if value is None else value


def _pass_within(feed: Feed, epochs: int) -> int:
    """The batches of a source's pass that a fit of ``epochs`` can reach: the pass's length, or the fit's steps where
    the pass is longer or endless (a pass never reached cannot end an epoch early); -1 where it is not known."""
    steps, known = feed.steps_per_epoch, feed.source.num_batches
    if steps is None:
        return _or_unknown(known)
    if feed.source.infinite or (known is not None and known >= steps * epochs):
        return steps * epochs
    return _or_unknown(known)


@dataclass
class Progress:
    """Where a fit is: the epoch running (its number), the batches of it done, the RNG state the current pass's
    order was drawn from and the batches of that pass taken (a pass is an epoch but with ``steps_per_epoch``), the
    epoch's running sums (batch-size-weighted) and example count, and the history of the epochs done; plus what the
    fit is (example count, batch size, shuffle, steps per epoch; for a source, None for the count and batch size, and
    its kind and batches a pass as ``data``) so that a resume can check it is the same fit; and the epoch it ends
    before (``end``) and the one it began at (``first``): a fit of ``epochs`` more epochs (``relative``, no
    ``initial_epoch``) that resumes runs to the backed-up fit's first epoch plus ``epochs``, whatever the trainer had
    counted when it was called.
    :class:`~toolkit.callbacks.BackupAndRestore` writes it into its checkpoints and gives it back on a resume, which
    then draws the same order and skips the batches done (a source's are read again from a new pass and dropped)."""

    epoch: int
    count: int | None
    batch_size: int | None
    shuffle: bool
    steps_per_epoch: int | None = None
    end: int = 0
    relative: bool = True
    first: int = 0
    data: str | None = None
    batch: int = 0
    epoch_rng: dict | None = None
    pass_batch: int = 0
    totals: dict[str, float] = field(default_factory=dict)
    seen: int = 0
    history: History = field(default_factory=History)

    def to_json(self) -> dict:
        return {"epoch": self.epoch, "count": self.count, "batch_size": self.batch_size, "shuffle": self.shuffle,
                "steps_per_epoch": self.steps_per_epoch, "data": self.data, "first": self.first, "batch": self.batch,
                "epoch_rng": self.epoch_rng, "pass_batch": self.pass_batch, "totals": self.totals, "seen": self.seen,
                "history": self.history.history, "epochs": self.history.epoch}

    def resume(self, saved: Any) -> None:
        """Continue from ``saved`` (:meth:`to_json` of a fit's progress), which must be this fit's.

        Raises:
            CheckpointError: ``saved`` is malformed or was written by a fit over other data or batches.
        """
        mine = {"count": self.count, "batch_size": self.batch_size, "shuffle": self.shuffle,
                "steps_per_epoch": self.steps_per_epoch, "data": self.data}
        try:
            theirs = {key: saved.get(key) for key in mine}  # a backup from before an entry was kept: None
            if theirs != mine:
                raise CheckpointError(f"the backup was written by a fit with {theirs}; this fit has {mine}: pass "
                                      "the same data and arguments to resume, or another backup_dir to start over")
            epoch, batch, seen = (count_argument(saved[k], k, 0) for k in ("epoch", "batch", "seen"))
            pass_batch = count_argument(saved.get("pass_batch", batch), "pass_batch", 0)
            first = count_argument(saved.get("first", self.first), "first", 0)
            totals = {str(k): float(v) for k, v in saved["totals"].items()}
            history = History({str(k): [float(v) for v in values] for k, values in saved["history"].items()},
                              [int(e) for e in saved["epochs"]])
            epoch_rng = saved["epoch_rng"]
            if pass_batch and epoch_rng is not None:  # the pass's order is drawn again from it
                np.random.default_rng().bit_generator.state = epoch_rng
        except CheckpointError:
            raise
        except Exception as error:  # a malformed entry: KeyError, TypeError, ValueError, ... by entry and field
            raise CheckpointError(f"the backup's fit progress is malformed: {type(error).__name__}: {error}") from error
        self.epoch, self.batch, self.seen, self.totals, self.history = epoch, batch, seen, totals, history
        self.epoch_rng, self.pass_batch = epoch_rng, pass_batch
        if self.relative:
            self.first, self.end = first, first + (self.end - self.first)


def _examples(x: Any, y: Any) -> dict[str, tuple]:
    """The shape and dtype kind of one example of each array of a checked batch."""
    return {what: (a.shape[1:], a.dtype.kind) for what, a in named(x, y).items()}


def _check_validation_data(trainer, vx: Any, vy: Any, weight: Any, training: dict[str, tuple] | None) -> None:
    """Validation arrays are checked like a batch and must hold examples like the training data's (but on the axes
    the model declares free; ``training`` None: the training data is a stream, read only as it runs): on a new
    trainer too, where no step has fixed the model's input shapes yet; its weights (a third entry, as Keras takes
    ``(x, y, sample_weight)``) like ``sample_weight``."""
    checked = trainer.check_batch(vx, vy)
    if weight is not None:
        sample_weights(weight, batch_count(checked[1]), trainer.dtype, "validation_data's sample_weight")
    if training is None:
        return
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


def _means(totals: dict[str, float], seen: int, weighted: set[str], per_step: set[str] = frozenset(),
           steps: int = 1) -> dict[str, float]:
    """An epoch's logs from its running sums: each weighted metric over the weights' sum (0 where that is 0, as
    Keras' divide_no_nan), each of ``per_step`` over the ``steps`` taken, the rest over the examples seen."""
    weight = totals.get(_WEIGHT, 0.0)
    return {name: (total / weight if weight else 0.0) if name in weighted else total / steps if name in per_step
            else total / seen for name, total in totals.items() if name != _WEIGHT}


def _validation_freq(value: Any) -> Any:
    """Keras' ``validation_freq``: validate every ``value``-th epoch (an int), or at the (1-based) epochs listed."""
    if isinstance(value, (list, tuple, set, frozenset)) and all(
            isinstance(e, (int, np.integer)) and not isinstance(e, bool) and e >= 1 for e in value):
        return frozenset(int(e) for e in value)
    return count_argument(value, "validation_freq (an int, or a list of 1-based epochs)", 1)


def _validates(epoch: int, freq: Any) -> bool:
    return (epoch + 1) in freq if isinstance(freq, frozenset) else (epoch + 1) % freq == 0


def _validation(trainer, validation_data: Any, steps: int | None, batch_size: int | None, epochs: int,
                training: dict | None) -> tuple[Feed | None, Any]:
    """What scores an epoch's validation: ``(feed, score)``, ``score(metrics)`` the scores, ``feed`` the source's
    feed when the validation data is a source (each validation a new pass of its first ``steps`` batches, as Keras
    resets its evaluation iterator; a generator's go on where the last validation stopped), else None.

    Raises:
        ArgumentError: a source of one pass without ``steps`` for a fit of several epochs; and what the validation
            data's checks raise.
    """
    if is_batches(validation_data):
        feed = source_feed(trainer, validation_data, steps, True, "validation_data", steps_name="validation_steps")
        if not feed.source.reiterable and steps is None and epochs > 1:
            raise ArgumentError(f"validation_data is {feed.source.kind}, which gives its batches once, and the fit "
                                f"runs {epochs} epochs: pass validation_steps (each epoch validates on the next "
                                "batches) or a source that can start again (a tf.data.Dataset, a PyDataset)")
        def score(metrics: tuple) -> dict[str, float]:
            feed.restart()
            return trainer.evaluate(feed, metrics=metrics)

        return feed, score
    vx, vy, weight = validation_arrays(validation_data)
    _check_validation_data(trainer, vx, vy, weight, training)
    return None, lambda metrics: trainer.evaluate(vx, vy, batch_size=batch_size, metrics=metrics,
                                                  sample_weight=weight, steps=steps)


def fit(trainer, x: Any, y: Any = None, epochs: int = 1, batch_size: int | None = None, shuffle: bool = True,
        validation_data: Any = None, callbacks: Sequence[Any] | None = (), verbose: Any = "auto",
        metrics: Sequence = (), initial_epoch: int | None = None, sample_weight: Any = None,
        class_weight: Any = None, steps_per_epoch: int | None = None, validation_split: float = 0.0,
        validation_steps: int | None = None, validation_batch_size: int | None = None,
        validation_freq: Any = 1) -> History:
    """See :meth:`toolkit.training.trainer.Trainer.fit`."""
    epochs = count_argument(epochs, "epochs", 1)
    if initial_epoch is None:  # epochs keep counting from the trainer's (restored) count; ``epochs`` more run
        first, end = trainer.epoch_count, trainer.epoch_count + epochs
    else:  # Keras: run epochs initial_epoch .. epochs - 1
        first, end = count_argument(initial_epoch, "initial_epoch", 0), epochs
        if first > end:
            raise ShapeError(f"initial_epoch must be at most epochs (the number after the last epoch, as in Keras); "
                             f"got initial_epoch={first}, epochs={end}")
    if verbose not in VERBOSITY:
        raise ArgumentError(f"verbose must be one of {VERBOSITY}, got {verbose!r}")
    if not isinstance(shuffle, (bool, np.bool_)):
        raise ArgumentTypeError(f"shuffle must be True or False, got {shuffle!r}")
    steps_per_epoch = count_argument(steps_per_epoch, "steps_per_epoch", optional=True)
    validation_steps = count_argument(validation_steps, "validation_steps", optional=True)
    validation_batch_size = count_argument(validation_batch_size, "validation_batch_size", optional=True)
    freq = _validation_freq(validation_freq)
    callbacks = Callbacks(callbacks)
    metrics = metrics_module.get(metrics or trainer.model.metrics)  # none given: the model's (Keras' compiled)
    streamed, given = is_batches(x), None  # given: the batch_size given (a source refuses one)
    if streamed:
        feed = source_feed(trainer, x, steps_per_epoch, True, "x", bool(shuffle), class_weight, "steps_per_epoch")
        check_fraction(validation_split)
        refuse_for_source(feed.source, y=y, sample_weight=sample_weight, batch_size=batch_size,
                          validation_split=validation_split, validation_data=validation_data)
        count, training = None, None
    else:
        given = count_argument(batch_size, "batch_size", optional=True)
        x, y, sample_weight, validation_data = split_validation(x, y, sample_weight, validation_split,
                                                                validation_data)
        x, y = trainer.check_batch(x, y)
        batch_size = array_batch_size(given, steps_per_epoch, batch_count(y), DEFAULT_BATCH_SIZE)
        weights = example_weights(y, sample_weight, class_weight, trainer.dtype)
        if weights is not None:
            # what a step would refuse (weighted metrics across processes)
            step_weights(weights[:1], 1, metrics, trainer.dtype, trainer.cluster is not None)
        feed = array_feed(x, y, weights, batch_size, bool(shuffle), steps_per_epoch, trainer)
        count, training = batch_count(y), _examples(x, y)
    names = ["loss", *(m.name for m in metrics)]
    validation_feed, validate = None, None
    if validation_data is not None:
        # Keras' evaluate(batch_size=validation_batch_size or batch_size): where neither is given, 32, or with
        # validation_steps the batch that splits the validation arrays into that many
        validation_batch_size = validation_batch_size or given or (None if validation_steps else DEFAULT_BATCH_SIZE)
        validation_feed, validate = _validation(trainer, validation_data, validation_steps, validation_batch_size,
                                                end - first, training)
        names += ["val_loss", *(f"val_{m.name}" for m in metrics)]
    callbacks.check_logs(names)
    if trainer.cluster is not None:
        if streamed:
            # the same passes too, where one ends within the fit's steps: it ends an epoch early
            _check_processes_agree(trainer, "steps_per_epoch, batches a pass and epochs",
                                   {"steps_per_epoch={}": _or_unknown(feed.steps_per_epoch),
                                    "batches a pass={}": _pass_within(feed, end - first), "{} epochs": end - first},
                                   unknown="fit across processes from a source of unknown length needs "
                                           "steps_per_epoch: every process must take the same steps, known before "
                                           "the first")
        else:
            _check_processes_agree(trainer, "number of examples, batch size, epochs and steps_per_epoch",
                                   {"{} examples": count, "batch {}": batch_size, "{} epochs": end - first,
                                    "steps_per_epoch={}": _or_unknown(steps_per_epoch)})
    if verbose == "auto":
        verbose = 1 if sys.stdout.isatty() else 2
    # a source is known by its kind and its pass's length (its batches are not read twice to fingerprint them)
    known = feed.source.num_batches
    data = f"{feed.source.kind} of {'unknown' if known is None else known} batches a pass" if streamed else None
    progress = Progress(first, count, None if streamed else batch_size, bool(shuffle), steps_per_epoch, end,
                        initial_epoch is None, first, data)
    logs = None
    try:
        with trainer.steps_kept():
            trainer.training_state.track_fit(progress)  # what BackupAndRestore writes into its backups
            callbacks.train_begin(trainer, {"epochs": end, "steps": feed.steps_per_epoch, "verbose": verbose})
            _epochs(trainer, feed, progress, metrics, names, validate, freq, callbacks,
                    reports.REPORTS[verbose](progress.end, feed.steps_per_epoch), streamed)
            logs = {name: values[-1] for name, values in progress.history.history.items()}
    finally:
        for opened in (feed, validation_feed):
            if opened is not None:
                opened.close()
        trainer.training_state.track_fit(None)
        callbacks.train_end(logs)
    return progress.history


def _epochs(trainer, feed: Feed, progress: Progress, metrics: tuple, names: list[str], validate: Any, freq: Any,
            callbacks: Callbacks, report: reports.Lines, streamed: bool) -> None:
    """The epochs of a fit from ``progress`` (the first, or a resumed one) to its end, their batches from
    ``feed`` (``streamed``: a source's, checked here as they come), validated by ``validate`` on the epochs
    ``freq`` says."""
    weighted = {metric.name for metric in metrics if metric.weighted}
    # Keras' fit logs each output's loss as the plain mean of its steps' values (its trackers get no batch size:
    # the batch axis of its traced step is unknown), where the loss is weighed by batch size
    per_step = {metric.name for metric in metrics if metric.as_loss}
    taken = 0  # steps this call took
    try:
        if progress.pass_batch:  # resumed inside a pass: draw its order again, skip the batches taken
            feed.resume(progress.epoch_rng, progress.pass_batch)
        while progress.epoch < progress.end:
            epoch = progress.epoch
            if feed.exhausted:  # a source of one pass gave everything: the fit ends, as its data has
                if not feed.ran_out:
                    feed.warn_ran_out()
                break
            if progress.batch == 0:
                progress.totals, progress.seen = dict.fromkeys([*names[:1 + len(metrics)], _WEIGHT], 0.0), 0
            callbacks.epoch_begin(epoch)
            report.begin(epoch)
            for x, y, weights in feed.epoch(done=progress.batch):
                callbacks.batch_begin(progress.batch)
                if streamed:
                    where = f"batch {feed.pass_batch - 1} of {feed.source.kind}"
                    x, y = in_context(where, lambda x=x, y=y: trainer.check_batch(x, y))
                step_logs = trainer.train_step(x, y, metrics, weights)
                n = batch_count(y)
                weight = n if weights is None else float(np.sum(weights, dtype=np.float64))
                for name, value in step_logs.items():
                    progress.totals[name] += value * (weight if name in weighted else 1 if name in per_step else n)
                progress.totals[_WEIGHT] = progress.totals.get(_WEIGHT, 0.0) + weight
                progress.seen += n
                progress.batch += 1
                taken += 1
                progress.epoch_rng, progress.pass_batch = feed.pass_rng, feed.position
                running = _means(progress.totals, progress.seen, weighted, per_step, progress.batch)
                callbacks.batch_end(progress.batch - 1, trainer.step_count, step_logs, running)
                report.step(progress.batch, running)
                if callbacks.stop_training:  # Keras' rule: the epoch ends after this batch, validated
                    break
            if progress.batch == 0:  # nothing came
                if not taken:
                    raise feed.nothing_given()
                if not feed.ran_out:
                    feed.warn_ran_out()
                break
            progress.pass_batch = feed.position
            logs = _means(progress.totals, progress.seen, weighted, per_step, progress.batch)
            if validate is not None and _validates(epoch, freq):
                logs.update({f"val_{name}": value for name, value in validate(metrics).items()})
            for name, value in logs.items():
                progress.history.history.setdefault(name, []).append(value)
            progress.history.epoch.append(epoch)
            progress.epoch, progress.batch = epoch + 1, 0
            trainer.training_state.end_epoch(epoch + 1)
            callbacks.epoch_end(epoch, logs)
            report.end(epoch, logs)
            if callbacks.stop_training:
                break
    finally:
        report.close()


__all__ = ["VERBOSITY", "History", "Progress", "fit"]
