"""Convolution and pooling primitives (:class:`toolkit.ops.windows.WindowOps`) as Theano-family graphs, channels
last, 1 to 3 spatial axes (the neutral layer checks the arguments and brings channels-first inputs here)."""

from __future__ import annotations

import functools
import itertools

import numpy as np

from toolkit.errors import ShapeError
from toolkit.ops.window_shapes import explicit_padding, padded_output_sizes

from .graphs import Apply, JaxOp, as_outputs, first_unless, jax, padded, shape_of, tt
from .kernels.conv_lowering import host_onednn, onednn_may_convolve, traced_conv

#: The spatial axes' letters of lax's dimension numbers, by spatial rank.
_SPATIAL = {1: "W", 2: "HW", 3: "DHW"}


def _windows(x, size, strides, dilation, out):
    """The strided, dilated slices of a ``[n, *spatial, c]`` input, one per window offset, each ``[n, *out, c]``.
    A convolution or a pooling is then a sum or a reduction over them: no gather, no scatter."""
    return [x[(slice(None), *(slice(o * d, o * d + (m - 1) * s + 1, s)
                              for o, d, m, s in zip(offset, dilation, out, strides)), slice(None))]
            for offset in itertools.product(*map(range, size))]


def _last(ndim: int, start: int, stop: int) -> tuple:
    """The index of ``[start:stop]`` along the last of ``ndim`` axes."""
    return (*(slice(None),) * (ndim - 1), slice(start, stop))


def _static_spatial(x, op: str) -> list[int]:
    sizes = x.type.shape[1:-1]
    if None in sizes:
        raise ShapeError(f"ops.{op} needs inputs of static spatial shape on this backend, got {x.type.shape}")
    return list(sizes)


