"""Device-placed variables for Aesara: Theano's ``shared(value, target=...)`` had no successor in Aesara, so a
variable is a ``jax.Array`` committed to its device (JAX linker) or a NumPy array (C linker, host only)."""

from __future__ import annotations

import numpy as np

from toolkit.variables import Variable


def describe(value) -> tuple[tuple[int, ...], str]:
    dtype = value.dtype if hasattr(value, "dtype") else np.asarray(value).dtype
    return tuple(np.shape(value)), np.dtype(dtype).name


class AesaraVariable(Variable):
    def __init__(self, value: np.ndarray, device, place, name: str | None) -> None:
        super().__init__(device, value.shape, value.dtype.name, name)
        self._place = place
        self._value = place(value)

    @property
    def value(self):
        return self._value

    def numpy(self) -> np.ndarray:
        return np.array(self._value)

    def _describe(self, value):
        return describe(value)

    def _write(self, value) -> None:
        self._value = self._place(value)
