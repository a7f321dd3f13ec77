"""TensorFlow translation of :class:`toolkit.ops.arrays.ArrayOps`: the ops are composites; what TensorFlow gives
here is the static value of a tensor and the bitcast."""

from __future__ import annotations

from toolkit.backends.tensorflow.environment import import_framework

tf = import_framework()


class TensorFlowArrayOps:
    def _constant_value(self, native):
        # An eager tensor's value, or a graph constant's; a variable's value can change, so it is never static.
        if not isinstance(native, tf.Tensor):
            return None
        return tf.get_static_value(native)

    def _bitcast(self, x, dtype):
        return tf.bitcast(x, dtype)
