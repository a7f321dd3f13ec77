"""How :func:`toolkit.from_keras` translates Keras' layers that move or rescale values without weights:
``Reshape``, ``Permute``, ``RepeatVector``, ``Rescaling``, ``Identity`` and the ``Dot`` merge, each as Keras' own
``call`` computes it (see :mod:`toolkit.keras.layers`, which registers :data:`LAYERS` and :data:`OPTIONS`).
"""

from __future__ import annotations

import numpy as np

from toolkit.keras.translation import Call, Flow, Slot, require, unary


def _reshape(layer, shape):
    """Keras' ``Reshape``: every example to ``target_shape`` (one entry may be -1)."""
    target = tuple(int(d) for d in layer.target_shape)
    if -1 in target:  # the batch axis takes the -1 of the reshape, so this one is solved from the input's size
        size, known = int(np.prod(shape[1:])), int(np.prod([d for d in target if d != -1]))
        target = tuple(size // known if d == -1 else d for d in target)
    target = (-1, *target)
    return {}, lambda ops, p, x, mask: (ops.reshape(x, target), mask)


def _permute(layer, shape):
    """Keras' ``Permute``: ``ops.transpose(x, (0, *dims))``."""
    axes = (0, *layer.dims)
    return {}, lambda ops, p, x, mask: (ops.transpose(x, axes), mask)


def _repeat_vector(layer, shape):
    """Keras' ``RepeatVector``: ``[batch, features] -> [batch, n, features]``."""
    n = layer.n
    return {}, lambda ops, p, x, mask: (ops.repeat(ops.expand_dims(x, 1), n, axis=1), mask)


def _rescaling(layer, shape):
    """Keras' ``Rescaling``: ``x * scale + offset`` (each a number or an array broadcast over the last axes). Keras on
    TensorFlow casts a Python number with ``tf.cast``, which makes it a float32 tensor first: ``scale=1 / 255`` is
    used as float32's nearest number (2e-10 off), in a float64 model too, so the toolkit uses that number."""
    import keras

    def as_keras_casts(value):
        rounded = isinstance(value, (int, float)) and keras.backend.backend() == "tensorflow"
        return np.asarray(np.float32(value) if rounded else value, dtype=float)

    scale, offset = as_keras_casts(layer.scale), as_keras_casts(layer.offset)
    require(layer, not scale.ndim or keras.config.image_data_format() == "channels_last",
             "a scale array with keras.config.image_data_format() 'channels_first'")
    return {}, lambda ops, p, x, mask: (ops.cast(x, ops.dtype) * scale + offset, mask)


def _identity(layer, shape):
    return {}, lambda ops, p, x, mask: (x, mask)


def _batch_dot(ops, x, y, axes: tuple[int, int]):
    """Keras' ``batch_dot(x, y, axes)`` (``keras.layers.Dot``): for each example, ``x`` and ``y`` contracted over
    ``axes``; the result has ``x``'s other axes, then ``y``'s, and is ``[batch, 1]`` where both are ``[batch, n]``."""
    x_shape, y_shape = tuple(ops.shape(x)), tuple(ops.shape(y))
    a0, a1 = axes
    x_rest = [a for a in range(1, len(x_shape)) if a != a0]
    y_rest = [a for a in range(1, len(y_shape)) if a != a1]
    x = ops.reshape(ops.transpose(x, (0, *x_rest, a0)), (-1, int(np.prod([x_shape[a] for a in x_rest])),
                                                          x_shape[a0]))
    y = ops.reshape(ops.transpose(y, (0, a1, *y_rest)), (-1, y_shape[a1],
                                                          int(np.prod([y_shape[a] for a in y_rest]))))
    out = (*(x_shape[a] for a in x_rest), *(y_shape[a] for a in y_rest))
    return ops.reshape(ops.matmul(x, y), (-1, *(out or (1,))))


def _dot(call: Call):
    """Keras' ``Dot(axes, normalize)`` called on a list of two tensors: with ``normalize``, each is L2-normalized
    along its axis first (``ops.normalize``); masks are refused (Keras' ``Dot`` computes none)."""
    layer, inputs = call.layer, call.arguments.get("inputs")
    require(layer, set(call.arguments) <= {"inputs", "training", "mask"} and isinstance(inputs, (list, tuple))
             and len(inputs) == 2 and all(isinstance(i, Slot) for i in inputs),
             "calling it on anything but a list of two tensors")
    require(layer, not call.masked, "masked inputs (a Keras mask reaching it)")
    ranks = [len(t.shape) for t in layer.input]
    given = (layer.axes, layer.axes) if isinstance(layer.axes, int) else tuple(layer.axes)
    axes = tuple(a % rank if a < 0 else a for a, rank in zip(given, ranks))
    normalize = bool(layer.normalize)

    def apply(ops, p, args):
        x, y = (flow.value for flow in args["inputs"])
        if normalize:
            x, y = ops.normalize(x, axis=axes[0]), ops.normalize(y, axis=axes[1])
        return Flow(_batch_dot(ops, x, y, axes), None)

    return {}, apply


#: Keras layer class names and their translators.
LAYERS = {
    **{name: unary(translate) for name, translate in {
        "Reshape": _reshape, "Permute": _permute, "RepeatVector": _repeat_vector, "Rescaling": _rescaling,
        "Identity": _identity}.items()},
    "Dot": _dot,
}

#: The constructor arguments each translator reads (see :data:`toolkit.keras.layers.OPTIONS`).
OPTIONS: dict[str, frozenset] = {
    "Reshape": frozenset({"target_shape"}), "Permute": frozenset({"dims"}), "RepeatVector": frozenset({"n"}),
    "Rescaling": frozenset({"scale", "offset"}), "Identity": frozenset(), "Dot": frozenset({"axes", "normalize"}),
}
