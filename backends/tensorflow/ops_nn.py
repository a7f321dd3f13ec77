"""TensorFlow translation of :class:`toolkit.nn.ops_nn.NNOps`."""

from __future__ import annotations

from toolkit.backends.tensorflow.environment import import_framework

tf = import_framework()


class TensorFlowNNOps:
    pass
