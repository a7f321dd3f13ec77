"""TensorFlow translation of :class:`toolkit.ops.math.MathOps`: elementwise math."""

from __future__ import annotations

import math

from toolkit.backends.tensorflow.environment import import_framework

tf = import_framework()


class TensorFlowMathOps:
    def arccos(self, x):
        return tf.math.acos(x)

    def arccosh(self, x):
        return tf.math.acosh(x)

    def arcsin(self, x):
        return tf.math.asin(x)

    def arcsinh(self, x):
        return tf.math.asinh(x)

    def arctan(self, x):
        return tf.math.atan(x)

    def arctanh(self, x):
        return tf.math.atanh(x)

    def cosh(self, x):
        return tf.math.cosh(x)

    def sinh(self, x):
        return tf.math.sinh(x)

    def tan(self, x):
        return tf.math.tan(x)

    def arctan2(self, x1, x2):
        return tf.math.atan2(x1, x2)

    def expm1(self, x):
        return tf.math.expm1(x)

    def log1p(self, x):
        return tf.math.log1p(x)

    def log2(self, x):
        return tf.math.log(x) / tf.constant(math.log(2.0), x.dtype)  # TensorFlow has no log2 kernel

    def log10(self, x):
        return tf.math.log(x) / tf.constant(math.log(10.0), x.dtype)

    def erfc(self, x):
        return tf.math.erfc(x)

    def erfinv(self, x):
        return tf.math.erfinv(x)

    def i0(self, x):
        return tf.math.bessel_i0(x)

    def nextafter(self, x1, x2):
        return tf.math.nextafter(x1, x2)

    def floor(self, x):
        return tf.math.floor(x)

    def ceil(self, x):
        return tf.math.ceil(x)

    def _rint(self, x):
        return tf.math.round(x)  # banker's rounding, as NumPy's rint

    def _sign(self, x):
        return tf.math.sign(x)

    def _isnan(self, x):
        return tf.math.is_nan(x)

    def _isinf(self, x):
        return tf.math.is_inf(x)
