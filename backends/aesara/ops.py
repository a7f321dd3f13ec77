"""The neutral ops (:class:`toolkit.ops.Ops`) as Aesara graph ops. They build symbolic graphs; the backend
compiles them with the JAX linker (for devices) or the C linker."""

from __future__ import annotations

import functools

from backends.aesara.environment import import_framework
from toolkit.ops import Ops

import_framework()

import aesara.tensor as at  # noqa: E402
from aesara.tensor.special import log_softmax, softmax  # noqa: E402


class AesaraOps(Ops):
    def matmul(self, a, b):
        return at.dot(a, b)

    def relu(self, x):
        # switch, not maximum: maximum's gradient at x == 0 is not the 0 TensorFlow uses.
        return at.switch(x > 0, x, 0)

    def tanh(self, x):
        return at.tanh(x)

    def sigmoid(self, x):
        return at.sigmoid(x)

    def softmax(self, x, axis=-1):
        return softmax(x, axis=axis)

    def log_softmax(self, x, axis=-1):
        return log_softmax(x, axis=axis)

    def exp(self, x):
        return at.exp(x)

    def log(self, x):
        return at.log(x)

    def sqrt(self, x):
        return at.sqrt(x)

    def square(self, x):
        return at.square(x)

    def sum(self, x, axis=None, keepdims=False):
        return at.sum(x, axis=axis, keepdims=keepdims)

    def mean(self, x, axis=None, keepdims=False):
        return at.mean(x, axis=axis, keepdims=keepdims)

    def reshape(self, x, shape):
        return at.reshape(x, tuple(shape))

    def concat(self, xs, axis=0):
        return at.concatenate(list(xs), axis=axis)

    def stack(self, xs, axis=0):
        return at.stack(list(xs), axis=axis)

    def squeeze(self, x, axis=None):
        return at.squeeze(x, axis=axis)

    def ones_like(self, x):
        return at.ones_like(x)

    def one_hot(self, indices, depth):
        # A comparison with a constant arange, not indexing with arange(n): the JAX linker needs static arange bounds.
        return at.eq(at.shape_padright(indices), at.arange(depth)).astype(self.dtype)

    def all_finite(self, xs):
        # Aesara 2.9 has isnan and isinf but no isfinite.
        finite = [at.all(at.invert(at.or_(at.isnan(x), at.isinf(x)))) for x in xs]
        return functools.reduce(at.and_, finite)
