"""TensorFlow translation of :class:`toolkit.ops.elementwise.ElementwiseOps`."""

from __future__ import annotations

from toolkit.backends.tensorflow.environment import import_framework

tf = import_framework()


class TensorFlowElementwiseOps:
    def add(self, x1, x2):
        if x1.dtype == tf.bool:
            return tf.math.logical_or(x1, x2)  # no boolean Add kernel; NumPy's boolean sum is the "or"
        return tf.math.add(x1, x2)

    def _subtract(self, x1, x2):
        return tf.math.subtract(x1, x2)

    def multiply(self, x1, x2):
        if x1.dtype == tf.bool:
            return tf.math.logical_and(x1, x2)  # TensorFlow has no boolean Mul kernel; NumPy's product is the "and"
        return tf.math.multiply(x1, x2)

    def divide(self, x1, x2):
        return tf.math.divide(x1, x2)

    def _floor_divide(self, x1, x2):
        return tf.math.floordiv(x1, x2)

    def _mod(self, x1, x2):
        return tf.math.floormod(x1, x2)

    def power(self, x1, x2):
        return tf.math.pow(x1, x2)

    def negative(self, x):
        return tf.math.negative(x)

    def abs(self, x):
        return x if x.dtype == tf.bool else tf.math.abs(x)

    # TensorFlow has no boolean kernels for these: booleans are the "or" and "and", or compared as 0 and 1.
    def maximum(self, x1, x2):
        return tf.math.logical_or(x1, x2) if x1.dtype == tf.bool else tf.math.maximum(x1, x2)

    def minimum(self, x1, x2):
        return tf.math.logical_and(x1, x2) if x1.dtype == tf.bool else tf.math.minimum(x1, x2)

    def greater(self, x1, x2):
        return tf.math.greater(*_ordered(x1, x2))

    def greater_equal(self, x1, x2):
        return tf.math.greater_equal(*_ordered(x1, x2))

    def less(self, x1, x2):
        return tf.math.less(*_ordered(x1, x2))

    def less_equal(self, x1, x2):
        return tf.math.less_equal(*_ordered(x1, x2))

    def equal(self, x1, x2):
        return tf.math.equal(x1, x2)

    def not_equal(self, x1, x2):
        return tf.math.not_equal(x1, x2)

    def logical_and(self, x1, x2):
        return tf.math.logical_and(x1, x2)

    def logical_or(self, x1, x2):
        return tf.math.logical_or(x1, x2)

    def logical_not(self, x):
        return tf.math.logical_not(x)

    def _where(self, condition, x1, x2):
        return tf.where(condition, x1, x2)

    def relu(self, x):
        return tf.nn.relu(x)

    def tanh(self, x):
        return tf.math.tanh(x)

    def sigmoid(self, x):
        return tf.math.sigmoid(x)

    def exp(self, x):
        return tf.math.exp(x)

    def log(self, x):
        return tf.math.log(x)

    def sqrt(self, x):
        return tf.math.sqrt(x)

    def square(self, x):
        if x.dtype == tf.bool:
            x = tf.cast(x, tf.int32)  # Keras squares booleans as int32; TensorFlow has no boolean Square kernel
        return tf.math.square(x)

    def erf(self, x):
        # TensorFlow's float64 kernel gives NaN at +-inf (its float32 one gives +-1).
        return tf.where(tf.math.is_inf(x), tf.math.sign(x), tf.math.erf(x))

    def sin(self, x):
        return tf.math.sin(x)

    def cos(self, x):
        return tf.math.cos(x)

    def _softmax(self, x, axis):
        return tf.nn.softmax(x, axis=axis)

    def _log_softmax(self, x, axis):
        return tf.nn.log_softmax(x, axis=axis)


def _ordered(x1, x2):
    """Operands TensorFlow's comparisons take: booleans as int8 (False < True, as NumPy orders them)."""
    if x1.dtype == tf.bool:
        return tf.cast(x1, tf.int8), tf.cast(x2, tf.int8)
    return x1, x2
