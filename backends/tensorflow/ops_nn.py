"""TensorFlow translation of :class:`toolkit.ops.nn.NNOps`: activations, losses, normalizations."""

from __future__ import annotations

from toolkit.backends.tensorflow.environment import import_framework

tf = import_framework()


class TensorFlowNNOps:
    def relu6(self, x):
        # One fused kernel whose gradient is 0 at 0 and 6 (JAX's), and which keeps NaN.
        return tf.nn.relu6(x)

    def log_sigmoid(self, x):
        return tf.math.log_sigmoid(x)
