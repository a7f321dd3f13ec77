"""The neutral ops (:class:`toolkit.nn.ops.Ops`) as Aesara graph ops. They build symbolic graphs; the backend
compiles them with the JAX linker (for devices) or the C linker."""

from __future__ import annotations

import functools

from toolkit.backends.aesara.environment import import_framework
from toolkit.nn.ops import Ops, check_padding, check_pool_size, same_padding

import_framework()

import aesara.tensor as at  # noqa: E402
from aesara.tensor.special import log_softmax, softmax  # noqa: E402


def _shape(x) -> list:
    """Each axis as a Python int where the type knows it (always, as the backend compiles), else symbolic. Ints keep
    shape arithmetic out of the graph: Aesara re-runs its shape rewrites for every symbolic shape it allocates."""
    return [size if size is not None else x.shape[axis] for axis, size in enumerate(x.type.shape)]


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

    def max(self, x, axis=None, keepdims=False):
        return at.max(x, axis=axis, keepdims=keepdims)

    def conv2d(self, x, kernel, padding="valid"):
        # Aesara's own conv ops have no JAX conversion, so the convolution is an im2col: the kernel-offset slices of
        # the input side by side, times the flattened kernel. Plain slicing, concatenation and one matmul, which
        # every linker runs and differentiates. The kernel's shape must be static (parameters always are).
        x, kernel = at.as_tensor_variable(x), at.as_tensor_variable(kernel)
        kh, kw, cin, cout = kernel.type.shape
        if None in (kh, kw, cin, cout):
            raise ValueError("conv2d needs a kernel of static shape")
        if check_padding(padding) == "same":
            (top, bottom), (left, right) = same_padding(kh), same_padding(kw)
            n, h, w, c = _shape(x)
            padded = at.zeros((n, h + top + bottom, w + left + right, c), dtype=x.dtype)
            x = at.set_subtensor(padded[:, top:top + h, left:left + w, :], x)
        n, h, w, _ = _shape(x)
        out_h, out_w = h - kh + 1, w - kw + 1
        patches = at.concatenate([x[:, i:i + out_h, j:j + out_w, :] for i in range(kh) for j in range(kw)], axis=3)
        out = at.dot(at.reshape(patches, (n * out_h * out_w, kh * kw * cin)), at.reshape(kernel, (kh * kw * cin, cout)))
        return at.reshape(out, (n, out_h, out_w, cout))

    def max_pool2d(self, x, size):
        size = check_pool_size(size)
        x = at.as_tensor_variable(x)
        n, h, w, c = _shape(x)
        rows, cols = h // size, w // size
        windows = at.reshape(x[:, :rows * size, :cols * size, :], (n, rows, size, cols, size, c))
        return at.max(windows, axis=(2, 4))

    def reshape(self, x, shape):
        return at.reshape(x, tuple(shape))

    def concat(self, xs, axis=0):
        return at.concatenate(list(xs), axis=axis)

    def stack(self, xs, axis=0):
        return at.stack(list(xs), axis=axis)

    def squeeze(self, x, axis=None):
        return at.squeeze(x, axis=axis)

    def ones_like(self, x):
        x = at.as_tensor_variable(x)
        return at.ones(_shape(x), dtype=x.dtype)

    def zeros_like(self, x):
        x = at.as_tensor_variable(x)
        return at.zeros(_shape(x), dtype=x.dtype)

    def one_hot(self, indices, depth):
        # A comparison with a constant arange, not indexing with arange(n): the JAX linker needs static arange bounds.
        return at.eq(at.shape_padright(indices), at.arange(depth)).astype(self.dtype)

    def all_finite(self, xs):
        # Aesara 2.9 has isnan and isinf but no isfinite.
        finite = [at.all(at.invert(at.or_(at.isnan(x), at.isinf(x)))) for x in xs]
        return functools.reduce(at.and_, finite)
