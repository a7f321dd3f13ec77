"""TensorFlow translation of :class:`toolkit.ops.shapes.ShapeOps`."""

from __future__ import annotations

from toolkit.backends.tensorflow.environment import import_framework

tf = import_framework()


class TensorFlowShapeOps:
    def _reshape(self, x, shape):
        return tf.reshape(x, shape)

    def _transpose(self, x, axes):
        return tf.transpose(x, perm=axes)

    def _expand_dims(self, x, axis):
        return tf.expand_dims(x, axis)

    def _squeeze(self, x, axes):
        return tf.squeeze(x, axis=list(axes))

    def broadcast_to(self, x, shape):
        return tf.broadcast_to(x, shape)

    def cast(self, x, dtype):
        return tf.cast(x, dtype)

    def _concatenate(self, xs, axis):
        return tf.concat(list(xs), axis=axis)

    def stack(self, xs, axis=0):
        return tf.stack(list(xs), axis=axis)

    def _pad(self, x, pad_width, value):
        return tf.pad(x, pad_width, constant_values=tf.constant(value, x.dtype))

    def _take(self, x, indices, axis):
        return tf.gather(x, indices, axis=axis)

    def _take_along_axis(self, x, indices, axis):
        return tf.experimental.numpy.take_along_axis(x, indices, axis=axis)

    def _ones_like(self, x):
        return tf.ones_like(x)

    def _zeros_like(self, x):
        return tf.zeros_like(x)

    def _one_hot(self, x, num_classes, dtype):
        return tf.one_hot(x, num_classes, dtype=dtype)
