"""What every trainer shares: parameters on their home devices, the optimizer state next to them, checked inputs,
the NaN policy, an update that writes all or nothing, and checkpoints.

A subclass decides where parameters live and how each replica's part of the loss and its gradients are computed
(:meth:`Trainer._loss_and_gradients`); this class does the rest. One step composed per device, top to bottom
(:meth:`Trainer.step`; the rules are :mod:`toolkit.training.rules`'s):

1. check the batch (shapes, dtypes, finiteness) before anything runs (:mod:`toolkit.training.batches`);
2. the subclass sums the replicas' parts of the loss, gradients, model state and metrics: the batch's mean loss and
   each parameter's gradient, left on the parameter's home device;
3. for each home device, the update of the parameters living there (rule 5: with the finiteness check of the
   gradients, the new values, and, with the first, of the loss and the new model state);
4. only if every check passed: write the new parameters to every replica, keep the new state.

Nothing is written before step 4, so an error anywhere (bad input, a failure on one device, a non-finite gradient)
leaves parameters, optimizer state, step count and RNG state as they were.

The state (variables, counts, seed and RNG) is :class:`~toolkit.training.state.TrainerState`'s, which writes it;
its readers and checked writers are :class:`~toolkit.training.trainer_variables.TrainerVariables`',
``predict`` and ``evaluate`` :class:`~toolkit.training.evaluation.Inference`'s; ``fit`` is
:mod:`toolkit.training.loop`'s.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from toolkit.backend.interface import Backend
from toolkit.backend.registry import get_backend
from toolkit.errors import (
    ArgumentError,
    ArgumentTypeError,
    ComputeError,
    NonFiniteError,
    ShapeError,
)
from toolkit.nn.context import consecutive_example_keys
from toolkit.nn.model import Model
from toolkit.training import metrics as metrics_module
from toolkit.training.batches import (
    DTYPES,
    LABEL_DTYPE,
    BatchCheck,
    as_dtype,
    count,
    rows,
    step_weights,
)
from toolkit.training.checkpoint import (
    Checkpoint,
    load_checkpoint,
    restore_trainer,
    save_checkpoint,
    trainer_checkpoint,
)
from toolkit.training.evaluation import Inference
from toolkit.training.failures import compute_error
from toolkit.training.optim import Optimizer
from toolkit.training.state import TrainerState
from toolkit.training.trainer_variables import TrainerVariables, chosen_optimizer

__all__ = ["DTYPES", "LABEL_DTYPE", "NAN_POLICIES", "Trainer", "rows"]

#: What a step does with a non-finite loss or gradient: raise NonFiniteError, or skip the update and count it.
NAN_POLICIES = ("raise", "skip")


def _micro_batches(value: Any, count: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= count:
        raise ShapeError(f"micro_batches must be an int from 1 to the batch's {count} examples, got {value!r}")
    return int(value)


class Trainer(TrainerVariables, Inference):
    """The common part of :class:`~toolkit.DataParallel` and :class:`~toolkit.ModelParallel` (not used directly).

    Attributes:
        training_state: the :class:`~toolkit.training.state.TrainerState`: parameters, optimizer and model state,
            counts, seed and RNG, with the one all-or-nothing write every training path calls.
        cluster: the job of several processes the trainer trains in (:func:`toolkit.distributed.initialize`), or
            None.
    """

    def __init__(self, model: Model, backend: Backend | str, optimizer: Optimizer | None, dtype: str, seed: int,
                 nan_policy: str) -> None:
        if not isinstance(model, Model):
            raise ArgumentTypeError(f"model must be a toolkit.Model, got {type(model).__name__}")
        optimizer, self._optimizer_start = chosen_optimizer(optimizer, model)
        if nan_policy not in NAN_POLICIES:
            raise ArgumentError(f"nan_policy must be one of {NAN_POLICIES}, got {nan_policy!r}")
        self.backend = get_backend(backend) if isinstance(backend, str) else backend
        self.model, self.optimizer, self.dtype, self.nan_policy = model, optimizer, as_dtype(dtype), nan_policy
        self.training_state = TrainerState(int(np.random.SeedSequence().entropy % 2**63) if seed is None else seed)
        self._batch_check = BatchCheck(self.dtype, model.input_shape, model.output_shape)
        self.cluster = None  # a DataParallel trainer's job of several processes

    @property
    def step_count(self) -> int:
        """The number of updates applied."""
        return self.training_state.step_count

    @property
    def skipped_steps(self) -> int:
        """The number of updates skipped for non-finite values (``nan_policy="skip"``)."""
        return self.training_state.skipped_steps

    @property
    def epoch_count(self) -> int:
        """The number of epochs ``fit`` has completed (restored with a checkpoint): the next ``fit``'s first epoch."""
        return self.training_state.epoch_count

    @property
    def rng(self) -> np.random.Generator:
        """The ``numpy.random.Generator`` seeded with :attr:`seed`: it draws the initial parameters; use it for
        shuffling too, and a restored checkpoint replays the same order."""
        return self.training_state.rng

    @property
    def seed(self) -> int:
        """The seed: with the step number and an example's index, it makes each example's random key (dropout), so
        the same seed draws the same noise on every backend and device count. Assigning it changes the keys from
        the next step on; the RNG is left as it is."""
        return self.training_state.seed

    @seed.setter
    def seed(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ArgumentTypeError(f"seed must be an int, got {value!r}")
        self.training_state.reseed(int(value))

    def _loss_and_gradients(self, x: Any, y: Any, micro_batches: int = 1, metrics: tuple = (),
                            weights: Mapping[str, np.ndarray] | None = None
                            ) -> tuple[Any, dict[str, Any], dict[str, Any], dict[str, Any]]:
        """The sums of the replicas' parts (rules 2 to 4 of :mod:`toolkit.training.rules`) over the checked batch:
        the mean loss, each parameter's gradient on the parameter's home device, the model state's new values (the
        replicas' weighted by their shares) and the mean of each of ``metrics`` on the same training-mode outputs;
        computed ``micro_batches`` rows at a time where the trainer accumulates (:meth:`step`). ``weights``: the
        examples' weights (:meth:`_weights`), carried in the model batches, or None."""
        raise NotImplementedError

    # ------------------------------------------------------------------------------------------------------------------
    def step(self, x: Any, y: Any, micro_batches: int = 1, sample_weight: Any = None) -> float:
        """One optimizer update on the global batch ``(x, y)``; returns its mean loss (before the update).

        ``x`` is an array, or a dict of arrays for a model with several named inputs; ``y`` holds the targets
        (integer labels or floats): an array, or for a model of several outputs a list (or tuple) of arrays in
        output order or a dict by output name. All share axis 0. With ``micro_batches=k`` (gradient accumulation)
        the batch is run in ``k`` consecutive parts, the next one after the last is done, so that a batch ``k``
        times larger than memory allows still takes one update; the result is the update of the whole batch (each
        example keeps its random key), except that batch statistics are each part's. ``sample_weight`` (Keras'):
        one weight per example; the loss is then ``sum(loss * weight) / N`` (Keras' reduction) plus the model's
        penalties. Whatever it raises, the trainer is left exactly as it was.

        Args:
            x: an array, or a dict of arrays by input name.
            y: the targets.
            micro_batches: the number of consecutive parts the batch is run in (1: all at once).
            sample_weight: one weight per example (Keras'), or None.

        Raises:
            ShapeError, DTypeError, NonFiniteError: bad input, or ``micro_batches`` not an int from 1 to the batch
                size (nothing is computed).
            ComputeError: the framework failed on a device.
            NonFiniteError: with ``nan_policy="raise"``, a NaN or Inf loss or gradient.
        """
        return self._step(x, y, micro_batches, (), sample_weight)[0]

    def train_step(self, x: Any, y: Any, metrics: Sequence[Any] = (), sample_weight: Any = None) -> dict[str, float]:
        """:meth:`step` on ``(x, y)``, returning Keras' logs of a training step: ``{"loss": mean loss, name: mean of
        each of metrics}`` (:class:`~toolkit.metrics.Metric` objects or names from :data:`toolkit.metrics.NAMED`),
        the metrics scored on the step's own training-mode outputs, before the update, as Keras' training metrics.
        What ``fit`` calls for each batch.

        Args:
            x: an array, or a dict of arrays for a model with several named inputs.
            y: the targets.
            metrics: what to score besides the loss.
            sample_weight: one weight per example, or None (as :meth:`step`); a weighted metric
                (:attr:`toolkit.metrics.Metric.weighted`) is then ``sum(value * weight) / sum(weight)``.

        Raises:
            ArgumentError: an unknown metric; and what :meth:`step` raises, the trainer unchanged.
        """
        loss, scores = self._step(x, y, 1, metrics_module.get(metrics), sample_weight)
        return {"loss": loss, **scores}

    @contextlib.contextmanager
    def steps_kept(self) -> Iterator[None]:
        """A block of training that keeps the steps it completed if it raises, as a Keras fit does, and changes
        nothing if it raises before its first step completes (``fit`` runs in one): the trainer is then at its last
        completed step (each step is all or nothing: a step that raised wrote nothing), parameters, optimizer and
        model state, counts and RNG; or, with no step completed, where it was before the block (the input shapes it
        had accepted too)."""
        before, spec, counts = trainer_checkpoint(self), self._batch_check.spec, self.training_state.counts
        try:
            yield
        except Exception:
            if self.training_state.counts == counts:
                restore_trainer(self, before)
                self._batch_check.spec = spec
            raise

    def _step(self, x: Any, y: Any, micro_batches: int, metrics: tuple,
              sample_weight: Any = None) -> tuple[float, dict[str, float]]:
        """:meth:`step`, also giving the mean of each of ``metrics`` (:class:`~toolkit.metrics.Metric`) over the
        batch, as :meth:`train_step`."""
        x, y = self.check_batch(x, y)
        return self._composed_step(x, y, micro_batches, metrics, self._weights(sample_weight, count(y), metrics))

    def _composed_step(self, x: Any, y: Any, micro_batches: int, metrics: tuple,
                       weights: Mapping[str, np.ndarray] | None) -> tuple[float, dict[str, float]]:
        """The step composed per device (:meth:`_loss_and_gradients`, then each home's update) on a checked batch
        ``(x, y)`` with the examples' ``weights`` (:meth:`_weights`)."""
        loss, grads, model_state, scores = self._loss_and_gradients(x, y, _micro_batches(micro_batches, count(y)),
                                                                    metrics, weights)
        new_params, new_state, finite = {}, {slot: {} for slot in self.training_state.slots}, True
        checked = [loss, *model_state.values()]  # checked once, with the first home's update
        for home, names in self._by_home().items():
            step = self.backend.place(np.asarray(self.step_count + 1, dtype=self.dtype), home)
            params, state = self._at_home(names)
            group_params, group_state, group_finite = self._update_fn(
                params, {name: grads[name] for name in names}, state, step,
                [self.backend.place(value, home) for value in checked], home)
            checked = []
            if any(name in self.model.constraints for name in names):  # rule 5's projection, before the write
                group_params, constrained_finite = self.backend.call(self._constrain, home,
                                                                     {"params": group_params}, self.dtype)
                group_finite = self.backend.to_numpy(group_finite) and self.backend.to_numpy(constrained_finite)
            new_params.update(group_params)
            for slot, values in group_state.items():
                new_state[slot].update(values)
            finite = finite and bool(self.backend.to_numpy(group_finite))
        if finite:  # rule 6: all or nothing
            self.training_state.commit(new_params, new_state, model_state)
        return self._finish_step(float(self.backend.to_numpy(loss)), finite), self._floats(scores)

    def _weights(self, sample_weight: Any, count: int, metrics: tuple) -> dict[str, np.ndarray] | None:
        """:func:`toolkit.training.batches.step_weights` of a batch of this trainer."""
        return step_weights(sample_weight, count, metrics, self.dtype, self.cluster is not None)

    def _floats(self, scores: Mapping[str, Any]) -> dict[str, float]:
        return {name: float(self.backend.to_numpy(value)) for name, value in scores.items()}

    def _finish_step(self, loss: float, written: bool) -> float:
        """Apply the NaN policy to a step whose new values were written only if everything was finite."""
        if not written and self.nan_policy == "raise":
            raise NonFiniteError(
                f"step {self.step_count + 1}: the loss ({loss}) or a gradient is NaN or Inf; nothing was updated. "
                "Lower the learning rate, check the data, or pass nan_policy='skip' to skip such steps")
        self.training_state.count_step(written)
        return loss

    def fit(self, x: Any, y: Any = None, epochs: int = 1, batch_size: int | None = None, shuffle: bool = True,
            validation_data: Any = None, callbacks: Sequence[Any] | None = (), verbose: Any = "auto",
            metrics: Sequence[Any] = (), initial_epoch: int | None = None, sample_weight: Any = None,
            class_weight: Any = None, steps_per_epoch: int | None = None, validation_split: float = 0.0,
            validation_steps: int | None = None, validation_batch_size: int | None = None,
            validation_freq: Any = 1):
        """Train on ``x, y`` for ``epochs`` epochs, as Keras' ``model.fit``: exactly the :meth:`step` calls on each
        epoch's batches. From arrays, batches of ``batch_size`` (default 32) in an order drawn from :attr:`rng` when
        ``shuffle`` (the last batch smaller when the size does not divide); from a source of batches (a batched
        ``tf.data.Dataset``, a ``keras.utils.PyDataset``, a generator or any iterable of batches ``x``, ``(x, y)``
        or ``(x, y, sample_weight)``: :mod:`toolkit.data`), its batches as they come, each split over the devices as
        an array batch is, read ahead on a thread while the step runs. Returns a
        :class:`~toolkit.training.loop.History` with each epoch's ``loss`` and ``metrics`` (names from
        :data:`toolkit.metrics.NAMED`, or :class:`~toolkit.metrics.Metric` objects; each the batch-size-weighted
        mean of its steps' values, scored on each step's training-mode outputs before its update, as Keras) and,
        with ``validation_data`` (``(x, y)``, ``(x, y, sample_weight)`` or a source) or ``validation_split``,
        ``val_loss`` and ``val_<metric>`` from :meth:`evaluate`. ``sample_weight`` (one weight per example) or
        ``class_weight`` (``{class: weight}``, converted as Keras converts it: a class it does not name weighs 1)
        weigh each example's loss as Keras does (:meth:`step`), and the weighted metrics
        (:attr:`toolkit.metrics.Metric.weighted`, Keras' ``weighted_metrics``): their epoch value is
        ``sum(value * weight) / sum(weight)``.

        Epochs are numbered on from :attr:`epoch_count` (restored with a checkpoint), ``epochs`` more of them; with
        ``initial_epoch`` (Keras), epochs ``initial_epoch`` to ``epochs - 1`` run. Arrays and their validation data
        are checked before the first step; a source's batches as they come. A fit that raises keeps the steps it
        completed, as Keras': the trainer is at its last completed step (parameters, optimizer and model state,
        counts; its RNG may have drawn the order of the pass it failed in); one that raises before its first step
        completes leaves the trainer as it was.

        Args:
            x: an array, a dict of arrays by input name, or a source of batches (:mod:`toolkit.data`).
            y: the targets (arrays); None when ``x`` is a source (its batches carry them).
            epochs: how many epochs (from :attr:`epoch_count` on, or up to ``epochs - 1`` with ``initial_epoch``).
            batch_size: the global batch size of each step from arrays (default 32, or with ``steps_per_epoch``
                the batch that splits the examples into that many, as Keras; the last batch of an epoch may be
                smaller); None with a source.
            shuffle: whether each epoch's order of arrays (or of a finite PyDataset's batches) is drawn from
                :attr:`rng`; a dataset or a generator keeps its own order (warned, as Keras warns).
            validation_data: ``(x, y)``, ``(x, y, sample_weight)`` or a source, scored by :meth:`evaluate` after
                each epoch ``validation_freq`` says, or None.
            callbacks: :mod:`toolkit.callbacks` objects, or Keras' (``keras.callbacks``: as they are, or
                refused by name: :mod:`toolkit.keras.callbacks`); None: none.
            verbose: 0 silent, 1 a progress bar, 2 one line per epoch, "auto" (1 on a terminal, else 2).
            metrics: names from :data:`toolkit.metrics.NAMED` or :class:`~toolkit.metrics.Metric` objects;
                default: the model's.
            initial_epoch: Keras' ``initial_epoch``, or None.
            sample_weight: one weight per example of arrays, or None.
            class_weight: ``{class index: weight}`` (a class it does not name weighs 1), or None; not with
                ``sample_weight``.
            steps_per_epoch: the batches of an epoch (Keras': the data goes on from one epoch into the next where
                the last stopped); needed for a source that never ends (``dataset.repeat()``). None: a pass.
            validation_split: the last fraction of the arrays (before any shuffling) held out for validation, as
                Keras; not with a source; ``validation_data`` overrides it (Keras' precedence).
            validation_steps: the batches of each validation (a source's first ones, each time: a generator's go on
                where the last validation stopped); None: all of them.
            validation_batch_size: the batch size of validation arrays (default: the ``batch_size`` given, else
                32, or with ``validation_steps`` the batch that splits them into that many, as Keras).
            validation_freq: validate every ``validation_freq``-th epoch, or at the 1-based epochs of a list.

        Returns:
            The :class:`~toolkit.training.loop.History`.

        Raises:
            ShapeError, DTypeError, NonFiniteError: bad data, validation data, epochs, initial_epoch, batch size or
                steps (a source's batch: naming it; an empty source).
            ArgumentError, ArgumentTypeError: bad verbose, shuffle, callbacks (a Keras one refused, a monitor or
                file name field the fit does not log), validation data, metrics, sample_weight or class_weight
                (both given, a key not a class index, a weight not finite); with a source, ``y``,
                ``sample_weight`` or ``batch_size`` given (its batches carry them), ``validation_split`` without
                ``validation_data``, an endless one without ``steps_per_epoch``. Before any step, but for a
                source's batch that carries sample weights with ``class_weight`` given (found as it is read; the
                steps before it kept).
            DataError: a source that raised while read, or a validation source of one pass that ran out (the steps
                before it kept).
            CheckpointError: a BackupAndRestore backup that cannot be read or is another fit's (before any step).
        """
        from toolkit.training.loop import fit

        return fit(self, x, y, epochs, batch_size, shuffle, validation_data, callbacks, verbose, metrics,
                   initial_epoch, sample_weight, class_weight, steps_per_epoch, validation_split, validation_steps,
                   validation_batch_size, validation_freq)

    def gradients(self, x: Any, y: Any) -> dict[str, np.ndarray]:
        """The gradient of the mean loss over the global batch; nothing is updated.

        Args:
            x: an array, or a dict of arrays by input name.
            y: the targets.

        Returns:
            ``{parameter name: gradient}``, NumPy arrays.

        Raises:
            ShapeError, DTypeError, NonFiniteError: bad input.
            ComputeError: the framework failed on a device.
        """
        _, grads, _, _ = self._loss_and_gradients(*self.check_batch(x, y))
        return {name: self.backend.to_numpy(g) for name, g in grads.items()}

    def loss(self, x: Any, y: Any) -> float:
        """The mean loss over the global batch with the current parameters, computed as a training step computes
        it (training mode: batch statistics, and the dropout of the next step); nothing is updated.

        Args:
            x: an array, or a dict of arrays by input name.
            y: the targets.

        Raises:
            ShapeError, DTypeError, NonFiniteError: bad input.
            ComputeError: the framework failed on a device.
        """
        loss, _, _, _ = self._loss_and_gradients(*self.check_batch(x, y))
        return float(self.backend.to_numpy(loss))

    def _example_keys(self, count: int, offset: int = 0) -> np.ndarray:
        """The keys of the next step's examples ``offset .. offset + count - 1`` of the global batch (see
        :func:`toolkit.nn.context.example_keys`)."""
        return consecutive_example_keys(self.seed, self.step_count + 1, offset, count)

    # ------------------------------------------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Write a checkpoint: parameters, optimizer and model state, step, skipped step and epoch counts, RNG state
        and seed, dtype, model, optimizer, toolkit version. Atomic: a crash during ``save`` leaves an earlier
        checkpoint at ``path`` intact.

        Args:
            path: the ``.npz`` file to write (:func:`toolkit.checkpoint.save_checkpoint`).

        Raises:
            CheckpointError: a name or value that cannot be stored.
        """
        save_checkpoint(path, trainer_checkpoint(self))

    def restore(self, path: str | os.PathLike | Checkpoint) -> None:
        """Load a checkpoint (from any backend, trainer kind and device count) into this trainer, its step and epoch
        counts included (the next ``fit`` numbers its epochs on from the checkpoint's).

        Args:
            path: a checkpoint file, or a :class:`~toolkit.Checkpoint` already loaded.

        Raises:
            CheckpointError: unreadable or corrupted file, or one that does not fit this trainer (parameter names or
                shapes, dtype, optimizer kind, a missing step count or RNG state). Nothing is changed.
        """
        restore_trainer(self, path if isinstance(path, Checkpoint) else load_checkpoint(path))

    # ------------------------------------------------------------------------------------------------------------------
    def _compute(self, device: Any, shapes: str, run, *args):
        """``run(*args)``, one device's share; an error in it (the framework's, or a typed one the ops raised while
        the model was traced, such as a ShapeError) becomes a ComputeError naming the device, the error its cause."""
        try:
            return run(*args)
        except ComputeError:
            raise
        except Exception as error:  # whatever its type: report it as ours
            raise self._compute_error(device, shapes, error) from error

    def _compute_error(self, where: Any, shapes: str, error: Exception) -> ComputeError:
        return compute_error(self.model.name, where, shapes, error)

    def check_batch(self, x: Any, y: Any = None) -> tuple[Any, np.ndarray | None]:
        """``(x, y)`` checked and cast as a step takes them: ``x`` an array or a dict of arrays, ``y`` an array, a
        list, tuple or dict of arrays (a model of several outputs) or None (inputs only, as for :meth:`predict`),
        of one length, floats cast to the trainer's dtype and integers to int32, all finite, shaped like the first
        batch a step ran on. Nothing runs and nothing changes.

        Args:
            x: an array, or a dict of arrays for a model with several named inputs.
            y: the targets, or None.

        Raises:
            ShapeError, DTypeError, NonFiniteError: what is wrong, naming the array.
        """
        return self._batch_check(x, y)

    def _accept_input_spec(self) -> None:
        """Remember the first batch's shapes once it has run."""
        self._batch_check.accept()
