"""TensorFlow translation of :class:`toolkit.ops.windows.WindowOps`: convolution and pooling primitives,
channels last (the neutral layer brings channels-first inputs here and checks every argument)."""

from __future__ import annotations

from toolkit.backends.tensorflow.environment import import_framework
from toolkit.ops.window_shapes import explicit_padding

tf = import_framework()


def _static_spatial(x, op: str) -> list[int]:
    sizes = x.shape.as_list()[1:-1]
    if None in sizes:
        raise ValueError(f"ops.{op} with these strides and dilation needs inputs of static spatial shape, got "
                         f"{x.shape}")
    return sizes


def _strided(x, strides):
    """Every ``strides``-th position of each spatial axis, from the first."""
    return x[(slice(None), *(slice(None, None, s) for s in strides), slice(None))]


def _padded(x, pads):
    """``x`` with (before, after) zeros on each spatial axis; a negative count crops instead."""
    crop = tuple(slice(max(-a, 0), None if b >= 0 else b) for a, b in pads)
    x = x[(slice(None), *crop, slice(None))]
    return tf.pad(x, [(0, 0), *((max(a, 0), max(b, 0)) for a, b in pads), (0, 0)])


def _dilated_kernel(kernel, dilation):
    """``kernel`` ``[*window, in, out]`` with ``dilation - 1`` zeros between its taps along each spatial axis."""
    for axis, d in enumerate(dilation):
        if d > 1:
            shape = tf.unstack(tf.shape(kernel))
            taps = tf.stack([kernel] + [tf.zeros_like(kernel)] * (d - 1), axis=axis + 1)
            size = kernel.shape[axis]
            kernel = tf.reshape(taps, [*shape[:axis], size * d, *shape[axis + 1:]])
            kernel = kernel[(*(slice(None),) * axis, slice(0, (size - 1) * d + 1))]
    return kernel


class TensorFlowWindowOps:
    def _convolution(self, inputs, kernel, strides, padding, dilation, groups):
        return _convolve(inputs, kernel, strides, padding, dilation, groups)

    def _conv_transpose(self, inputs, kernel, strides, padding, dilation):
        return _transposed(inputs, kernel, strides, padding, dilation)

    def _max_pool(self, inputs, pool_size, strides, padding):
        pooled = _pool(tf.nn.max_pool, inputs, pool_size, strides, padding)
        # TensorFlow's MaxPool skips NaN; a window with one is NaN, as tf.maximum, NumPy and XLA give it.
        nan = _pool(tf.nn.max_pool, tf.cast(tf.math.is_nan(inputs), inputs.dtype), pool_size, strides, padding) > 0
        return tf.where(nan, tf.constant(float("nan"), inputs.dtype), pooled)

    def _average_pool(self, inputs, pool_size, strides, padding):
        return _pool(tf.nn.avg_pool, inputs, pool_size, strides, padding)


def _convolve(inputs, kernel, strides, padding, dilation, groups):
    """:meth:`~toolkit.ops.windows.WindowOps._convolution` with TensorFlow's kernels."""
    rank = len(strides)
    depthwise = groups > 1 and kernel.shape[-2] == 1 and rank <= 2
    # TensorFlow's depthwise kernel takes equal strides along its two axes (a 1-D input is one row).
    unequal = depthwise and len(set(strides if rank == 2 else (1, *strides))) > 1
    if max(strides) > 1 and (max(dilation) > 1 or unequal):
        # TensorFlow's convolutions refuse strides and dilation together: the convolution at stride 1 over the
        # same zeros, then every strides-th position (exact; strides^rank times the products).
        pads = explicit_padding(_static_spatial(inputs, "conv"), kernel.shape[:-2], strides, dilation, padding)
        full = _convolve(_padded(inputs, pads), kernel, (1,) * rank, "valid", dilation, groups)
        return _strided(full, strides)
    if depthwise:
        # TensorFlow's own depthwise kernel, on 2-D inputs with a [*window, channels, multiplier] kernel.
        x, k = (inputs, kernel) if rank == 2 else (inputs[:, None], kernel[None])
        k = tf.reshape(k, [*k.shape[:2], groups, kernel.shape[-1] // groups])
        out = tf.nn.depthwise_conv2d(x, k, (1, *((1,) * (2 - rank)), *strides, 1), padding.upper(),
                                     dilations=(*((1,) * (2 - rank)), *dilation))
        return out if rank == 2 else out[:, 0]
    if groups > 1:
        # TensorFlow's CPU has no gradient of a grouped convolution, and no grouped 3-D one: one convolution per
        # group, side by side.
        return tf.concat([_convolve(x, k, strides, padding, dilation, 1) for x, k in
                          zip(tf.split(inputs, groups, axis=-1), tf.split(kernel, groups, axis=-1))], axis=-1)
    # tf.nn.convolution runs a dilated convolution as space_to_batch around a plain one: TensorFlow's CPU kernels
    # have no gradient for conv2d's own dilations.
    return tf.nn.convolution(inputs, kernel, strides=strides, padding=padding.upper(), dilations=dilation)


def _transposed(inputs, kernel, strides, padding, dilation):
    """:meth:`~toolkit.ops.windows.WindowOps._conv_transpose` with TensorFlow's kernels."""
    # tf.nn.conv_transpose (the input gradient of a convolution) with "VALID" padding is the transposed
    # convolution over the fully padded, stride-dilated input: (span - 1) zeros each side. Keras' padding is then
    # a crop of it (or more zeros, where Keras pads further). TensorFlow's CPU kernels refuse dilations here, so
    # the kernel is dilated with zeros instead.
    kernel = _dilated_kernel(kernel, dilation)
    spans = kernel.shape[:-2]
    sizes = [(n - 1) * s + k if n is not None else None
             for n, s, k in zip(inputs.shape[1:-1], strides, spans)]
    if None in sizes:
        dynamic = tf.shape(inputs)[1:-1]
        sizes = [(dynamic[i] - 1) * s + k if n is None else n for i, (n, s, k) in enumerate(zip(sizes, strides,
                                                                                               spans))]
    shape = tf.stack([tf.shape(inputs)[0], *sizes, kernel.shape[-2]])
    full = tf.nn.conv_transpose(inputs, kernel, shape, strides, padding="VALID")
    return _padded(full, [(a - (k - 1), b - (k - 1)) for (a, b), k in zip(padding, spans)])


def _pool(pool, x, size, strides, padding):
    """``pool`` (tf.nn.max_pool or avg_pool) over 1 to 3 spatial axes. TensorFlow's CPU has no float64 3-D pools:
    there a 3-D window is pooled over height and width, then over depth (a maximum, and a mean of the entries
    inside the input, are separable: the count of a box is the product of its axes' counts)."""
    if len(size) == 3 and x.dtype == tf.float64:
        batch, depth, height, width, channels = tf.unstack(tf.shape(x))
        planes = pool(tf.reshape(x, [-1, height, width, channels]), size[1:], strides[1:], padding.upper())
        h, w = planes.shape[1:3]
        planes = tf.reshape(planes, [batch, depth, h * w, channels])
        out = pool(planes, (size[0], 1), (strides[0], 1), padding.upper())
        return tf.reshape(out, [batch, out.shape[1] if out.shape[1] is not None else -1, h, w, channels])
    return pool(x, size, strides, padding.upper())
