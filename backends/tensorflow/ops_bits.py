"""TensorFlow translation of :class:`toolkit.ops.bits.BitOps`: ``tf.bitwise``, and Euclid's algorithm for gcd."""

from __future__ import annotations

from toolkit.backends.tensorflow.environment import import_framework

tf = import_framework()


class TensorFlowBitOps:
    def _bitwise(self, x1, x2, operation):
        return {"and": tf.bitwise.bitwise_and, "or": tf.bitwise.bitwise_or,
                "xor": tf.bitwise.bitwise_xor}[operation](x1, x2)

    def _invert(self, x):
        return tf.bitwise.invert(x)

    def _shift(self, x, y, direction):
        return (tf.bitwise.left_shift if direction == "left" else tf.bitwise.right_shift)(x, y)

    def _gcd(self, x1, x2):
        # Euclid's algorithm on the whole array, until every remainder is 0 (TensorFlow has no gcd kernel).
        shape = tf.broadcast_dynamic_shape(tf.shape(x1), tf.shape(x2))
        a, b = tf.abs(tf.broadcast_to(x1, shape)), tf.abs(tf.broadcast_to(x2, shape))

        def step(a, b):
            zero = tf.equal(b, 0)
            remainder = tf.math.floormod(a, tf.where(zero, tf.ones_like(b), b))
            return tf.where(zero, a, b), tf.where(zero, tf.zeros_like(b), remainder)

        found, _ = tf.while_loop(lambda a, b: tf.reduce_any(tf.not_equal(b, 0)), step, (a, b))
        return tf.ensure_shape(found, tf.broadcast_static_shape(x1.shape, x2.shape))
