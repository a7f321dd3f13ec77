"""What the importer checks of every Keras layer before translating it: each constructor argument applied or
refused (:func:`check_config`), and the translator of each layer (:func:`translator`).

The wrapper layers' translators (``Bidirectional``, ``TimeDistributed``: :mod:`toolkit.keras.layers_recurrent`)
check and translate the layer they wrap through these functions too.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from toolkit.errors import KerasImportError
from toolkit.keras import graph as keras_graph
from toolkit.keras.layers import OPTIONS, SUPPORTED

#: Constructor arguments every layer has that the importer applies itself: the name, ``trainable`` (frozen weights),
#: the dtype policy (checked by :func:`check_config`), and seeds, which only draw initial weights (read as they are)
#: or Keras' dropout masks (the toolkit's own by design).
SHARED_OPTIONS = frozenset({"name", "trainable", "dtype", "seed"})
#: Arguments that only choose initial values, which the importer reads from the weights as they are (besides every
#: ``*_initializer``).
INITIAL_OPTIONS = frozenset({"unit_forget_bias"})
_MISSING = object()


def refuse(layer, what: str) -> KerasImportError:
    """The error refusing ``what`` of ``layer``, naming the layer and its class."""
    return KerasImportError(f"layer {layer.name!r} ({type(layer).__name__}): {what}")


def _default_config(layer, config: dict) -> dict:
    """The config of a layer of the same class made with only the arguments it requires (named, so that Keras'
    automatic names are left as they are)."""
    kind = type(layer)
    required = {name: config[name] for name, parameter in inspect.signature(kind.__init__).parameters.items()
                if name != "self" and parameter.default is parameter.empty and name in config}
    try:
        return kind.from_config({**required, "name": f"{layer.name}_default"}).get_config()
    except Exception as error:  # a layer that cannot be made from its required arguments cannot be compared
        raise refuse(layer, f"cannot make a default {kind.__name__} to compare its arguments with ({error})") \
            from error


def check_config(layer) -> None:
    """Refuse every constructor argument of ``layer`` (``layer.get_config()``) that differs from a default layer of
    its class and is neither read by its translator (:data:`~toolkit.keras.layers.OPTIONS`) nor applied by the
    importer (:data:`SHARED_OPTIONS`, initial values, regularizers, constraints), so that an argument the importer
    does not know cannot change Keras' numbers silently; and a mixed-precision dtype policy.

    Args:
        layer: a Keras layer of the model being imported (an operation's :class:`~toolkit.keras.graph.Step` has
            no settings and passes).

    Raises:
        KerasImportError: an argument refused as above, a config Keras cannot give back, or a mixed-precision
            dtype policy; the message names the layer and the argument.
    """
    if isinstance(layer, keras_graph.Step):  # an operation's arguments are all applied; it has no settings
        return
    try:
        config = layer.get_config()
    except NotImplementedError as error:  # Keras' own failure to serialize the layer: its arguments are unknown
        raise refuse(layer, "its constructor arguments cannot be read back (Keras' get_config fails, as for an "
                             "activity_regularizer given to a layer that does not save one): "
                             f"{str(error).strip().splitlines()[0]}") from error
    handled = OPTIONS[type(layer).__name__] | SHARED_OPTIONS | INITIAL_OPTIONS
    default = None
    for key, value in config.items():
        if key in handled or key.endswith(("_initializer", "_regularizer", "_constraint")):
            continue
        default = _default_config(layer, config) if default is None else default
        if value != default.get(key, _MISSING):
            raise refuse(layer, f"{key}={value!r} is not supported (from_keras applies only Keras' default "
                                 f"{default.get(key)!r} for it)")
    policy = layer.dtype_policy
    if type(policy).__name__ != "DTypePolicy" or policy.compute_dtype != policy.variable_dtype:
        raise refuse(layer, f"dtype={policy.name!r} is not supported: the trainer's dtype= sets the precision of "
                             "the whole model (import a model built with one dtype)")


def translator(layer) -> Callable:
    """The translator of ``layer``: a graph step's own (a ``keras.ops`` call, a custom layer's weights), or the one
    :data:`~toolkit.keras.layers.SUPPORTED` gives its class.

    Args:
        layer: a Keras layer, or a :class:`~toolkit.keras.graph.Step`.

    Raises:
        KerasImportError: a layer class the importer cannot translate, naming the supported ones.
    """
    if isinstance(layer, keras_graph.Step):  # an operation or a custom layer's own weights
        return layer.translate
    kind = type(layer).__name__
    if kind not in SUPPORTED:
        raise KerasImportError(f"layer {layer.name!r} is a {kind}, which from_keras cannot translate; "
                               f"supported: {', '.join(SUPPORTED)}")
    return SUPPORTED[kind]
