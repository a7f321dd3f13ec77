"""Keras activations (``keras.activations``: the ``activation=`` of a layer and the ``Activation`` layer) as toolkit
ops: every function Keras exports, by name (``"gelu"``) or as the function itself (``keras.activations.gelu``), with
Keras' default arguments. Anything else (a lambda, a custom function) is refused with a
:class:`~toolkit.KerasImportError` naming the layer.
"""

from __future__ import annotations

from collections.abc import Callable

from toolkit.errors import KerasImportError

#: Keras activation names (``keras.activations``, aliases included; ``threshold``, which has no defaults, cannot be
#: used by name) and how each is computed: the toolkit op of the same name, unless a function is given here. Keras'
#: ``gelu`` is the exact form, where ``ops.gelu`` defaults to the tanh approximation.
ACTIVATIONS: dict[str, Callable | None] = {
    "linear": None, "relu": None, "relu6": None, "leaky_relu": None, "elu": None, "selu": None, "celu": None,
    "gelu": lambda ops, x: ops.gelu(x, approximate=False),
    "silu": None, "swish": lambda ops, x: ops.silu(x), "hard_silu": None,
    "hard_swish": lambda ops, x: ops.hard_silu(x), "hard_sigmoid": None, "hard_tanh": None, "hard_shrink": None,
    "soft_shrink": None, "tanh_shrink": None, "softplus": None, "softsign": None,
    "squareplus": None, "sparse_plus": None, "sparse_sigmoid": None, "sigmoid": None, "log_sigmoid": None,
    "tanh": None, "mish": lambda ops, x: x * ops.tanh(ops.softplus(x)), "exponential": lambda ops, x: ops.exp(x),
    "softmax": None, "log_softmax": None, "sparsemax": None, "glu": None,
}


def keras_relu(ops, x, negative_slope=0.0, max_value=None, threshold=0.0):
    """Keras' ``relu(x, negative_slope, max_value, threshold)`` (``keras.activations.ReLU.static_call``): ``x``
    above ``threshold`` (else 0), capped at ``max_value``, minus ``negative_slope * relu(threshold - x)``."""
    if negative_slope and max_value is None and not threshold:
        return ops.leaky_relu(x, negative_slope=negative_slope)
    y = ops.where(x > threshold, x, 0.0) if threshold else ops.relu(x)
    if max_value is not None:
        y = ops.clip(y, 0.0, max_value)
    if negative_slope:
        y = y - negative_slope * ops.relu(threshold - x)
    return y


def _fn(name: str) -> Callable:
    if name == "linear":
        return lambda ops, x: x
    if name == "relu":
        return keras_relu
    return ACTIVATIONS[name] or (lambda ops, x: getattr(ops, name)(x))


def resolve(layer, activation) -> Callable:
    """``(ops, x) -> y`` computing ``activation`` (a Keras activation name or function, or None) as Keras does.

    Raises:
        KerasImportError: anything else (a lambda, a custom function), naming ``layer`` and what it was given.
    """
    import keras

    if activation is None:
        return lambda ops, x: x
    name = activation if isinstance(activation, str) else getattr(activation, "__name__", None)
    if name not in ACTIVATIONS or not (isinstance(activation, str) or keras.activations.get(name) is activation):
        raise KerasImportError(
            f"layer {layer.name!r} ({type(layer).__name__}): activation {activation!r} is not supported; "
            f"supported: the Keras activations {', '.join(ACTIVATIONS)}")
    return _fn(name)