class TheanoWindowOps:
    def _convolution(self, inputs, kernel, strides, padding, dilation, groups):
        # The engines' own conv ops have no JAX conversion. Under the JAX linker the convolution is one op that
        # becomes lax.conv_general_dilated or oneDNN's (_Conv, conv_lowering's choice); so it is under the C linker
        # where oneDNN is there for it (float32, ungrouped: _Conv runs on the host, several times faster than the
        # im2col on the bench ResNet's C-linker step). Otherwise (or
        # with unknown image sizes) an im2col: the window-offset slices of the input side by side, times the
        # flattened kernel (per group), plain slicing, concatenation and one matmul, which every linker runs and
        # differentiates.
        window = kernel.type.shape[:-2]
        on_host_onednn = self.linker != "jax" and onednn_may_convolve(inputs.dtype, groups, transpose=False)
        if (self.linker == "jax" or on_host_onednn) and None not in inputs.type.shape[1:]:
            pads = explicit_padding(_static_spatial(inputs, "conv"), window, strides, dilation, padding)
            return _Conv(strides, pads, dilation, groups)(inputs, kernel)
        if padding == "same":
            pads = explicit_padding(_static_spatial(inputs, "conv"), window, strides, dilation, padding)
            inputs = padded(inputs, [(0, 0), *pads, (0, 0)], 0)
        out = padded_output_sizes(shape_of(inputs)[1:-1], window, strides, dilation, [(0, 0)] * len(window))
        n, cin, cout = shape_of(inputs)[0], kernel.type.shape[-2], kernel.type.shape[-1]
        patches = _windows(inputs, window, strides, dilation, out)
        products = []
        for g in range(groups):
            side = tt.concatenate([p[_last(p.ndim, g * cin, (g + 1) * cin)] for p in patches], axis=-1)
            flat_kernel = tt.reshape(kernel[_last(kernel.ndim, g * cout // groups, (g + 1) * cout // groups)],
                                     (int(np.prod(window)) * cin, cout // groups))
            products.append(tt.dot(tt.reshape(side, (n * int(np.prod(out)), int(np.prod(window)) * cin)),
                                   flat_kernel))
        flat = products[0] if groups == 1 else tt.concatenate(products, axis=-1)
        return tt.reshape(flat, (n, *out, cout))

    def _conv_transpose(self, inputs, kernel, strides, padding, dilation):
        # One _Conv (lax.conv_transpose) on every linker: the C linker runs it, and its gradient, through JAX on the
        # host. The spatial sizes must be static.
        _static_spatial(inputs, "conv_transpose")
        return _Conv(strides, padding, dilation, 1, transpose=True)(inputs, kernel)

    def _max_pool(self, inputs, pool_size, strides, padding):
        if self.linker == "jax":
            return _Pool("max", pool_size, strides, _pool_padding(inputs, pool_size, strides, padding))(inputs)
        x, out = _frame(inputs, pool_size, strides, padding, -np.inf)
        # A chain of maxima over the window's offsets in row-major order: where entries tie, the gradient goes to the
        # first, as TensorFlow's MaxPoolGrad gives it (tt.max would give it to every tied entry, and ReLU outputs of
        # constant image regions do tie).
        larger = functools.partial(first_unless, tt.gt)
        pooled = functools.reduce(larger, _windows(x, pool_size, strides, (1,) * len(out), out))
        return tt.specify_shape(pooled, (inputs.type.shape[0], *out, inputs.type.shape[-1]))  # slices lose it

    def _average_pool(self, inputs, pool_size, strides, padding):
        if self.linker == "jax":
            return _Pool("average", pool_size, strides, _pool_padding(inputs, pool_size, strides, padding))(inputs)
        x, out = _frame(inputs, pool_size, strides, padding, 0)
        total = functools.reduce(tt.add, _windows(x, pool_size, strides, (1,) * len(out), out))
        # How many entries of each window lie inside the input: a constant, computed with NumPy the same way.
        ones = np.ones((1, *_static_spatial(inputs, "average_pool"), 1))
        if padding == "same":
            ones = np.pad(ones, [(0, 0), *explicit_padding(ones.shape[1:-1], pool_size, strides, (1,) * len(out),
                                                           padding), (0, 0)])
        count = sum(ones[(slice(None), *(slice(o, o + (m - 1) * s + 1, s) for o, m, s in zip(offset, out, strides)))]
                    for offset in itertools.product(*map(range, pool_size)))
        return tt.specify_shape(total / tt.constant(count.astype(inputs.dtype)),
                                (inputs.type.shape[0], *out, inputs.type.shape[-1]))


def _pool_padding(x, size, strides, padding):
    return explicit_padding(_static_spatial(x, "max_pool"), size, strides, (1,) * len(size), padding)


def _frame(x, size, strides, padding, value):
    """``x`` padded for a pooling (TensorFlow's "same" placement), and the output's spatial sizes."""
    sizes = _static_spatial(x, "max_pool")
    pads = explicit_padding(sizes, size, strides, (1,) * len(sizes), padding)
    if padding == "same":
        x = padded(x, [(0, 0), *pads, (0, 0)], value)
    return x, padded_output_sizes(sizes, size, strides, (1,) * len(sizes), pads)


class _Conv(JaxOp):
    """``ops.conv`` and its kin under the JAX linker: one op that is ``lax.conv_general_dilated`` (channels-last
    input, ``[*window, in, out]`` kernel, feature groups), or ``lax.conv_transpose(transpose_kernel=True)`` for a
    transposed convolution. An ungrouped convolution's forward and gradients are each XLA's or a patches product
    (im2col, in JAX), as :func:`conv_lowering.lowering` chooses for the platform and shapes: one op in the graph
    either way, where an im2col graph of the engine's own slices made the bench ResNet's step slower than plain
    JAX's.
    Its gradient is :class:`_ConvGradient`, ``jax.vjp`` of the same call.
    ``padding`` is explicit (before, after) pairs per spatial axis."""

    __props__ = ("strides", "padding", "dilation", "groups", "transpose")  # equal ones are one op (nodes merge)

    def __init__(self, strides, padding, dilation, groups: int = 1, transpose: bool = False) -> None:
        self.strides, self.padding, self.dilation = tuple(strides), tuple(map(tuple, padding)), tuple(dilation)
        self.groups, self.transpose = groups, transpose
        self._functions: dict = {}

    def make_node(self, inputs, kernel):
        inputs, kernel = tt.as_tensor_variable(inputs), tt.as_tensor_variable(kernel)
        sizes, window = inputs.type.shape[1:-1], kernel.type.shape[:-2]
        if self.transpose:  # the input dilated by the strides, convolved at stride 1 with the flipped kernel
            dilated = [(n - 1) * s + 1 for n, s in zip(sizes, self.strides)]
            out = padded_output_sizes(dilated, window, (1,) * len(sizes), self.dilation, self.padding)
            channels = kernel.type.shape[-2]
        else:
            out = padded_output_sizes(sizes, window, self.strides, self.dilation, self.padding)
            channels = kernel.type.shape[-1]
        return Apply(self, [inputs, kernel], [tt.tensor(dtype=inputs.dtype, shape=(inputs.type.shape[0], *out,
                                                                                   channels))])

    def function(self):
        if "forward" not in self._functions:
            spatial = _SPATIAL[len(self.strides)]
            numbers = (f"N{spatial}C", f"{spatial}IO", f"N{spatial}C")
            strides, padding, dilation, groups = self.strides, self.padding, self.dilation, self.groups

            if self.transpose:
                def conv(inputs, kernel):
                    return jax.lax.conv_transpose(inputs, kernel, strides, padding, rhs_dilation=dilation,
                                                  dimension_numbers=numbers, transpose_kernel=True)
            elif groups > 1:
                def conv(inputs, kernel):
                    if inputs.dtype == np.float64:
                        return _grouped_by_offsets(inputs, kernel, strides, padding, dilation, groups)
                    return jax.lax.conv_general_dilated(inputs, kernel, strides, padding, rhs_dilation=dilation,
                                                        dimension_numbers=numbers, feature_group_count=groups)
            else:  # XLA's, oneDNN's or a product per pass, chosen when traced
                conv = functools.partial(traced_conv, strides=strides, padding=padding, dilation=dilation)

            self._functions["forward"] = conv
        return self._functions["forward"]

    def infer_shape(self, fgraph, node, shapes):
        return [(shapes[0][0], *node.outputs[0].type.shape[1:])]

    def host_primitives(self, inputs, kernel):
        """oneDNN's primitives for this convolution of these host arrays where it computes every pass on the CPU
        (:func:`conv_lowering.host_onednn`), else None."""
        return host_onednn(inputs.dtype, inputs.shape, kernel.shape, self.strides, self.padding, self.dilation,
                           self.groups, self.transpose)

    def perform(self, node, inputs, outputs):
        primitives = self.host_primitives(*inputs)
        if primitives is None:
            return super().perform(node, inputs, outputs)
        outputs[0][0] = primitives.forward(*inputs)

    def L_op(self, inputs, outputs, output_grads):
        return _ConvGradient(self)(*inputs, output_grads[0])

    pullback = L_op  # PyTensor 3's name for L_op


def _grouped_by_offsets(inputs, kernel, strides, padding, dilation, groups: int):
    """A float64 grouped convolution as one product of the input's strided slices, one per window offset (stacked),
    with the kernel, batched over the groups. XLA's CPU compiler has no float64 grouped kernel: it makes the
    convolution dense with a kernel masked by zeros between groups, so a NaN or an infinity in one channel (0 * inf)
    reached every output channel. Here no product crosses a group."""
    x = jax.numpy.pad(inputs, ((0, 0), *padding, (0, 0)))
    window, (per_group, channels) = kernel.shape[:-2], kernel.shape[-2:]
    out = padded_output_sizes(x.shape[1:-1], window, strides, dilation, [(0, 0)] * len(window))
    parts = []
    for offset in itertools.product(*map(range, window)):
        start = (0, *(o * d for o, d in zip(offset, dilation)), 0)
        limit = (x.shape[0], *(b + (m - 1) * s + 1 for b, m, s in zip(start[1:-1], out, strides)), x.shape[-1])
        parts.append(jax.lax.slice(x, start, limit, (1, *strides, 1)))
    patches = jax.numpy.stack(parts, axis=-2)  # [n, *out, offsets, channels in]
    patches = patches.reshape(*patches.shape[:-1], groups, per_group)
    # Output channel g * (channels / groups) + j belongs to group g.
    weights = kernel.reshape(len(parts), per_group, groups, channels // groups)
    found = jax.numpy.einsum("...wgi,wigo->...go", patches, weights)
    # A sum from 0.0 (NumPy's, TensorFlow's) is never -0.0; XLA's CPU dot of these few terms can start from its
    # first product instead (seen on an AVX-512 machine: -0.0 * k + -0.0 * k gave -0.0). Adding -found where found
    # is a zero makes it +0.0 and changes nothing else; it is data, so XLA cannot fold it away as it folds x + 0,
    # and it is outside the gradient, which stays the product's.
    found = found + jax.lax.stop_gradient(jax.numpy.where(found == 0, -found, jax.numpy.zeros((), found.dtype)))
    return found.reshape(*found.shape[:-2], channels)


class _VectorJacobian(JaxOp):
    """The vector-Jacobian product of a window op (a :class:`_Conv` or :class:`_Pool`) for each of its inputs,
    ``jax.vjp`` of the same function (XLA's transposed convolutions, select-and-scatter for a maximum). Not
    differentiable again: a gradient of it raises."""

    __props__ = ("forward",)

    def __init__(self, forward: JaxOp) -> None:
        self.forward = forward
        self._functions: dict = {}

    def make_node(self, *inputs_and_cotangent):
        variables = [tt.as_tensor_variable(v) for v in inputs_and_cotangent]
        return Apply(self, variables, [v.type() for v in variables[:-1]])

    def function(self):
        if "vjp" not in self._functions:
            forward = self.forward.function()

            def vjp(*inputs_and_cotangent):
                return as_outputs(jax.vjp(forward, *inputs_and_cotangent[:-1])[1](inputs_and_cotangent[-1]))

            self._functions["vjp"] = vjp
        return self._functions["vjp"]

    def infer_shape(self, fgraph, node, shapes):
        return shapes[:-1]


class _ConvGradient(_VectorJacobian):
    """The gradient of a :class:`_Conv` for its input and its kernel."""

    def perform(self, node, inputs, outputs):
        (x, kernel, cotangent), primitives = inputs, self.forward.host_primitives(*inputs[:2])
        if primitives is None:
            return super().perform(node, inputs, outputs)
        outputs[0][0] = primitives.input_gradient(cotangent, kernel)
        outputs[1][0] = primitives.kernel_gradient(x, cotangent)


class _PoolGradient(_VectorJacobian):
    """The gradient of a :class:`_Pool` for its input. ``jax.vjp`` of a windowed maximum is XLA's select-and-scatter
    with ``>=``: a tied maximum's gradient goes to its first entry, as TensorFlow's MaxPoolGrad gives it."""


class _Pool(JaxOp):
    """A maximum or an average over windows under the JAX linker: ``lax.reduce_window`` (NaN propagates through
    ``lax.max``), where a chain of a slice per window offset made graphs the engine takes seconds to rewrite (a
    3-D window: tens of seconds). ``padding``: (before, after) pairs per spatial axis, filled with minus infinity
    for a maximum; an average counts only the entries inside the input."""

    __props__ = ("kind", "size", "strides", "padding")

    def __init__(self, kind: str, size, strides, padding) -> None:
        self.kind, self.size, self.strides = kind, tuple(size), tuple(strides)
        self.padding = tuple(map(tuple, padding))
        self._functions: dict = {}

    def make_node(self, inputs):
        inputs = tt.as_tensor_variable(inputs)
        out = padded_output_sizes(inputs.type.shape[1:-1], self.size, self.strides, (1,) * len(self.size), self.padding)
        return Apply(self, [inputs], [tt.tensor(dtype=inputs.dtype, shape=(inputs.type.shape[0], *out,
                                                                           inputs.type.shape[-1]))])

    def function(self):
        if "forward" not in self._functions:
            window, strides = (1, *self.size, 1), (1, *self.strides, 1)
            padding = ((0, 0), *self.padding, (0, 0))
            if self.kind == "max":
                def pool(inputs):
                    return jax.lax.reduce_window(inputs, -np.inf, jax.lax.max, window, strides, padding)
            else:  # the mean of the entries inside the input (their count: the same sum over ones, folded by XLA)
                def pool(inputs):
                    total = jax.lax.reduce_window(inputs, 0.0, jax.lax.add, window, strides, padding)
                    ones = jax.numpy.ones((1, *inputs.shape[1:-1], 1), inputs.dtype)
                    return total / jax.lax.reduce_window(ones, 0.0, jax.lax.add, window, strides, padding)

            self._functions["forward"] = pool
        return self._functions["forward"]

    def infer_shape(self, fgraph, node, shapes):
        return [(shapes[0][0], *node.outputs[0].type.shape[1:])]

    def L_op(self, inputs, outputs, output_grads):
        return [_PoolGradient(self)(*inputs, output_grads[0])]

    pullback = L_op
