"""Optimizers, with their update math written once against :class:`toolkit.ops.Ops`.

Each backend compiles :meth:`Optimizer.apply` into its own graph, so both backends run the same arithmetic in the
same order. The formulas follow Keras (``keras.optimizers``) so results can be checked against it:

- ``SGD``:      ``v <- momentum * v - lr * g;  p <- p + v``  (with ``momentum == 0``: ``p <- p - lr * g``, no state)
- ``Adam``:     ``m <- b1 * m + (1 - b1) * g;  v <- b2 * v + (1 - b2) * g**2;``
  ``p <- p - lr * sqrt(1 - b2**t) / (1 - b1**t) * m / (sqrt(v) + eps)`` with ``t`` the 1-based update count
- ``RMSprop``:  ``v <- rho * v + (1 - rho) * g**2;  p <- p - lr * g / sqrt(v + eps)``  (not centred, no momentum)
- ``AdamW``:    ``p <- p - p * weight_decay * lr``, then Adam's update (decoupled weight decay, Loshchilov and Hutter)

Every optimizer takes Keras' gradient clipping, applied to the averaged gradients before the update:
``clipnorm`` (each parameter's gradient scaled to an L2 norm of at most ``clipnorm``) or ``global_clipnorm`` (all
gradients scaled together so that their joint L2 norm is at most ``global_clipnorm``).

``lr`` is a number or a schedule (:mod:`toolkit.training.schedules`, also ``toolkit.optim.schedules``), evaluated
in the compiled update at the number of updates done before. An optimizer's hyperparameters are fixed once it is
built: the trainers compile them into their steps, so assigning one raises :class:`~toolkit.OptimizerError` rather
than being ignored.
"""

from __future__ import annotations

import functools
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from toolkit.errors import ArgumentError, OptimizerError
from toolkit.ops.interface import Ops, Tensor
from toolkit.training import schedules
from toolkit.training.schedules import Schedule


def _check(name: str, value: float, low: float, high: float = math.inf, *, low_open: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > low if low_open else value >= low) and value < high
    if not ok:
        bracket = "(" if low_open else "["
        raise ArgumentError(f"{name} must be a finite number in {bracket}{low}, {high}), got {value!r}")
    return float(value)


def _rate(name: str, lr) -> float | Schedule:
    return lr if isinstance(lr, Schedule) else _check(name, lr, 0.0, low_open=True)


