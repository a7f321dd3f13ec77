"""TensorFlow translation of :class:`toolkit.nn.ops_linalg.LinalgOps`."""

from __future__ import annotations

from toolkit.backends.tensorflow.environment import import_framework

tf = import_framework()


class TensorFlowLinalgOps:
    pass
