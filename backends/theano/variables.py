"""Device-placed variables for the Theano family: Theano's ``shared(value, target=...)`` had no successor in
Aesara or PyTensor, so a variable is a ``jax.Array`` committed to its device (JAX linker) or a NumPy array (C
linker, host only)."""

from __future__ import annotations

import numpy as np

from toolkit.placement.variables import Variable


def describe(value) -> tuple[tuple[int, ...], str]:
    dtype = value.dtype if hasattr(value, "dtype") else np.asarray(value).dtype
    return tuple(np.shape(value)), np.dtype(dtype).name


class TheanoVariable(Variable):
    def __init__(self, value: np.ndarray, device, place, name: str | None) -> None:
        super().__init__(device, value.shape, value.dtype.name, name)
        self._place = place
        self._value = place(value)
        self._pending = None  # a function making the value, where it is not made yet (see _defer)
        self.version = 0  # counts writes from outside the backend's fused step

    @property
    def value(self):
        if self._pending is not None:
            self._value, self._pending = self._pending(), None
        return self._value

    def defer(self, make) -> None:
        """Hold the value as ``make()``, called on the first read: the mesh step keeps replicas stacked across
        devices and makes the per-device arrays only when someone reads them. Not counted in :attr:`version`
        (the step's own write).

        Args:
            make: ``make() -> array``, the value on this variable's device.
        """
        self._pending = make

    def hold(self, value) -> None:
        """Hold ``value`` as it is, the C linker's step's own array: not placed again, not counted in
        :attr:`version`.

        Args:
            value: a NumPy array of the variable's shape and dtype.
        """
        self._value, self._pending = value, None

    def numpy(self) -> np.ndarray:
        return np.array(self.value)

    def _describe(self, value):
        return describe(value)

    def store(self, value) -> None:
        self._value, self._pending = self._place(value), None
        self.version += 1
