"""A trainer's variables as the trainer shows them: the parameters, the optimizer state and the model state, drawn
from the model, placed on their devices, read back and replaced, every value checked first. Their owner, which
writes them, is :class:`toolkit.training.state.TrainerState`.

:class:`TrainerVariables` is a part of :class:`toolkit.training.trainer.Trainer`, which sets what it reads
(``model``, ``backend``, ``optimizer``, ``dtype``, ``training_state``, ``_optimizer_start``: the
:class:`~toolkit.optim.OptimizerState` the optimizer starts from, or None) and calls
:meth:`TrainerVariables._init_params` from its subclass's constructor, once the devices are known; the optimizer
and where it starts come from :func:`chosen_optimizer`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from toolkit.errors import ArgumentTypeError, ParamsError
from toolkit.nn.model import State
from toolkit.training.optim import Optimizer, OptimizerState, RefusedOptimizer
from toolkit.training.rules import constrained
from toolkit.training.state import TrainerState, check_finite


def chosen_optimizer(given: Optimizer | None, model) -> tuple[Optimizer, OptimizerState | None]:
    """The optimizer a trainer of ``model`` trains with, and where it starts: ``given``, from nothing; or, with none
    given, the model's (:attr:`toolkit.Model.optimizer`, an imported Keras model's) from the model's
    ``optimizer_state`` (a loaded Keras model's optimizer continues).

    Args:
        given: the trainer's ``optimizer`` argument.
        model: the :class:`~toolkit.Model` trained.

    Returns:
        ``(optimizer, state)``: ``state`` None where the optimizer starts from nothing.

    Raises:
        ArgumentTypeError: ``given`` or the model's ``optimizer`` or ``optimizer_state`` of a wrong type (naming
            the field), none given and the model brings none, or the model's a :class:`RefusedOptimizer` (its
            reason).
    """
    if not isinstance(model.optimizer, (Optimizer, RefusedOptimizer, type(None))):
        raise ArgumentTypeError(f"Model.optimizer must be a toolkit.optim optimizer or None, got "
                                f"{type(model.optimizer).__name__}")
    if model.optimizer_state is not None:
        if not isinstance(model.optimizer_state, OptimizerState):
            raise ArgumentTypeError(f"Model.optimizer_state must be a toolkit.optim.OptimizerState or None, got "
                                    f"{type(model.optimizer_state).__name__}")
        if not isinstance(model.optimizer, Optimizer):
            raise ArgumentTypeError("Model.optimizer_state is given without the Model.optimizer it is the state of")
    if given is None:
        if model.optimizer is None:
            raise ArgumentTypeError(f"no optimizer given, and the model {model.name!r} brings none (an imported "
                                    f"Keras model brings the one it was compiled with): give one of "
                                    f"toolkit.optim, e.g. toolkit.optim.Adam(1e-3)")
        if isinstance(model.optimizer, RefusedOptimizer):
            raise ArgumentTypeError(f"no optimizer given, and the model's cannot be used: {model.optimizer.reason}")
        given = model.optimizer
    if isinstance(given, RefusedOptimizer):
        raise ArgumentTypeError(f"optimizer is a RefusedOptimizer, which cannot train: {given.reason}")
    if not isinstance(given, Optimizer):
        raise ArgumentTypeError(f"optimizer must be a toolkit.optim optimizer, got {type(given).__name__}")
    return given, model.optimizer_state if given is model.optimizer else None


class TrainerVariables:
    """The parameters (mirrored on their devices; the first is each one's home), the optimizer state at the
    parameters' homes and the model state (mirrored like the parameters), with their readers and checked writers."""

    training_state: TrainerState

    def _init_params(self, replicas: Callable[[str], Sequence[Any]] | Sequence[Any]) -> None:
        """Draw the initial parameters and place them: ``replicas(name)`` gives a parameter's devices (the first is
        its home, where its optimizer state lives and its update runs), or ``replicas`` is one device list for all."""
        made = self.model.init(self.training_state.rng)
        if not isinstance(made, Mapping) or not made:
            raise ParamsError(f"model.init must return a non-empty dict of arrays, got {type(made).__name__}")
        initial = {name: np.asarray(value, dtype=self.dtype) for name, value in made.items()
                   if not isinstance(value, State)}
        model_state = {name: np.asarray(value.value, dtype=self.dtype) for name, value in made.items()
                       if isinstance(value, State)}
        if not initial:
            raise ParamsError("model.init marks every entry as toolkit.State; a model needs parameters to train")
        check_finite({**initial, **model_state}, "model.init")
        devices = {name: replicas(name) if callable(replicas) else replicas for name in made}
        params = {name: self.backend.mirrored_variable(value, devices[name], name=name)
                  for name, value in initial.items()}
        state = {name: self.backend.mirrored_variable(value, devices[name], name=name)
                 for name, value in model_state.items()}
        slots = {slot: {name: self.backend.variable(np.zeros_like(value), params[name].devices[0],
                                                    name=f"{slot}/{name}")
                        for name, value in initial.items()}
                 for slot in self.optimizer.state_slots()}
        self.training_state.place(params, slots, state)
        if self._optimizer_start is not None:
            self.training_state.start_optimizer(self._optimizer_start, self.dtype)
            self._optimizer_start = None  # its values are the state's now
        self._update_fn = self.backend.compile_update(self.optimizer, self.dtype)
        if unknown := sorted(set(self.model.constraints) - set(initial)):
            raise ParamsError(f"model.constraints name {unknown}, which are not parameters of {self.model.name!r}")
        self._constrain = functools.partial(constrained, constraints=self.model.constraints)

    def params(self) -> dict[str, np.ndarray]:
        """The parameters, as NumPy arrays."""
        return {name: var.numpy() for name, var in self.training_state.params.items()}

    def state(self) -> dict[str, np.ndarray]:
        """The model state (the ``init`` entries marked :class:`~toolkit.State`), as NumPy arrays; empty for a
        model without state."""
        return {name: var.numpy() for name, var in self.training_state.model_state.items()}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Replace the model state on every replica. Keys and shapes must match; values are cast to the dtype.

        Args:
            state: ``{name: array}`` for every state name.

        Raises:
            ParamsError: missing or extra keys, or a wrong shape; NonFiniteError: NaN or Inf. Nothing is changed.
        """
        owner = self.training_state
        owner.commit(model_state=owner.checked(owner.model_state, state, "set_state", self.dtype))

    def param_devices(self) -> dict[str, Any]:
        """Where each parameter lives: its home device (replicas, if any, follow it)."""
        return {name: var.devices[0] for name, var in self.training_state.params.items()}

    def optimizer_state(self) -> dict[str, dict[str, np.ndarray]]:
        """The optimizer state, ``{slot: {param: array}}``, as NumPy arrays."""
        return {slot: {name: var.numpy() for name, var in values.items()}
                for slot, values in self.training_state.slots.items()}

    def set_params(self, params: Mapping[str, Any]) -> None:
        """Replace every parameter (on every replica). Keys and shapes must match; values are cast to the dtype.

        Args:
            params: ``{name: array}`` for every parameter.

        Raises:
            ParamsError: missing or extra keys, or a wrong shape; NonFiniteError: NaN or Inf. Nothing is changed.
        """
        owner = self.training_state
        owner.commit(params=owner.checked(owner.params, params, "set_params", self.dtype))

    def _by_home(self) -> dict[Any, list[str]]:
        groups: dict[Any, list[str]] = {}
        for name, device in self.param_devices().items():
            groups.setdefault(device, []).append(name)
        return groups

    def _at_home(self, names: Sequence[str]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        params = {name: self.training_state.params[name].replicas[0].value for name in names}
        return params, {slot: {name: values[name].value for name in names}
                        for slot, values in self.training_state.slots.items()}
