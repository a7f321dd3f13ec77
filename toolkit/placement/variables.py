"""Variables placed on a device, and mirrored variables with one replica per device.

A backend implements :class:`Variable` (how a value is stored on a device); the checks and the mirroring are
written here once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from toolkit.errors import DTypeError, ShapeError
from toolkit.placement.devices import Device


def check_value(value: Any, shape: tuple[int, ...], dtype: str, what: str, describe) -> Any:
    """Check that ``value`` can be stored in a ``shape``/``dtype`` slot; return it ready to place.

    Arrays with a dtype (NumPy or native) must match ``dtype`` exactly: a silent float64 -> float32 cast hides bugs.
    Python scalars and lists, which carry no dtype, are converted to ``dtype``.

    Args:
        value: a NumPy or native array, or a Python scalar, list or tuple.
        shape: the slot's shape.
        dtype: the slot's dtype name.
        what: what is being written, for the error message (``"assign to <Variable w ...>"``).
        describe: ``describe(value) -> (shape, dtype name)`` for the backend's native values and NumPy's.

    Returns:
        ``value``, Python values converted to a NumPy array of ``dtype``.

    Raises:
        ShapeError, DTypeError: naming ``what``, the expected and the given shape or dtype.
    """
    if isinstance(value, (int, float, list, tuple)) and not isinstance(value, bool):
        value = np.asarray(value, dtype=dtype)
    given_shape, given_dtype = describe(value)
    if given_dtype != dtype:
        raise DTypeError(f"{what}: expected dtype {dtype}, got {given_dtype}")
    if tuple(given_shape) != tuple(shape):
        raise ShapeError(f"{what}: expected shape {tuple(shape)}, got {tuple(given_shape)}")
    return value


class Variable(ABC):
    """A mutable array living on one device.

    Attributes:
        device: the :class:`~toolkit.Device` holding it.
        shape, dtype, name: fixed at creation.
    """

    def __init__(self, device: Device, shape: tuple[int, ...], dtype: str, name: str | None) -> None:
        self.device, self.shape, self.dtype, self.name = device, tuple(shape), dtype, name

    @property
    @abstractmethod
    def value(self) -> Any:
        """The backend's native array (a ``tf.Variable``, or a ``jax.Array`` committed to the device)."""

    @abstractmethod
    def numpy(self) -> np.ndarray:
        """A NumPy copy of the current value."""

    @abstractmethod
    def _describe(self, value: Any) -> tuple[tuple[int, ...], str]:
        """Shape and dtype name of a NumPy or native value."""

    @abstractmethod
    def store(self, value: Any) -> None:
        """Store a value already checked (:meth:`check`) on ``self.device``: the backend's write primitive, which
        the trainer's state (:class:`toolkit.training.state.TrainerState`) calls for values it has checked, or that
        a compiled step made in the variable's shape and dtype.

        Args:
            value: a NumPy or native array of the variable's shape and dtype.
        """

    def check(self, value: Any) -> Any:
        """``value`` checked for this variable's shape and dtype (:func:`check_value`), ready to :meth:`store`.

        Args:
            value: a NumPy or native array, or Python numbers (converted).

        Raises:
            ShapeError: another shape.
            DTypeError: an array of another dtype (never cast silently).
        """
        return check_value(value, self.shape, self.dtype, f"assign to {self!r}", self._describe)

    def assign(self, value: Any) -> None:
        """Replace the value; the shape and dtype must match. On error the variable is unchanged.

        Args:
            value: a NumPy or native array of the variable's shape and dtype, or Python numbers (converted).

        Raises:
            ShapeError: another shape.
            DTypeError: an array of another dtype (never cast silently).
        """
        self.store(self.check(value))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name or ''} shape={self.shape} dtype={self.dtype} on {self.device}>"


class MirroredVariable:
    """One :class:`Variable` replica per device, kept identical: ``assign`` writes every replica.

    Args:
        replicas: the replicas, one per device, of one shape, dtype and name (the first one's are the mirror's).
    """

    def __init__(self, replicas: Sequence[Variable]) -> None:
        self.replicas = tuple(replicas)
        first = self.replicas[0]
        self.shape, self.dtype, self.name = first.shape, first.dtype, first.name

    @property
    def devices(self) -> tuple[Device, ...]:
        """The replicas' devices, in the replicas' order."""
        return tuple(r.device for r in self.replicas)

    def numpy(self) -> np.ndarray:
        """The value (of the first replica; all replicas hold the same)."""
        return self.replicas[0].numpy()

    def check(self, value: Any) -> Any:
        """``value`` checked for the replicas' shape and dtype, ready to :meth:`store`.

        Args:
            value: as for :meth:`Variable.assign`.

        Raises:
            ShapeError: another shape.
            DTypeError: an array of another dtype.
        """
        return check_value(value, self.shape, self.dtype, f"assign to {self!r}", self.replicas[0]._describe)

    def store(self, value: Any) -> None:
        """Store a value already checked (:meth:`check`) on every replica.

        Args:
            value: a NumPy or native array of the variable's shape and dtype.
        """
        for replica in self.replicas:
            replica.store(value)

    def assign(self, value: Any) -> None:
        """Write ``value`` to every replica. Checked once, before any replica changes.

        Args:
            value: as for :meth:`Variable.assign`.

        Raises:
            ShapeError: another shape.
            DTypeError: an array of another dtype.
        """
        self.store(self.check(value))

    def __repr__(self) -> str:
        devices = ", ".join(map(str, self.devices))
        return f"<MirroredVariable {self.name or ''} shape={self.shape} dtype={self.dtype} on [{devices}]>"


def replicas_of(variable: Variable | MirroredVariable) -> tuple[Variable, ...]:
    """The replicas of a mirrored variable, or the one variable itself: what a write primitive writes.

    Args:
        variable: a :class:`Variable` or a :class:`MirroredVariable`.
    """
    return variable.replicas if isinstance(variable, MirroredVariable) else (variable,)
