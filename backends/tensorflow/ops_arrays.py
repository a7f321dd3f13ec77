"""TensorFlow translation of :class:`toolkit.nn.ops_arrays.ArrayOps`."""

from __future__ import annotations

from toolkit.backends.tensorflow.environment import import_framework

tf = import_framework()


class TensorFlowArrayOps:
    pass
