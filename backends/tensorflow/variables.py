"""Device-placed variables as ``tf.Variable``."""

from __future__ import annotations

import numpy as np

from toolkit.backends.tensorflow.environment import import_framework
from toolkit.placement.variables import Variable

tf = import_framework()


def describe(value) -> tuple[tuple[int, ...], str]:
    if isinstance(value, (tf.Tensor, tf.Variable)):
        return tuple(value.shape), value.dtype.name
    value = np.asarray(value)
    return value.shape, value.dtype.name


class TensorFlowVariable(Variable):
    def __init__(self, value: np.ndarray, device, native_device: str, name: str | None) -> None:
        super().__init__(device, value.shape, value.dtype.name, name)
        self._native_device = native_device
        with tf.device(native_device):
            self._variable = tf.Variable(value, name=name, trainable=True)

    @property
    def value(self) -> tf.Variable:
        return self._variable

    def numpy(self) -> np.ndarray:
        return self._variable.numpy()

    def _describe(self, value):
        return describe(value)

    def store(self, value) -> None:
        with tf.device(self._native_device):
            self._variable.assign(value)
