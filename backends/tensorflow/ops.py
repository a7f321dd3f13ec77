"""The neutral ops (:class:`toolkit.nn.ops.Ops`) as TensorFlow ops."""

from __future__ import annotations

from toolkit.backends.tensorflow.environment import import_framework
from toolkit.nn.ops import Ops, check_padding, check_pool_size

tf = import_framework()


class TensorFlowOps(Ops):
    def matmul(self, a, b):
        return tf.linalg.matmul(a, b)

    def relu(self, x):
        return tf.nn.relu(x)

    def tanh(self, x):
        return tf.math.tanh(x)

    def sigmoid(self, x):
        return tf.math.sigmoid(x)

    def softmax(self, x, axis=-1):
        return tf.nn.softmax(x, axis=axis)

    def log_softmax(self, x, axis=-1):
        return tf.nn.log_softmax(x, axis=axis)

    def exp(self, x):
        return tf.math.exp(x)

    def log(self, x):
        return tf.math.log(x)

    def sqrt(self, x):
        return tf.math.sqrt(x)

    def square(self, x):
        return tf.math.square(x)

    def sum(self, x, axis=None, keepdims=False):
        return tf.math.reduce_sum(x, axis=axis, keepdims=keepdims)

    def mean(self, x, axis=None, keepdims=False):
        return tf.math.reduce_mean(x, axis=axis, keepdims=keepdims)

    def max(self, x, axis=None, keepdims=False):
        return tf.math.reduce_max(x, axis=axis, keepdims=keepdims)

    def conv2d(self, x, kernel, padding="valid"):
        return tf.nn.conv2d(x, kernel, strides=1, padding=check_padding(padding).upper())

    def max_pool2d(self, x, size):
        size = check_pool_size(size)
        return tf.nn.max_pool2d(x, ksize=size, strides=size, padding="VALID")

    def reshape(self, x, shape):
        return tf.reshape(x, shape)

    def concat(self, xs, axis=0):
        return tf.concat(list(xs), axis=axis)

    def stack(self, xs, axis=0):
        return tf.stack(list(xs), axis=axis)

    def squeeze(self, x, axis=None):
        return tf.squeeze(x, axis=axis)

    def ones_like(self, x):
        return tf.ones_like(x)

    def zeros_like(self, x):
        return tf.zeros_like(x)

    def one_hot(self, indices, depth):
        return tf.one_hot(indices, depth, dtype=self.dtype)

    def all_finite(self, xs):
        return tf.reduce_all([tf.reduce_all(tf.math.is_finite(x)) for x in xs])
