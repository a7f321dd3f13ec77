"""How :func:`toolkit.from_keras` translates Keras' convolution, pooling, padding, cropping and upsampling layers,
1-D, 2-D and 3-D, channels last or first: each is the toolkit op Keras' own ``call`` uses (``ops.conv``,
``ops.depthwise_conv``, ``ops.separable_conv``, ``ops.conv_transpose``, ``ops.max_pool``, ``ops.average_pool``,
``ops.pad``, ``ops.repeat``, slicing) with the layer's arguments as Keras passes them.

:data:`LAYERS` maps Keras class names to translators and :data:`OPTIONS` lists the constructor arguments each reads
(see :mod:`toolkit.keras.layers`, which registers them).
"""

from __future__ import annotations

from toolkit.keras.translation import activation_of, layer_weights, require, unary


def _spatial_axes(data_format: str, rank: int) -> tuple[int, ...]:
    """The spatial axes of a ``rank``-D input (batch and channels around them)."""
    return tuple(range(1, rank + 1)) if data_format == "channels_last" else tuple(range(2, rank + 2))


# --- convolutions ------------------------------------------------------------------------------------------------
def _convolution(op: str):
    """Keras' ``Conv*``, ``DepthwiseConv*``, ``SeparableConv*`` and ``Conv*Transpose``: ``ops.<op>(x, *kernels,
    strides, padding, dilation_rate, data_format[, output_padding])``, the bias reshaped to the data format, then the
    activation (``base_conv.py`` and its siblings). ``Conv1D(padding="causal")`` pads the steps on the left by the
    dilated kernel's reach and convolves "valid", as Keras does."""

    def translate(layer, shape):
        weights, activation = layer_weights(layer), activation_of(layer)
        prefix, fmt, rank = layer.name, layer.data_format, len(shape) - 2
        kernels = [name for name in weights if name != f"{prefix}/bias"]
        bias = f"{prefix}/bias" if layer.use_bias else None
        causal = layer.padding == "causal"
        options = {"strides": tuple(layer.strides), "padding": "valid" if causal else layer.padding,
                   "data_format": fmt, "dilation_rate": tuple(layer.dilation_rate)}
        if op == "conv_transpose":
            options["output_padding"] = layer.output_padding
        reach = layer.dilation_rate[0] * (layer.kernel_size[0] - 1)
        channels_axis = -1 if fmt == "channels_last" else 1
        causal_pad = [[0, 0], [reach, 0], [0, 0]] if fmt == "channels_last" else [[0, 0], [0, 0], [reach, 0]]

        def step(ops, p, x, mask):
            if causal:
                x = ops.pad(x, causal_pad)
            y = getattr(ops, op)(x, *(p[k] for k in kernels), **options)
            if bias is not None:
                b = p[bias]
                y = y + (b if channels_axis == -1 else ops.reshape(b, (1, -1) + (1,) * rank))
            return activation(ops, y), mask

        return weights, step

    return translate


# --- pooling -----------------------------------------------------------------------------------------------------
def _pooling(op: str):
    """Keras' ``MaxPooling*`` and ``AveragePooling*``: ``ops.<op>(x, pool_size, strides, padding, data_format)``."""

    def translate(layer, shape):
        options = {"pool_size": tuple(layer.pool_size), "strides": tuple(layer.strides), "padding": layer.padding,
                   "data_format": layer.data_format}
        return {}, lambda ops, p, x, mask: (getattr(ops, op)(x, **options), mask)

    return translate


def _global(reduce: str):
    """Keras' ``GlobalMaxPooling*`` and ``GlobalAveragePooling*``: the max or mean over the spatial axes
    (``keepdims`` as given). ``GlobalAveragePooling1D`` with a Keras mask averages only the unmasked steps, as
    Keras does; the output has no mask."""

    def translate(layer, shape):
        axes, keepdims = _spatial_axes(layer.data_format, len(shape) - 2), layer.keepdims
        masked = type(layer).__name__ == "GlobalAveragePooling1D"
        feature_axis = 2 if layer.data_format == "channels_last" else 1

        def step(ops, p, x, mask):
            if masked and mask is not None:
                keep = ops.expand_dims(ops.cast(mask, "bool"), feature_axis)
                weight = ops.cast(keep, ops.dtype_of(x))
                return ops.sum(ops.where(keep, x, 0.0), axis=axes, keepdims=keepdims) / \
                    ops.sum(weight, axis=axes, keepdims=keepdims), None
            return getattr(ops, reduce)(x, axis=axes, keepdims=keepdims), None

        return {}, step

    return translate


