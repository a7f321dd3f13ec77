"""TensorFlow translation of :class:`toolkit.ops.reductions.ReductionOps`."""

from __future__ import annotations

import numpy as np

from toolkit.backends.tensorflow.environment import import_framework

tf = import_framework()

_SEGMENT_OPS = {"sum": tf.math.unsorted_segment_sum, "prod": tf.math.unsorted_segment_prod,
                "max": tf.math.unsorted_segment_max, "min": tf.math.unsorted_segment_min}


class TensorFlowReductionOps:
    def _prod(self, x, axes, keepdims):
        return tf.math.reduce_prod(x, axis=list(axes), keepdims=keepdims)

    def _reduce_any(self, x, axes, keepdims):
        return tf.math.reduce_any(x, axis=list(axes), keepdims=keepdims)

    def _reduce_all(self, x, axes, keepdims):
        return tf.math.reduce_all(x, axis=list(axes), keepdims=keepdims)

    def _segment_reduce(self, data, segment_ids, num_segments, reduction):
        # TensorFlow drops negative ids but fails on ids >= num_segments (on CPU): those are dropped too.
        ids = tf.where(segment_ids < num_segments, segment_ids, -1)
        found = _SEGMENT_OPS[reduction](data, ids, num_segments)
        if reduction in ("max", "min") and data.dtype.is_floating:
            # TensorFlow's segment maxima and minima start from the dtype's lowest (highest) finite value, so a
            # segment of -inf (+inf) only gives that value, and they skip NaN. A segment with NaN is NaN, and an
            # empty one or one of infinities that infinity, as in JAX (Keras on JAX and NumPy).
            def each(condition, reduce):
                return reduce(tf.cast(condition, tf.int32), ids, num_segments) > 0

            infinity = tf.constant(-np.inf if reduction == "max" else np.inf, data.dtype)
            members = each(tf.ones_like(data, tf.bool), tf.math.unsorted_segment_max)
            infinite = tf.logical_and(members, each(tf.equal(data, infinity), tf.math.unsorted_segment_min))
            found = tf.where(tf.logical_or(infinite, tf.logical_not(members)), infinity, found)
            nan = each(tf.math.is_nan(data), tf.math.unsorted_segment_max)
            found = tf.where(nan, tf.constant(np.nan, data.dtype), found)
        return found
