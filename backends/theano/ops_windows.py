"""Convolution, pooling and attention (:class:`toolkit.nn.ops_windows.WindowOps`) as Theano-family graphs."""

from __future__ import annotations

import functools

import numpy as np

from toolkit.nn.shapes import check_conv, output_size, same_padding, window

from .graphs import Apply, JaxOp, first_unless, jax, padded, shape_of, tt


def _windows(x, size, strides, dilation, out):
    """The strided, dilated slices of an NHWC input, one per kernel offset ``(i, j)``: each ``[n, out_h, out_w, c]``.
    A convolution or a pooling is then a sum or a reduction over them: no gather, no scatter."""
    return {(i, j): x[:, i * dilation[0]:i * dilation[0] + (out[0] - 1) * strides[0] + 1:strides[0],
                      j * dilation[1]:j * dilation[1] + (out[1] - 1) * strides[1] + 1:strides[1], :]
            for i in range(size[0]) for j in range(size[1])}


def _frame(x, size, strides, dilation, padding, value):
    """``x`` padded for a window op (TensorFlow's "same" placement), and the output's height and width."""
    n, h, w, c = shape_of(x)
    if padding == "same":
        pads = [same_padding(h, size[0], strides[0], dilation[0]), same_padding(w, size[1], strides[1], dilation[1])]
        x = padded(x, [(0, 0), *pads, (0, 0)], value)
    return x, (output_size(h, size[0], strides[0], dilation[0], padding),
               output_size(w, size[1], strides[1], dilation[1], padding))


def _frame_numpy(x: np.ndarray, size, strides, padding):
    """:func:`_frame` for a NumPy array (zeros around it for "same")."""
    if padding != "same":
        return x, None
    pads = [same_padding(x.shape[1], size[0], strides[0]), same_padding(x.shape[2], size[1], strides[1])]
    return np.pad(x, [(0, 0), *pads, (0, 0)]), None


class TheanoWindowOps:
    def conv(self, inputs, kernel, strides=1, padding="valid", dilation_rate=1):
        # The engines' own conv ops have no JAX conversion. Under the JAX linker the convolution is one op that
        # becomes lax.conv_general_dilated (_Conv); under the C linker (or with unknown image sizes) an im2col: the
        # kernel-offset slices of the input side by side, times the flattened kernel, plain slicing, concatenation
        # and one matmul, which every linker runs and differentiates. The kernel's shape must be static.
        strides, dilation, padding = check_conv(inputs.ndim, kernel.ndim, strides, dilation_rate, padding)
        kh, kw, cin, cout = kernel.type.shape
        if None in (kh, kw, cin, cout):
            raise ValueError("ops.conv needs a kernel of static shape")
        _, h, w, _ = inputs.type.shape
        if self.linker == "jax" and None not in (h, w):
            pads = ((0, 0), (0, 0)) if padding == "valid" else tuple(
                same_padding(size, k, stride, d) for size, k, stride, d in zip((h, w), (kh, kw), strides, dilation))
            return _Conv(strides, pads, dilation)(inputs, kernel)
        x, out = _frame(inputs, (kh, kw), strides, dilation, padding, 0)
        n = shape_of(x)[0]
        patches = tt.concatenate(list(_windows(x, (kh, kw), strides, dilation, out).values()), axis=3)
        flat = tt.dot(tt.reshape(patches, (n * out[0] * out[1], kh * kw * cin)), tt.reshape(kernel, (kh * kw * cin,
                                                                                                     cout)))
        return tt.reshape(flat, (n, *out, cout))

    def max_pool(self, inputs, pool_size, strides=None, padding="valid"):
        size, strides, padding = window(pool_size, strides, padding)
        x, out = _frame(inputs, size, strides, (1, 1), padding, -np.inf)
        # A chain of maxima over the window's offsets in row-major order: where entries tie, the gradient goes to the
        # first, as TensorFlow's MaxPoolGrad gives it (tt.max would give it to every tied entry, and ReLU outputs of
        # constant image regions do tie).
        larger = functools.partial(first_unless, tt.gt)
        pooled = functools.reduce(larger, _windows(x, size, strides, (1, 1), out).values())
        return tt.specify_shape(pooled, (shape_of(inputs)[0], *out, shape_of(inputs)[3]))  # Aesara loses it in slices

    def average_pool(self, inputs, pool_size, strides=None, padding="valid"):
        size, strides, padding = window(pool_size, strides, padding)
        x, out = _frame(inputs, size, strides, (1, 1), padding, 0)
        total = functools.reduce(tt.add, _windows(x, size, strides, (1, 1), out).values())
        # How many entries of each window lie inside the input: a constant, computed with NumPy the same way.
        _, h, w, _ = shape_of(inputs)
        ones, _ = _frame_numpy(np.ones((1, h, w, 1)), size, strides, padding)
        count = sum(ones[:, i:i + (out[0] - 1) * strides[0] + 1:strides[0], j:j + (out[1] - 1) * strides[1] + 1:
                         strides[1], :] for i in range(size[0]) for j in range(size[1]))
        return tt.specify_shape(total / tt.constant(count.astype(x.dtype)), (shape_of(inputs)[0], *out,
                                                                             shape_of(inputs)[3]))