# --- padding, cropping, upsampling -------------------------------------------------------------------------------
def _pairs(layer, attribute: str, rank: int) -> list[tuple[int, int]]:
    """``(before, after)`` per spatial axis of a ``ZeroPadding*`` or ``Cropping*`` layer (Keras keeps one pair for
    1-D layers)."""
    value = getattr(layer, attribute)
    return [tuple(value)] if rank == 1 else [tuple(pair) for pair in value]


def _zero_padding(layer, shape):
    """Keras' ``ZeroPadding*``: ``ops.pad`` with zeros before and after each spatial axis."""
    rank, fmt = len(shape) - 2, getattr(layer, "data_format", "channels_last")
    pads = _pairs(layer, "padding", rank)
    width = [(0, 0), *pads, (0, 0)] if fmt == "channels_last" else [(0, 0), (0, 0), *pads]
    return {}, lambda ops, p, x, mask: (ops.pad(x, width), mask)


def _cropping(layer, shape):
    """Keras' ``Cropping*``: each spatial axis without its first and last ``(before, after)`` positions."""
    rank, fmt = len(shape) - 2, getattr(layer, "data_format", "channels_last")
    axes = _spatial_axes(fmt, rank)
    index = [slice(None)] * len(shape)
    for axis, (before, after) in zip(axes, _pairs(layer, "cropping", rank)):
        index[axis] = slice(before, shape[axis] - after)
    index = tuple(index)
    return {}, lambda ops, p, x, mask: (x[index], mask)


def _upsampling(layer, shape):
    """Keras' ``UpSampling*``: each spatial position repeated ``size`` times along its axis (``ops.repeat``, Keras'
    "nearest" interpolation; the others, which Keras computes with ``ops.image.resize``, are refused)."""
    rank, fmt = len(shape) - 2, getattr(layer, "data_format", "channels_last")
    require(layer, getattr(layer, "interpolation", "nearest") == "nearest",
             f"interpolation={getattr(layer, 'interpolation', None)!r} (only 'nearest')")
    sizes = (layer.size,) if rank == 1 else tuple(layer.size)
    axes = _spatial_axes(fmt, rank)

    def step(ops, p, x, mask):
        for axis, size in zip(axes, sizes):
            x = ops.repeat(x, size, axis=axis)
        return x, mask

    return {}, step


_CONV = frozenset({"filters", "kernel_size", "strides", "padding", "data_format", "dilation_rate", "activation",
                   "use_bias"})
_POOLING = frozenset({"pool_size", "strides", "padding", "data_format"})
_GLOBAL = frozenset({"data_format", "keepdims"})
_ND = ("1D", "2D", "3D")

#: Keras layer class names and their translators.
LAYERS = {
    **{f"Conv{d}": unary(_convolution("conv")) for d in _ND},
    **{f"SeparableConv{d}": unary(_convolution("separable_conv")) for d in _ND[:2]},
    **{f"DepthwiseConv{d}": unary(_convolution("depthwise_conv")) for d in _ND[:2]},
    **{f"Conv{d}Transpose": unary(_convolution("conv_transpose")) for d in _ND},
    **{f"MaxPooling{d}": unary(_pooling("max_pool")) for d in _ND},
    **{f"AveragePooling{d}": unary(_pooling("average_pool")) for d in _ND},
    **{f"GlobalMaxPooling{d}": unary(_global("max")) for d in _ND},
    **{f"GlobalAveragePooling{d}": unary(_global("mean")) for d in _ND},
    **{f"ZeroPadding{d}": unary(_zero_padding) for d in _ND},
    **{f"Cropping{d}": unary(_cropping) for d in _ND},
    **{f"UpSampling{d}": unary(_upsampling) for d in _ND},
}

#: The constructor arguments each translator reads (see :data:`toolkit.keras.layers.OPTIONS`).
OPTIONS: dict[str, frozenset] = {
    **{f"Conv{d}": _CONV | {"groups"} for d in _ND},
    **{f"SeparableConv{d}": _CONV | {"depth_multiplier"} for d in _ND[:2]},
    **{f"DepthwiseConv{d}": (_CONV - {"filters"}) | {"depth_multiplier"} for d in _ND[:2]},
    **{f"Conv{d}Transpose": _CONV | {"output_padding"} for d in _ND},
    **{f"{kind}Pooling{d}": _POOLING for kind in ("Max", "Average") for d in _ND},
    **{f"Global{kind}Pooling{d}": _GLOBAL for kind in ("Max", "Average") for d in _ND},
    **{f"ZeroPadding{d}": frozenset({"padding", "data_format"}) for d in _ND},
    **{f"Cropping{d}": frozenset({"cropping", "data_format"}) for d in _ND},
    **{f"UpSampling{d}": frozenset({"size", "data_format", "interpolation"}) for d in _ND},
}
