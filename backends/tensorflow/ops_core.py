"""TensorFlow translation of :class:`toolkit.ops.core.CoreOps`."""

from __future__ import annotations

from toolkit.backends.tensorflow.environment import import_framework

tf = import_framework()


class TensorFlowCoreOps:
    def stop_gradient(self, variable):
        return tf.stop_gradient(variable)

    def _scatter_rows(self, x, rows, updates, reduction):
        scatter = tf.tensor_scatter_nd_update if reduction is None else tf.tensor_scatter_nd_add
        return scatter(x, rows[:, None], updates)
