"""Parameter constraints, Keras' (``keras.constraints``) with Keras' formulas: a projection of a parameter's new
value applied after each optimizer update, inside the step's all-or-nothing write (:mod:`toolkit.training.rules`).

A :class:`~toolkit.Model` declares them per parameter (``Model(..., constraints={"dense/kernel": MaxNorm(2.0)})``);
``from_keras`` translates a layer's ``kernel_constraint=`` and the like to them. Any callable
``constraint(ops, value) -> value`` (on :class:`~toolkit.ops.Ops` tensors, the same shape out) works as one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolkit.ops.interface import Ops, Tensor
from toolkit.ops.nn import EPSILON

Axis = Any  # an int, a tuple of ints, or None (every axis), as Keras takes it


def _norms(ops: Ops, w: Tensor, axis: Axis) -> Tensor:
    return ops.sqrt(ops.sum(ops.square(w), axis=axis, keepdims=True))


@dataclass(frozen=True)
class MaxNorm:
    """Keras' ``MaxNorm``: each slice along ``axis`` rescaled to a norm of at most ``max_value``,
    ``w * clip(norm, 0, max_value) / (epsilon + norm)``."""

    max_value: float = 2.0
    axis: Axis = 0

    def __call__(self, ops: Ops, w: Tensor) -> Tensor:
        norms = _norms(ops, w, self.axis)
        return w * (ops.clip(norms, 0.0, self.max_value) / (EPSILON + norms))


@dataclass(frozen=True)
class NonNeg:
    """Keras' ``NonNeg``: ``maximum(w, 0)``."""

    def __call__(self, ops: Ops, w: Tensor) -> Tensor:
        return ops.maximum(w, 0.0)


@dataclass(frozen=True)
class UnitNorm:
    """Keras' ``UnitNorm``: each slice along ``axis`` divided by ``epsilon + its norm``."""

    axis: Axis = 0

    def __call__(self, ops: Ops, w: Tensor) -> Tensor:
        return w / (EPSILON + _norms(ops, w, self.axis))


@dataclass(frozen=True)
class MinMaxNorm:
    """Keras' ``MinMaxNorm``: each slice along ``axis`` moved ``rate`` of the way to a norm within
    ``[min_value, max_value]``, ``w * (rate * clip(norm, min, max) + (1 - rate) * norm) / (epsilon + norm)``."""

    min_value: float = 0.0
    max_value: float = 1.0
    rate: float = 1.0
    axis: Axis = 0

    def __call__(self, ops: Ops, w: Tensor) -> Tensor:
        norms = _norms(ops, w, self.axis)
        desired = self.rate * ops.clip(norms, self.min_value, self.max_value) + (1 - self.rate) * norms
        return w * (desired / (EPSILON + norms))


#: Keras' constraint classes by name, as ``from_keras`` translates them (their config: the same arguments).
KERAS = {"MaxNorm": MaxNorm, "NonNeg": NonNeg, "UnitNorm": UnitNorm, "MinMaxNorm": MinMaxNorm}

__all__ = ["KERAS", "MaxNorm", "MinMaxNorm", "NonNeg", "UnitNorm"]