class Optimizer(ABC):
    """An update rule. ``slots`` names the per-parameter state arrays (zeros at the start). Its hyperparameters
    are fixed once built (see the module doc)."""

    slots: ClassVar[tuple[str, ...]] = ()
    lr: float | Schedule

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            init = cls.__dict__["__init__"]

            @functools.wraps(init)
            def built(self, *args, **kwargs):
                init(self, *args, **kwargs)
                if type(self) is cls:  # the outermost constructor has finished
                    object.__setattr__(self, "_built", True)

            cls.__init__ = built

    def __setattr__(self, name: str, value) -> None:
        if getattr(self, "_built", False):
            raise OptimizerError(f"{type(self).__name__}.{name} cannot change once the optimizer is built (asked "
                                 f"for {value!r}): trainers compile its hyperparameters into their steps, where the "
                                 f"change would be ignored. For a learning rate that changes during training give "
                                 f"a schedule (toolkit.optim.schedules, e.g. CosineDecay); for another value, build "
                                 f"a new optimizer and trainer and restore a checkpoint into it")
        object.__setattr__(self, name, value)

    def learning_rate(self, ops: Ops, step: Tensor):
        """The rate of the update numbered ``step`` (1-based): ``lr``, or the schedule at the ``step - 1`` updates
        done before it (Keras' ``iterations``).

        Args:
            ops: the backend's ops.
            step: the update's 1-based number, a scalar Tensor in the parameter dtype.
        """
        return self.lr(ops, step - 1.0) if isinstance(self.lr, Schedule) else self.lr

    @property
    def peak_lr(self) -> float:
        """The largest learning rate this optimizer uses (a schedule's peak)."""
        return self.lr.peak() if isinstance(self.lr, Schedule) else self.lr

    @abstractmethod
    def apply(self, ops: Ops, param: Tensor, grad: Tensor, state: dict[str, Tensor],
              step: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """One update of one parameter.

        Args:
            ops: the backend's ops (arithmetic and ``sqrt``).
            param: the parameter.
            grad: its averaged gradient.
            state: one array per name in ``slots``, shaped like ``param``.
            step: the 1-based count of this update, a scalar in the parameter dtype.

        Returns:
            The new parameter and the new state.
        """

    def state_slots(self) -> tuple[str, ...]:
        """Names of the state arrays this instance keeps (may depend on hyperparameters)."""
        return self.slots

    def update(self, ops: Ops, params: dict[str, Tensor], grads: dict[str, Tensor],
               state: dict[str, dict[str, Tensor]], step: Tensor) -> tuple[dict, dict, Tensor]:
        """The compiled body of a training update: :meth:`apply_all`, plus a boolean scalar that is true when every
        gradient, new parameter and new state value is finite (finite gradients still give Inf parameters under a
        learning rate a schedule drove to Inf). Computing both in one call lets the trainer refuse a non-finite
        update without a second pass; the new values are only written if the trainer accepts them.

        Args:
            ops: the backend's ops.
            params: the parameters by name.
            grads: their averaged gradients by name, before clipping.
            state: the optimizer state, ``state[slot][name]``.
            step: the update's 1-based number, a scalar Tensor in the parameter dtype.

        Returns:
            ``(new_params, new_state, finite)``.
        """
        new_params, new_state = self.apply_all(ops, params, self.clipped(ops, grads), state, step)
        written = [*new_params.values(), *(value for values in new_state.values() for value in values.values())]
        return new_params, new_state, ops.all_finite([*grads.values(), *written])

    def _set_clipping(self, clipnorm: float | None, global_clipnorm: float | None) -> None:
        name = type(self).__name__
        if clipnorm is not None and global_clipnorm is not None:
            raise ArgumentError(f"{name}: give clipnorm or global_clipnorm, not both (got {clipnorm!r} and "
                             f"{global_clipnorm!r})")
        self.clipnorm = None if clipnorm is None else _check(f"{name} clipnorm", clipnorm, 0.0, low_open=True)
        self.global_clipnorm = None if global_clipnorm is None else _check(f"{name} global_clipnorm",
                                                                           global_clipnorm, 0.0, low_open=True)

    def clipped(self, ops: Ops, grads: dict[str, Tensor]) -> dict[str, Tensor]:
        """The gradients after ``clipnorm`` or ``global_clipnorm`` (Keras' formulas: a zero gradient stays zero;
        a non-finite global norm makes every gradient NaN, which the finiteness check then refuses).

        Args:
            ops: the backend's ops.
            grads: the gradients by name.
        """
        if getattr(self, "clipnorm", None) is not None:
            clipped = {}
            for name, grad in grads.items():
                squares = ops.sum(ops.square(grad), keepdims=True)
                positive = squares > 0
                norm = ops.where(positive, ops.sqrt(ops.where(positive, squares, 1.0)), squares)
                clipped[name] = grad * self.clipnorm / ops.maximum(norm, self.clipnorm)
            return clipped
        if getattr(self, "global_clipnorm", None) is not None:
            norm = ops.sqrt(ops.sum(ops.stack([ops.sum(ops.square(g)) for g in grads.values()])))
            scale = self.global_clipnorm * ops.minimum(1.0 / norm, 1.0 / self.global_clipnorm) + (norm - norm)
            return {name: grad * scale for name, grad in grads.items()}
        return grads

    def apply_all(self, ops: Ops, params: dict[str, Tensor], grads: dict[str, Tensor],
                  state: dict[str, dict[str, Tensor]], step: Tensor) -> tuple[dict, dict]:
        """:meth:`apply` to every parameter.

        Args:
            ops: the backend's ops.
            params: the parameters by name.
            grads: their gradients by name (already clipped).
            state: the optimizer state, ``state[slot][name]``.
            step: the update's 1-based number, a scalar Tensor in the parameter dtype.

        Returns:
            ``(new_params, new_state)``, the state as ``state[slot][name]``.
        """
        new_params, new_state = {}, {slot: {} for slot in state}
        for name, param in params.items():
            new_params[name], updated = self.apply(ops, param, grads[name], {k: state[k][name] for k in state}, step)
            for slot in state:
                new_state[slot][name] = updated[slot]
        return new_params, new_state

    def config(self) -> dict:
        """The hyperparameters as JSON values (a schedule as its :meth:`~Schedule.config`), for checkpoints."""
        return {k: v.config() if isinstance(v, Schedule) else v for k, v in vars(self).items() if not k.startswith("_")}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({args})"


@dataclass(frozen=True)
class OptimizerState:
    """Where an optimizer starts: the updates it has done and its slots' values, by slot and parameter name (an
    imported Keras optimizer's, :attr:`toolkit.Model.optimizer_state`). A trainer starting from it begins at step
    ``iterations`` (its learning-rate schedule and Adam's bias correction continue there, as Keras' do).

    Attributes:
        iterations: the updates done (Keras' ``optimizer.iterations``).
        slots: ``{slot: {parameter name: array}}`` for each slot of the optimizer's ``state_slots()``.
    """

    iterations: int
    slots: Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class RefusedOptimizer:
    """An optimizer a model brings that the toolkit cannot run (:attr:`toolkit.Model.optimizer` of a Keras model
    compiled with one): a trainer given no optimizer raises its ``reason``.

    Attributes:
        reason: what cannot be run, and what to do instead.
    """

    reason: str


class SGD(Optimizer):
    """Stochastic gradient descent, with optional (Keras-style, non-Nesterov) momentum.

    Args:
        lr: the learning rate (> 0), or a schedule.
        momentum: in [0, 1); 0 keeps no state.
        clipnorm: scale each parameter's gradient to an L2 norm of at most this (> 0); None: no clipping.
        global_clipnorm: scale all gradients together to a joint L2 norm of at most this (> 0); not with
            ``clipnorm``.

    Raises:
        ArgumentError: a hyperparameter that is not a finite number in its range, or both clipnorms.
    """

    def __init__(self, lr: float | Schedule, momentum: float = 0.0, *, clipnorm: float | None = None,
                 global_clipnorm: float | None = None) -> None:
        self.lr = _rate("SGD lr", lr)
        self.momentum = _check("SGD momentum", momentum, 0.0, 1.0)
        self._set_clipping(clipnorm, global_clipnorm)

    def state_slots(self) -> tuple[str, ...]:
        return ("velocity",) if self.momentum else ()

    def apply(self, ops, param, grad, state, step):
        lr = self.learning_rate(ops, step)
        if not self.momentum:
            return param - lr * grad, {}
        velocity = self.momentum * state["velocity"] - lr * grad
        return param + velocity, {"velocity": velocity}


class Adam(Optimizer):
    """Adam (Kingma and Ba), with the bias correction folded into the step size as Keras does.

    Args:
        lr: the learning rate (> 0), or a schedule.
        beta1: the first moment's decay rate, in [0, 1).
        beta2: the second moment's decay rate, in [0, 1).
        eps: added to the second moment's square root (> 0).
        clipnorm: scale each parameter's gradient to an L2 norm of at most this (> 0); None: no clipping.
        global_clipnorm: scale all gradients together to a joint L2 norm of at most this (> 0); not with
            ``clipnorm``.

    Raises:
        ArgumentError: a hyperparameter that is not a finite number in its range, or both clipnorms.
    """

    slots = ("m", "v")

    def __init__(self, lr: float | Schedule, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-7, *,
                 clipnorm: float | None = None, global_clipnorm: float | None = None) -> None:
        name = type(self).__name__
        self.lr = _rate(f"{name} lr", lr)
        self.beta1 = _check(f"{name} beta1", beta1, 0.0, 1.0)
        self.beta2 = _check(f"{name} beta2", beta2, 0.0, 1.0)
        self.eps = _check(f"{name} eps", eps, 0.0, low_open=True)
        self._set_clipping(clipnorm, global_clipnorm)

    def apply(self, ops, param, grad, state, step):
        m = self.beta1 * state["m"] + (1.0 - self.beta1) * grad
        v = self.beta2 * state["v"] + (1.0 - self.beta2) * ops.square(grad)
        alpha = self.learning_rate(ops, step) * ops.sqrt(1.0 - self.beta2 ** step) / (1.0 - self.beta1 ** step)
        return param - alpha * m / (ops.sqrt(v) + self.eps), {"m": m, "v": v}


class RMSprop(Optimizer):
    """RMSprop (Hinton), plain: no momentum, not centred.

    Args:
        lr: the learning rate (> 0), or a schedule.
        rho: the squared gradients' decay rate, in [0, 1).
        eps: added to the mean square before its root (> 0).
        clipnorm: scale each parameter's gradient to an L2 norm of at most this (> 0); None: no clipping.
        global_clipnorm: scale all gradients together to a joint L2 norm of at most this (> 0); not with
            ``clipnorm``.

    Raises:
        ArgumentError: a hyperparameter that is not a finite number in its range, or both clipnorms.
    """

    slots = ("v",)

    def __init__(self, lr: float | Schedule, rho: float = 0.9, eps: float = 1e-7, *, clipnorm: float | None = None,
                 global_clipnorm: float | None = None) -> None:
        self.lr = _rate("RMSprop lr", lr)
        self.rho = _check("RMSprop rho", rho, 0.0, 1.0)
        self.eps = _check("RMSprop eps", eps, 0.0, low_open=True)
        self._set_clipping(clipnorm, global_clipnorm)

    def apply(self, ops, param, grad, state, step):
        v = self.rho * state["v"] + (1.0 - self.rho) * ops.square(grad)
        return param - self.learning_rate(ops, step) * grad / ops.sqrt(v + self.eps), {"v": v}


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov and Hutter), as Keras' ``AdamW``: each step first shrinks the
    parameter by ``weight_decay * lr`` of itself, then takes Adam's step (with the gradient of the undecayed
    parameter). Every parameter decays, biases included (Keras' ``exclude_from_weight_decay`` is not offered).

    Args:
        lr: the learning rate (> 0), or a schedule.
        weight_decay: the fraction of ``lr`` by which each parameter shrinks per step (>= 0).
        beta1: as :class:`Adam`.
        beta2: as :class:`Adam`.
        eps: as :class:`Adam`.
        clipnorm: scale each parameter's gradient to an L2 norm of at most this (> 0); None: no clipping.
        global_clipnorm: scale all gradients together to a joint L2 norm of at most this (> 0); not with
            ``clipnorm``.

    Raises:
        ArgumentError: a hyperparameter that is not a finite number in its range, or both clipnorms.
    """

    def __init__(self, lr: float | Schedule, weight_decay: float = 0.004, beta1: float = 0.9, beta2: float = 0.999,
                 eps: float = 1e-7, *, clipnorm: float | None = None, global_clipnorm: float | None = None) -> None:
        super().__init__(lr, beta1, beta2, eps, clipnorm=clipnorm, global_clipnorm=global_clipnorm)
        self.weight_decay = _check("AdamW weight_decay", weight_decay, 0.0)

    def apply(self, ops, param, grad, state, step):
        decayed = param - param * self.weight_decay * self.learning_rate(ops, step)
        return super().apply(ops, decayed, grad, state, step)


__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "OptimizerState", "RMSprop", "RefusedOptimizer", "Schedule",
           "schedules"]
