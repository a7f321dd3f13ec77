"""How :func:`toolkit.from_keras` translates Keras' activation layers: ``Activation`` (every Keras activation, see
:mod:`toolkit.keras.activations`), ``ReLU``, ``LeakyReLU``, ``PReLU``, ``ELU`` and ``Softmax`` (with its mask),
each as Keras' own ``call`` computes it (registered by :mod:`toolkit.keras.layers`).
"""

from __future__ import annotations

from toolkit.keras.activations import keras_relu
from toolkit.keras.translation import activation_of, layer_weights

#: What Keras' ``Softmax`` layer puts in masked positions before normalising (``_large_negative_number`` for
#: float32 and float64); they are zeroed after.
SOFTMAX_MASKED = -1e9


def _activation_layer(layer, shape):
    activation = activation_of(layer)
    return {}, lambda ops, p, x, mask: (activation(ops, x), mask)


def _relu(layer, shape):
    """Keras' ``ReLU(max_value, negative_slope, threshold)``: ``keras.activations.relu`` with them."""
    options = {"negative_slope": float(layer.negative_slope), "threshold": float(layer.threshold),
               "max_value": None if layer.max_value is None else float(layer.max_value)}
    return {}, lambda ops, p, x, mask: (keras_relu(ops, x, **options), mask)


def _leaky_relu(layer, shape):
    slope = float(layer.negative_slope)
    return {}, lambda ops, p, x, mask: (ops.leaky_relu(x, negative_slope=slope), mask)


def _elu(layer, shape):
    alpha = float(layer.alpha)
    return {}, lambda ops, p, x, mask: (ops.elu(x, alpha=alpha), mask)


def _prelu(layer, shape):
    """Keras' ``PReLU``: ``relu(x) - alpha * relu(-x)``, ``alpha`` a weight (shared along ``shared_axes``)."""
    weights = layer_weights(layer)
    (alpha,) = weights
    return weights, lambda ops, p, x, mask: (ops.relu(x) - p[alpha] * ops.relu(-x), mask)


def _softmax(layer, shape):
    """Keras' ``Softmax(axis)``: an int axis or several normalised together; where a mask is given (Keras'
    ``mask=``, booleans or values kept above 0.5), masked positions are left out and come out 0."""
    axis = tuple(layer.axis) if isinstance(layer.axis, (list, tuple)) else layer.axis

    def step(ops, p, x, mask):
        if mask is None:
            return ops.softmax(x, axis=axis), mask
        keep = mask if ops.dtype_of(mask) == "bool" else mask > 0.5
        y = ops.softmax(ops.where(keep, x, SOFTMAX_MASKED), axis=axis)
        return ops.where(keep, y, 0.0), mask

    return {}, step


#: Keras layer class names and their translators (unary: wrapped by :mod:`toolkit.keras.layers`).
UNARY = {"Activation": _activation_layer, "ReLU": _relu, "LeakyReLU": _leaky_relu, "ELU": _elu, "PReLU": _prelu,
         "Softmax": _softmax}

#: The constructor arguments each translator reads (see :data:`toolkit.keras.layers.OPTIONS`).
OPTIONS: dict[str, frozenset] = {
    "Activation": frozenset({"activation"}), "ReLU": frozenset({"max_value", "negative_slope", "threshold"}),
    "LeakyReLU": frozenset({"negative_slope"}), "ELU": frozenset({"alpha"}), "PReLU": frozenset({"shared_axes"}),
    "Softmax": frozenset({"axis"}),
}
