"""TensorFlow translation of :class:`toolkit.nn.ops_windows.WindowOps`: convolution, pooling, attention."""

from __future__ import annotations

from toolkit.backends.tensorflow.environment import import_framework
from toolkit.nn.shapes import check_conv, window

tf = import_framework()


class TensorFlowWindowOps:
    def conv(self, inputs, kernel, strides=1, padding="valid", dilation_rate=1):
        strides, dilations, padding = check_conv(inputs.shape.rank, kernel.shape.rank, strides, dilation_rate,
                                                 padding)
        # tf.nn.convolution runs a dilated convolution as space_to_batch around a plain one: TensorFlow's CPU kernels
        # have no gradient for conv2d's own dilations.
        return tf.nn.convolution(inputs, kernel, strides=strides, padding=padding.upper(), dilations=dilations)

    def max_pool(self, inputs, pool_size, strides=None, padding="valid"):
        size, strides, padding = window(pool_size, strides, padding)
        pooled = tf.nn.max_pool2d(inputs, ksize=size, strides=strides, padding=padding.upper())
        # TensorFlow's MaxPool skips NaN; a window with one is NaN, as tf.maximum, NumPy and XLA give it.
        nan = tf.nn.max_pool2d(tf.cast(tf.math.is_nan(inputs), inputs.dtype), ksize=size, strides=strides,
                               padding=padding.upper()) > 0
        return tf.where(nan, tf.constant(float("nan"), inputs.dtype), pooled)

    def average_pool(self, inputs, pool_size, strides=None, padding="valid"):
        size, strides, padding = window(pool_size, strides, padding)
        return tf.nn.avg_pool2d(inputs, ksize=size, strides=strides, padding=padding.upper())
