"""TensorFlow translation of :class:`toolkit.ops.sorting.SortingOps`: ``tf.argsort``, NaN put last."""

from __future__ import annotations

import numpy as np

from toolkit.backends.tensorflow.environment import import_framework

tf = import_framework()


class TensorFlowSortingOps:
    def _argsort(self, x, axis):
        if not x.dtype.is_floating:
            return tf.argsort(x, axis=axis, stable=True)
        # tf.argsort leaves NaN anywhere. Sorted twice, stably: by value with NaN as +inf, then by whether NaN, so
        # NaN comes after +inf and ties keep their order.
        nan = tf.math.is_nan(x)
        by_value = tf.argsort(tf.where(nan, tf.constant(np.inf, x.dtype), x), axis=axis, stable=True)
        by_nan = tf.argsort(tf.cast(_along(nan, by_value, axis), tf.int32), axis=axis, stable=True)
        return _along(by_value, by_nan, axis)


def _along(x, indices, axis):
    return tf.experimental.numpy.take_along_axis(x, indices, axis=axis)
