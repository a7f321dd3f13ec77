"""TensorFlow translation of :class:`toolkit.nn.ops_reductions.ReductionOps`."""

from __future__ import annotations

from toolkit.backends.tensorflow.environment import import_framework

tf = import_framework()


class TensorFlowReductionOps:
    pass
