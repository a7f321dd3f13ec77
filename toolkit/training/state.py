"""A trainer's state and its one owner: the parameters, the optimizer state and the model state (placed variables),
the step, skipped-step and epoch counts, the seed and the RNG, and the running fit's progress.

:class:`TrainerState` is the only writer of all of it. Every path that changes the variables asks it to
:meth:`~TrainerState.commit` (the step composed per device, TensorFlow's fused step inside its traced graph, the
Theano family's host, C-linker and mesh steps after their call, ``set_params``, ``set_state``, a checkpoint's
restore, a failed fit's ``steps_kept`` and BackupAndRestore through it): one all-or-nothing write, which either
writes every variable of each group it is given or, having found a value that does not fit, none. A path hands it
the values and, where the path has its own way of writing (a traced assignment, a deferred read, a buffer the
engine already holds), the write primitive; the owner decides what is written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from toolkit.errors import DTypeError, NonFiniteError, ParamsError
from toolkit.placement.variables import MirroredVariable, Variable
from toolkit.training.batches import count_non_finite

#: ``write(variable, value)``: how a path stores one variable's new value (default: :meth:`Variable.store` of the
#: value, checked first).
Write = Callable[[Any, Any], None]


@dataclass(frozen=True)
class Counts:
    """The counts a trainer keeps: updates applied, updates skipped for non-finite values, epochs completed."""

    step: int = 0
    skipped: int = 0
    epoch: int = 0


class TrainerState:
    """The trainer's state, written here only.

    Args:
        seed: the seed of :attr:`rng`.

    Attributes:
        params: ``{name: MirroredVariable}``, each parameter on its devices (the first is its home).
        slots: ``{slot: {name: Variable}}``, the optimizer state at each parameter's home.
        model_state: ``{name: MirroredVariable}``, the model state (``toolkit.State`` entries), mirrored like the
            parameters.
        seed: the seed; with the step number and an example's index it makes the example's random key.
        rng: the ``numpy.random.Generator`` seeded with ``seed``: it draws the initial parameters and fit's orders.
        fit_progress: the running fit's progress (:class:`toolkit.training.loop.Progress`), or None outside a fit.
    """

    def __init__(self, seed: int) -> None:
        self.params: dict[str, MirroredVariable] = {}
        self.slots: dict[str, dict[str, Variable]] = {}
        self.model_state: dict[str, MirroredVariable] = {}
        self.seed = int(seed)
        self.rng = np.random.default_rng(self.seed)
        self.counts = Counts()
        self.fit_progress: Any = None

    # --- the variables ----------------------------------------------------------------------------------------------
    def place(self, params: Mapping[str, MirroredVariable], slots: Mapping[str, Mapping[str, Variable]],
              model_state: Mapping[str, MirroredVariable]) -> None:
        """Take the trainer's variables, once, as the trainer placed them.

        Args:
            params: the parameters' variables by name.
            slots: the optimizer state's variables, by slot and parameter name.
            model_state: the model state's variables by name.

        Raises:
            ParamsError: the variables were placed already.
        """
        if self.params:
            raise ParamsError("the trainer's variables are placed once, when the trainer is made")
        self.params, self.model_state = dict(params), dict(model_state)
        self.slots = {slot: dict(values) for slot, values in slots.items()}

    def commit(self, params: Mapping[str, Any] | None = None, slots: Mapping[str, Mapping[str, Any]] | None = None,
               model_state: Mapping[str, Any] | None = None, write: Write | None = None) -> None:
        """Write new values, all or nothing: each group given (parameters, optimizer state, model state) must hold a
        value for every variable of the group (checked first, always), and without ``write`` every value is checked
        for its variable's shape and dtype before any is written. With ``write`` the path vouches for the values (a
        compiled step's outputs, made in the variables' shapes and dtypes) and its primitive writes each in turn;
        a traced write (TensorFlow's) commits inside the step's graph, under its finiteness condition.

        Args:
            params: ``{name: value}`` for every parameter, or None (unchanged).
            slots: ``{slot: {name: value}}`` for every optimizer slot and parameter, or None.
            model_state: ``{name: value}`` for every model state entry, or None.
            write: the path's write primitive, for values the path made in the variables' shapes and dtypes (a
                compiled step's outputs, a traced assignment); None: each value is checked
                (:meth:`~toolkit.placement.variables.Variable.check`) and then stored.

        Raises:
            ParamsError: a group given without a value for each of its variables, or with values for others.
            ShapeError, DTypeError: (``write`` None) a value of another shape or dtype. Nothing is written.
        """
        groups = []
        if params is not None:
            groups += self._pairs(self.params, params, "the parameters")
        if slots is not None:
            if set(slots) != set(self.slots):
                raise ParamsError(f"a commit of the optimizer state needs the slots {sorted(self.slots)}, got "
                                  f"{sorted(slots)}")
            for slot, variables in self.slots.items():
                groups += self._pairs(variables, slots[slot], f"the optimizer slot {slot!r}")
        if model_state is not None:
            groups += self._pairs(self.model_state, model_state, "the model state")
        if write is None:
            checked = [(variable, variable.check(value)) for variable, value in groups]
            for variable, value in checked:
                variable.store(value)
        else:
            for variable, value in groups:
                write(variable, value)

    @staticmethod
    def _pairs(variables: Mapping[str, Any], values: Mapping[str, Any], what: str) -> list[tuple[Any, Any]]:
        if len(values) != len(variables) or any(name not in values for name in variables):
            missing, extra = sorted(set(variables) - set(values)), sorted(set(values) - set(variables))
            raise ParamsError(f"a commit of {what} needs a value for each: missing {missing}, extra {extra}")
        return [(variable, values[name]) for name, variable in variables.items()]

    @staticmethod
    def checked(variables: Mapping[str, Any], arrays: Any, what: str, dtype: str) -> dict[str, np.ndarray]:
        """``arrays`` as a commit of ``variables`` takes them from a user or a file: a dict with exactly their
        names, each an array of numbers of the variable's shape, cast to ``dtype``, all finite.

        Args:
            variables: the group written (:attr:`params` or :attr:`model_state`).
            arrays: ``{name: array}``.
            what: who gives them, for the messages (``"set_params"``, ``"checkpoint"``).
            dtype: the trainer's dtype.

        Raises:
            ParamsError: not a dict, missing or extra names, or a wrong shape; DTypeError: not numbers;
                NonFiniteError: NaN or Inf.
        """
        if not isinstance(arrays, Mapping):
            raise ParamsError(f"{what} needs a dict of arrays, got {type(arrays).__name__}")
        missing, extra = set(variables) - set(arrays), set(arrays) - set(variables)
        if missing or extra:
            raise ParamsError(f"{what} keys differ from the model's: missing {sorted(missing)}, extra {sorted(extra)}")
        found = {}
        for name, var in variables.items():
            array = np.asarray(arrays[name])
            if array.shape != var.shape:
                raise ParamsError(f"{what}[{name!r}]: expected shape {var.shape}, got {array.shape}")
            if array.dtype.kind not in "biuf":
                raise DTypeError(f"{what}[{name!r}]: expected numbers, got dtype {array.dtype}")
            found[name] = array.astype(dtype)
        check_finite(found, what)
        return found

    def start_optimizer(self, start: Any, dtype: str) -> None:
        """Begin the optimizer where ``start`` left it, before any step: its slots' values and its update count.

        Args:
            start: a :class:`toolkit.optim.OptimizerState` with a value for every slot and parameter.
            dtype: the trainer's dtype.

        Raises:
            ParamsError: other slots, parameters or shapes than the trainer's, or iterations not a count.
            DTypeError: values that are not numbers.
            NonFiniteError: a NaN or an Inf. Nothing is written on any error.
        """
        if set(start.slots) != set(self.slots):
            raise ParamsError(f"the optimizer's saved state has the slots {sorted(start.slots)}, the optimizer "
                              f"keeps {sorted(self.slots)}")
        count = start.iterations
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
            raise ParamsError(f"the optimizer's saved state has iterations={count!r} ({type(count).__name__}); "
                              f"expected a count, an int >= 0")
        slots = {slot: self.checked(variables, start.slots[slot], f"the optimizer's saved {slot!r}", dtype)
                 for slot, variables in self.slots.items()}
        self.commit(slots=slots)
        self.counts = Counts(int(start.iterations), self.counts.skipped, self.counts.epoch)

    # --- counts, RNG, fit progress ---------------------------------------------------------------------------------
    @property
    def step_count(self) -> int:
        """The number of updates applied."""
        return self.counts.step

    @property
    def skipped_steps(self) -> int:
        """The number of updates skipped for non-finite values."""
        return self.counts.skipped

    @property
    def epoch_count(self) -> int:
        """The number of epochs ``fit`` has completed."""
        return self.counts.epoch

    def count_step(self, written: bool) -> None:
        """Count a step whose update was written, or skipped (``nan_policy="skip"``).

        Args:
            written: whether the step's new values were written.
        """
        step, skipped, epoch = self.counts.step, self.counts.skipped, self.counts.epoch
        self.counts = Counts(step + written, skipped + (not written), epoch)

    def end_epoch(self, epoch: int) -> None:
        """Count the epochs a fit has completed: the next fit's first epoch is ``epoch``.

        Args:
            epoch: the number of epochs completed.
        """
        self.counts = Counts(self.counts.step, self.counts.skipped, int(epoch))

    def set_rng_state(self, state: Mapping[str, Any]) -> None:
        """Put :attr:`rng` back to a state it had (``rng.bit_generator.state``): a fit resumed mid-epoch draws that
        epoch's order again.

        Args:
            state: a state of :attr:`rng`'s bit generator.
        """
        self.rng.bit_generator.state = state

    def reseed(self, seed: int) -> None:
        """Use another seed for the examples' random keys from the next step on (the RNG is left as it is).

        Args:
            seed: the new seed.
        """
        self.seed = int(seed)

    def track_fit(self, progress: Any) -> None:
        """Hold the running fit's progress (what BackupAndRestore writes into its backups), or None when it ends.

        Args:
            progress: the fit's :class:`toolkit.training.loop.Progress`, or None.
        """
        self.fit_progress = progress

    def restore(self, params: Mapping[str, Any], slots: Mapping[str, Mapping[str, Any]],
                model_state: Mapping[str, Any], counts: Counts, rng: np.random.Generator, seed: int) -> None:
        """Put a whole saved state back, all or nothing (a checkpoint's, checked by
        :func:`toolkit.training.checkpoint.restore_trainer`, or the one a failed fit's ``steps_kept`` saved).

        Args:
            params: every parameter's value.
            slots: every optimizer slot's values.
            model_state: every model state entry's value.
            counts: the counts.
            rng: the RNG, in the state to continue from.
            seed: the seed.

        Raises:
            ParamsError, ShapeError, DTypeError: a value that does not fit (nothing is written).
        """
        self.commit(params, slots, model_state)
        self.counts, self.rng, self.seed = counts, rng, int(seed)


def check_finite(arrays: Mapping[str, np.ndarray], what: str) -> None:
    """Raise if any of ``arrays`` holds a NaN or an Inf.

    Args:
        arrays: ``{name: array}``.
        what: who gives them, for the message.

    Raises:
        NonFiniteError: naming each array with its count of non-finite values.
    """
    bad = {name: n for name, value in arrays.items() if (n := count_non_finite(value))}
    if bad:
        raise NonFiniteError(f"{what}: NaN or Inf in parameters {bad} (name: count)")
