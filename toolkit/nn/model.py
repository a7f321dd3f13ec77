"""A model as three plain functions, so the same code runs on every backend."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from toolkit.nn.ops import Ops, Tensor

InitFn = Callable[[np.random.Generator], Mapping[str, np.ndarray]]
ForwardFn = Callable[[Ops, Mapping[str, Tensor], Tensor], Any]
LossFn = Callable[[Ops, Any, Tensor], Tensor]


@dataclass(frozen=True, eq=False)
class Model:
    """A model: how to make its parameters, run it, and score it.

    Args:
        init: ``init(rng) -> {name: numpy array}``; ``rng`` is a ``numpy.random.Generator``.
        forward: ``forward(ops, params, x) -> outputs``, written with :class:`toolkit.nn.ops.Ops` and Python arithmetic.
        loss: ``loss(ops, outputs, y) -> per-example losses`` (shape ``[batch]``); training minimises their mean.
        name: shown in reports; defaults to the forward function's name.

    Models compare by identity, so backends can cache what they compile for one.
    """

    init: InitFn
    forward: ForwardFn
    loss: LossFn
    name: str = ""

    def __post_init__(self) -> None:
        for field in ("init", "forward", "loss"):
            if not callable(getattr(self, field)):
                raise TypeError(f"Model.{field} must be callable, got {getattr(self, field)!r}")
        if not self.name:
            object.__setattr__(self, "name", getattr(self.forward, "__name__", "model"))

    def losses(self, ops: Ops, params: Mapping[str, Any], x: Any, y: Any) -> Any:
        """The per-example losses ``loss(ops, forward(ops, params, x), y)`` with native arrays in and out: how a
        backend runs the model (through :meth:`~toolkit.nn.ops.Ops.call`, so the model code sees Tensors)."""
        return ops.call(lambda o, p, x, y: self.loss(o, self.forward(o, p, x), y), params, x, y)
