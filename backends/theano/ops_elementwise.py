"""Theano-family translation of :class:`toolkit.ops.elementwise.ElementwiseOps`."""

from __future__ import annotations

import numpy as np

from .graphs import first_unless, floor_divide, log_softmax, select, softmax, true_divide, tt


class TheanoElementwiseOps:
    def add(self, x1, x2):
        return tt.add(x1, x2)

    def _subtract(self, x1, x2):
        return tt.sub(x1, x2)

    def multiply(self, x1, x2):
        return tt.mul(x1, x2)

    def divide(self, x1, x2):
        return true_divide(x1, x2)

    def _floor_divide(self, x1, x2):
        if x1.dtype.startswith("float"):
            # floor(x1 / x2), as TensorFlow's FloorDiv: the engines rewrite a float x // 1 into x (1.5 // 1.0 would
            # be 1.5).
            return tt.floor(true_divide(x1, x2))
        return floor_divide(x1, x2)

    def _mod(self, x1, x2):
        return tt.mod(x1, x2)

    def power(self, x1, x2):
        return tt.pow(x1, x2)

    def negative(self, x):
        return tt.neg(x)

    def abs(self, x):
        return tt.abs(x)

    def maximum(self, x1, x2):
        # switch, not tt.maximum: Aesara's maximum gives both operands the whole gradient at a tie, TensorFlow x1.
        return first_unless(tt.gt, x1, x2)

    def minimum(self, x1, x2):
        return first_unless(tt.lt, x1, x2)

    def greater(self, x1, x2):
        return tt.gt(x1, x2)

    def greater_equal(self, x1, x2):
        return tt.ge(x1, x2)

    def less(self, x1, x2):
        return tt.lt(x1, x2)

    def less_equal(self, x1, x2):
        return tt.le(x1, x2)

    def equal(self, x1, x2):
        return tt.eq(x1, x2)

    def not_equal(self, x1, x2):
        return tt.neq(x1, x2)

    def logical_and(self, x1, x2):
        return tt.and_(x1, x2)

    def logical_or(self, x1, x2):
        return tt.or_(x1, x2)

    def logical_not(self, x):
        return tt.invert(x)

    def _where(self, condition, x1, x2):
        return select(condition, x1, x2)

    def relu(self, x):
        # switch, not maximum: maximum's gradient at x == 0 is not the 0 TensorFlow uses; x <= 0, not x > 0, so that
        # NaN stays NaN.
        return tt.switch(tt.le(x, 0), 0, x)

    def tanh(self, x):
        return tt.tanh(x)

    def sigmoid(self, x):
        return tt.sigmoid(x)

    def exp(self, x):
        return tt.exp(x)

    def log(self, x):
        return tt.log(x)

    def sqrt(self, x):
        return tt.sqrt(x)

    def square(self, x):
        return tt.square(tt.cast(x, "int32") if x.dtype == "bool" else x)  # Keras squares booleans as int32

    def erf(self, x):
        return tt.erf(x)

    def sin(self, x):
        return tt.sin(x)

    def cos(self, x):
        return tt.cos(x)

    def _softmax(self, x, axis):
        # A slice whose maximum is NaN or infinite is NaN (inf - inf), as NumPy, Keras and TensorFlow give it; XLA's
        # CPU kernels, which the JAX linker compiles to, give 0 for its finite entries (jit(jax.nn.softmax), 0.4.30).
        if x.type.shape[axis] == 0:
            return softmax(x, axis=axis)  # empty: no maximum (and nothing to make NaN)
        peak = tt.max(x, axis=axis, keepdims=True)
        return tt.switch(tt.isnan(peak) | tt.isinf(peak), np.nan, softmax(x, axis=axis))

    def _log_softmax(self, x, axis):
        return log_softmax(x, axis=axis)