class _Conv(JaxOp):
    """``ops.conv`` under the JAX linker: one op that is ``lax.conv_general_dilated`` (NHWC input, HWIO kernel),
    XLA's convolution, where the im2col graph (patches side by side, one matmul) made the bench ResNet's step
    1.4x plain JAX's. Its gradient is :class:`_ConvGradient`, ``jax.vjp`` of the same call. ``padding`` is explicit
    (before, after) pairs per spatial axis, TensorFlow's placement for "same"."""

    __props__ = ("strides", "padding", "dilation")  # equal convolutions are one op (Aesara merges their nodes)

    def __init__(self, strides, padding, dilation) -> None:
        self.strides, self.padding, self.dilation = tuple(strides), tuple(map(tuple, padding)), tuple(dilation)
        self._functions: dict = {}

    def make_node(self, inputs, kernel):
        inputs, kernel = tt.as_tensor_variable(inputs), tt.as_tensor_variable(kernel)
        n, h, w, _ = inputs.type.shape
        kh, kw, _, cout = kernel.type.shape
        out = [(size + a + b - (k - 1) * d - 1) // s + 1
               for size, k, s, d, (a, b) in zip((h, w), (kh, kw), self.strides, self.dilation, self.padding)]
        return Apply(self, [inputs, kernel], [tt.tensor(dtype=inputs.dtype, shape=(n, *out, cout))])

    def function(self):
        if "forward" not in self._functions:
            strides, padding, dilation = self.strides, self.padding, self.dilation

            def conv(inputs, kernel):
                return jax.lax.conv_general_dilated(inputs, kernel, strides, padding, rhs_dilation=dilation,
                                                    dimension_numbers=("NHWC", "HWIO", "NHWC"))

            self._functions["forward"] = conv
        return self._functions["forward"]

    def infer_shape(self, fgraph, node, shapes):
        return [(shapes[0][0], *node.outputs[0].type.shape[1:])]

    def L_op(self, inputs, outputs, output_grads):
        return _ConvGradient(self)(*inputs, output_grads[0])

    pullback = L_op  # PyTensor 3's name for L_op


class _ConvGradient(JaxOp):
    """The vector-Jacobian product of a :class:`_Conv` for its input and its kernel (XLA's transposed
    convolutions, as ``jax.vjp`` makes them). Not differentiable again: a gradient of it raises."""

    __props__ = ("conv",)

    def __init__(self, conv: _Conv) -> None:
        self.conv = conv
        self._functions: dict = {}

    def make_node(self, inputs, kernel, cotangent):
        inputs, kernel, cotangent = map(tt.as_tensor_variable, (inputs, kernel, cotangent))
        return Apply(self, [inputs, kernel, cotangent], [inputs.type(), kernel.type()])

    def function(self):
        if "vjp" not in self._functions:
            conv = self.conv.function()

            def vjp(inputs, kernel, cotangent):
                return jax.vjp(conv, inputs, kernel)[1](cotangent)

            self._functions["vjp"] = vjp
        return self._functions["vjp"]

    def infer_shape(self, fgraph, node, shapes):
        return shapes[:2]
