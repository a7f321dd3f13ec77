"""Learning-rate schedules, written once against :class:`toolkit.ops.Ops` and compiled into each backend's
update, so the rate changes from step to step without a retrace and both backends compute the same rates.

Names, arguments and formulas are Keras' (``keras.optimizers.schedules``; ``tests/test_schedules.py`` checks the
values against Keras' where Keras is installed, and against NumPy everywhere). A schedule is called with the number
of updates done before this one (Keras' ``optimizer.iterations``: 0 at the first step), as a scalar of the
computation dtype; an optimizer takes one wherever it takes a learning rate: ``Adam(CosineDecay(1e-3, 1000))``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence

from toolkit.errors import ArgumentError
from toolkit.ops.interface import Ops, Tensor


def _number(what: str, value, low: float = -math.inf, *, low_open: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not (value > low if low_open else value >= low):
        bound = f"> {low}" if low_open else f">= {low}"
        raise ArgumentError(f"{what} must be a finite number {bound}, got {value!r}")
    return float(value)


class Schedule(ABC):
    """A learning rate as a function of the step: subclass it and write ``__call__`` with ``ops``."""

    @abstractmethod
    def __call__(self, ops: Ops, step: Tensor) -> Tensor:
        """The rate for the update after ``step`` updates.

        Args:
            ops: the :class:`~toolkit.ops.Ops` of the backend compiling the update.
            step: the number of updates done before this one, a scalar of the computation dtype.

        Returns:
            The rate, a scalar of the computation dtype.
        """

    @abstractmethod
    def peak(self) -> float:
        """The largest rate the schedule gives (error bounds use it as the learning rate).

        Returns:
            The peak rate, a float.

        Raises:
            ArgumentError: the schedule grows without bound (:class:`ExponentialDecay` with ``decay_rate > 1``).
        """

    def config(self) -> dict:
        """The schedule as JSON values.

        Returns:
            ``{"schedule": the class name, **the constructor's arguments}``.
        """
        return {"schedule": type(self).__name__, **vars(self)}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"


class ExponentialDecay(Schedule):
    """``initial_learning_rate * decay_rate ** (step / decay_steps)``; with ``staircase``, the exponent is floored
    (the rate drops every ``decay_steps`` steps).

    Args:
        initial_learning_rate: the rate at step 0, > 0.
        decay_steps: the steps over which the rate is multiplied by ``decay_rate``, > 0.
        decay_rate: the factor per ``decay_steps``, > 0 (above 1 the rate grows, and :meth:`peak` refuses).
        staircase: floor the exponent.

    Raises:
        ArgumentError: an argument that is not a finite number > 0.
    """

    def __init__(self, initial_learning_rate: float, decay_steps: int, decay_rate: float,
                 staircase: bool = False) -> None:
        self.initial_learning_rate = _number("ExponentialDecay initial_learning_rate", initial_learning_rate, 0.0,
                                             low_open=True)
        self.decay_steps = _number("ExponentialDecay decay_steps", decay_steps, 0.0, low_open=True)
        self.decay_rate = _number("ExponentialDecay decay_rate", decay_rate, 0.0, low_open=True)
        self.staircase = bool(staircase)

    def __call__(self, ops, step):
        exponent = step // self.decay_steps if self.staircase else step / self.decay_steps
        return self.initial_learning_rate * self.decay_rate ** exponent

    def peak(self):
        if self.decay_rate > 1.0:
            raise ArgumentError(f"{self!r} grows without bound: it has no peak")
        return self.initial_learning_rate


class PiecewiseConstantDecay(Schedule):
    """``values[0]`` while ``step <= boundaries[0]``, ``values[i]`` while ``boundaries[i-1] < step <=
    boundaries[i]``, ``values[-1]`` after the last boundary.

    Args:
        boundaries: increasing steps, at least one.
        values: the rates, one more than the boundaries, each a finite number >= 0.

    Raises:
        ArgumentError: boundaries that do not increase, not one value more than boundaries, no boundary, or a value
            that is not a finite number >= 0.
    """

    def __init__(self, boundaries: Sequence[float], values: Sequence[float]) -> None:
        boundaries = [_number("PiecewiseConstantDecay boundary", b) for b in boundaries]
        values = [_number("PiecewiseConstantDecay value", v, 0.0) for v in values]
        if len(values) != len(boundaries) + 1 or not boundaries:
            raise ArgumentError(f"PiecewiseConstantDecay needs one more value than boundaries (at least one "
                                f"boundary); got {len(boundaries)} boundaries and {len(values)} values")
        if any(b >= c for b, c in zip(boundaries, boundaries[1:])):
            raise ArgumentError(f"PiecewiseConstantDecay boundaries must increase, got {boundaries}")
        self.boundaries, self.values = boundaries, values

    def __call__(self, ops, step):
        rate = ops.where(step > self.boundaries[-1], self.values[-1], self.values[-2])
        for boundary, value in zip(reversed(self.boundaries[:-1]), reversed(self.values[:-2])):
            rate = ops.where(step <= boundary, value, rate)
        return rate

    def peak(self):
        return max(self.values)


class CosineDecay(Schedule):
    """Cosine decay (Loshchilov and Hutter) with an optional linear warm-up, as Keras::

        no warm-up:  t = min(step, decay_steps)
                     rate = initial_learning_rate * ((1 - alpha) * 0.5 * (1 + cos(pi * t / decay_steps)) + alpha)
        warm-up:     t = min(step, warmup_steps + decay_steps)
                     t < warmup_steps:  rate = initial + (warmup_target - initial) * t / warmup_steps
                     otherwise:         the cosine decay above from warmup_target, at t - warmup_steps

    Args:
        initial_learning_rate: the rate at step 0, >= 0.
        decay_steps: the steps the decay lasts, > 0.
        alpha: the final rate as a fraction of the decay's starting rate, >= 0.
        warmup_target: the rate the warm-up reaches and the decay starts from (None: no warm-up).
        warmup_steps: the steps the warm-up lasts, > 0 with a ``warmup_target``.

    Raises:
        ArgumentError: an argument that is not a finite number in its range, or a ``warmup_target`` without
            ``warmup_steps``.
    """

    def __init__(self, initial_learning_rate: float, decay_steps: int, alpha: float = 0.0,
                 warmup_target: float | None = None, warmup_steps: int = 0) -> None:
        self.initial_learning_rate = _number("CosineDecay initial_learning_rate", initial_learning_rate, 0.0)
        self.decay_steps = _number("CosineDecay decay_steps", decay_steps, 0.0, low_open=True)
        self.alpha = _number("CosineDecay alpha", alpha, 0.0)
        self.warmup_target = None if warmup_target is None else _number("CosineDecay warmup_target",
                                                                        warmup_target, 0.0)
        self.warmup_steps = _number("CosineDecay warmup_steps", warmup_steps, 0.0)
        if self.warmup_target is not None and not self.warmup_steps:
            raise ArgumentError(f"CosineDecay warmup_target needs warmup_steps > 0, got "
                                f"{self.warmup_steps!r}")

    def _decayed(self, ops, t, start):
        cosine = 0.5 * (1.0 + ops.cos(math.pi * (t / self.decay_steps)))
        return start * ((1.0 - self.alpha) * cosine + self.alpha)

    def __call__(self, ops, step):
        if self.warmup_target is None:
            return self._decayed(ops, ops.minimum(step, self.decay_steps), self.initial_learning_rate)
        t = ops.minimum(step, self.warmup_steps + self.decay_steps)
        warm = (self.warmup_target - self.initial_learning_rate) * (t / self.warmup_steps) + self.initial_learning_rate
        return ops.where(t < self.warmup_steps, warm,
                         self._decayed(ops, t - self.warmup_steps, self.warmup_target))

    def peak(self):
        return max(self.initial_learning_rate, self.warmup_target or 0.0)


__all__ = ["CosineDecay", "ExponentialDecay", "PiecewiseConstantDecay", "Schedule"]
