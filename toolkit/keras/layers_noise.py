"""How :func:`toolkit.from_keras` translates Keras' noise layers: ``SpatialDropout1D/2D/3D``, ``GaussianNoise``,
``GaussianDropout`` and ``ActivityRegularization``. In inference each is the identity, as in Keras. In training the
noise comes from the trainer's per-example keys (``ops.example_uniform``, as the toolkit's ``Dropout`` draws it), so
N devices give what one device gives and every backend the same numbers; it equals Keras' noise in distribution,
not draw for draw (Keras draws from its own seed generator). Registered by :mod:`toolkit.keras.layers`.
"""

from __future__ import annotations

import math

from toolkit.nn import layers


def example_normal(ops, shape):
    """Standard normal numbers of ``shape`` (axis 0 the batch), each example's from its key: Box-Muller on two
    ``ops.example_uniform`` draws, ``sqrt(-2 log(1 - u1)) cos(2 pi u2)``. The uniforms are multiples of ``2**-24``,
    so no draw lies beyond 5.8 standard deviations (a probability of 7e-9 in an exact normal)."""
    u1, u2 = ops.example_uniform(shape), ops.example_uniform(shape)
    return ops.sqrt(-2.0 * ops.log(1.0 - u1)) * ops.cos((2.0 * math.pi) * u2)


def _spatial_dropout(layer, shape):
    """Keras' ``SpatialDropout*``: dropout of whole feature maps, one draw per example and channel (noise shape
    ``(batch, 1, ..., channels)``, or ``(batch, channels, 1, ...)`` channels first)."""
    rate, rank = float(layer.rate), len(shape) - 2
    channels_first = getattr(layer, "data_format", "channels_last") == "channels_first"
    noise = (None, None, *(1,) * rank) if channels_first else (None, *(1,) * rank, None)
    return {}, lambda ops, p, x, mask: (layers.dropout(ops, x, rate, noise_shape=noise), mask)


def _gaussian_noise(layer, shape):
    """Keras' ``GaussianNoise(stddev)``: in training ``x + stddev * normal``."""
    stddev = float(layer.stddev)

    def step(ops, p, x, mask):
        if not ops.training or stddev <= 0:
            return x, mask
        return x + stddev * example_normal(ops, ops.shape(x)), mask

    return {}, step


def _gaussian_dropout(layer, shape):
    """Keras' ``GaussianDropout(rate)``: in training ``x * (1 + sqrt(rate / (1 - rate)) * normal)``."""
    rate = float(layer.rate)

    def step(ops, p, x, mask):
        if not ops.training or rate <= 0:
            return x, mask
        return x * (1.0 + math.sqrt(rate / (1.0 - rate)) * example_normal(ops, ops.shape(x))), mask

    return {}, step


def _activity_regularization(layer, shape):
    """Keras' ``ActivityRegularization(l1, l2)``: the identity, whose ``L1L2(l1, l2)`` activity penalty the importer
    adds to the training loss (as for any layer's ``activity_regularizer``)."""
    return {}, lambda ops, p, x, mask: (x, mask)


#: Keras layer class names and their translators (unary: wrapped by :mod:`toolkit.keras.layers`).
UNARY = {**{f"SpatialDropout{d}": _spatial_dropout for d in ("1D", "2D", "3D")},
         "GaussianNoise": _gaussian_noise, "GaussianDropout": _gaussian_dropout,
         "ActivityRegularization": _activity_regularization}

#: The constructor arguments each translator reads (see :data:`toolkit.keras.layers.OPTIONS`). The seeds draw
#: Keras' noise, which the toolkit draws from the trainer's keys instead (see the module docstring).
OPTIONS: dict[str, frozenset] = {
    "SpatialDropout1D": frozenset({"rate", "seed"}),
    **{f"SpatialDropout{d}": frozenset({"rate", "seed", "data_format"}) for d in ("2D", "3D")},
    "GaussianNoise": frozenset({"stddev", "seed"}), "GaussianDropout": frozenset({"rate", "seed"}),
    "ActivityRegularization": frozenset({"l1", "l2"}),
}
