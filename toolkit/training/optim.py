"""Optimizers, with their update math written once against :class:`toolkit.nn.ops.Ops`.

Each backend compiles :meth:`Optimizer.apply` into its own graph, so both backends run the same arithmetic in the
same order. The formulas follow Keras (``keras.optimizers``) so results can be checked against it:

- ``SGD``:      ``v <- momentum * v - lr * g;  p <- p + v``  (with ``momentum == 0``: ``p <- p - lr * g``, no state)
- ``Adam``:     ``m <- b1 * m + (1 - b1) * g;  v <- b2 * v + (1 - b2) * g**2;``
  ``p <- p - lr * sqrt(1 - b2**t) / (1 - b1**t) * m / (sqrt(v) + eps)`` with ``t`` the 1-based update count
- ``RMSprop``:  ``v <- rho * v + (1 - rho) * g**2;  p <- p - lr * g / (sqrt(v) + eps)``  (not centred, no momentum)
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import ClassVar

from toolkit.nn.ops import Ops, Tensor


def _check(name: str, value: float, low: float, high: float = math.inf, *, low_open: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > low if low_open else value >= low) and value < high
    if not ok:
        bracket = "(" if low_open else "["
        raise ValueError(f"{name} must be a finite number in {bracket}{low}, {high}), got {value!r}")
    return float(value)


class Optimizer(ABC):
    """An update rule. ``slots`` names the per-parameter state arrays (zeros at the start)."""

    slots: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def apply(self, ops: Ops, param: Tensor, grad: Tensor, state: dict[str, Tensor],
              step: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        """One update of one parameter.

        Args:
            ops: the backend's ops (arithmetic and ``sqrt``).
            param, grad: the parameter and its averaged gradient.
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
        gradient is finite. Computing both in one call lets the trainer refuse a non-finite update without a second
        pass over the gradients; the new values are only written if the trainer accepts them."""
        new_params, new_state = self.apply_all(ops, params, grads, state, step)
        return new_params, new_state, ops.all_finite(list(grads.values()))

    def apply_all(self, ops: Ops, params: dict[str, Tensor], grads: dict[str, Tensor],
                  state: dict[str, dict[str, Tensor]], step: Tensor) -> tuple[dict, dict]:
        """:meth:`apply` to every parameter: returns ``(new_params, new_state)``, with ``state[slot][name]``."""
        new_params, new_state = {}, {slot: {} for slot in state}
        for name, param in params.items():
            new_params[name], updated = self.apply(ops, param, grads[name], {k: state[k][name] for k in state}, step)
            for slot in state:
                new_state[slot][name] = updated[slot]
        return new_params, new_state

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class SGD(Optimizer):
    """Stochastic gradient descent, with optional (Keras-style, non-Nesterov) momentum."""

    def __init__(self, lr: float, momentum: float = 0.0) -> None:
        self.lr = _check("SGD lr", lr, 0.0, low_open=True)
        self.momentum = _check("SGD momentum", momentum, 0.0, 1.0)

    def state_slots(self) -> tuple[str, ...]:
        return ("velocity",) if self.momentum else ()

    def apply(self, ops, param, grad, state, step):
        if not self.momentum:
            return param - self.lr * grad, {}
        velocity = self.momentum * state["velocity"] - self.lr * grad
        return param + velocity, {"velocity": velocity}


class Adam(Optimizer):
    """Adam (Kingma and Ba), with the bias correction folded into the step size as Keras does."""

    slots = ("m", "v")

    def __init__(self, lr: float, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-7) -> None:
        self.lr = _check("Adam lr", lr, 0.0, low_open=True)
        self.beta1 = _check("Adam beta1", beta1, 0.0, 1.0)
        self.beta2 = _check("Adam beta2", beta2, 0.0, 1.0)
        self.eps = _check("Adam eps", eps, 0.0, low_open=True)

    def apply(self, ops, param, grad, state, step):
        m = self.beta1 * state["m"] + (1.0 - self.beta1) * grad
        v = self.beta2 * state["v"] + (1.0 - self.beta2) * ops.square(grad)
        alpha = self.lr * ops.sqrt(1.0 - self.beta2 ** step) / (1.0 - self.beta1 ** step)
        return param - alpha * m / (ops.sqrt(v) + self.eps), {"m": m, "v": v}


class RMSprop(Optimizer):
    """RMSprop (Hinton), plain: no momentum, not centred."""

    slots = ("v",)

    def __init__(self, lr: float, rho: float = 0.9, eps: float = 1e-7) -> None:
        self.lr = _check("RMSprop lr", lr, 0.0, low_open=True)
        self.rho = _check("RMSprop rho", rho, 0.0, 1.0)
        self.eps = _check("RMSprop eps", eps, 0.0, low_open=True)

    def apply(self, ops, param, grad, state, step):
        v = self.rho * state["v"] + (1.0 - self.rho) * ops.square(grad)
        return param - self.lr * grad / (ops.sqrt(v) + self.eps), {"v": v}


__all__ = ["SGD", "Adam", "Optimizer", "RMSprop"]
