"""Keras models imported as they are (:func:`from_keras`) and trained parameters written back (:func:`to_keras`).

A built Keras 3 model, ``Sequential`` or functional (one input, one output, branches and merges allowed), made of
the layers in :data:`SUPPORTED` becomes a :class:`~toolkit.Model` whose ``forward`` runs the toolkit's layers
(``toolkit.layers``: Keras' formulas and parameter shapes) with the Keras model's current weights, so it runs on
every backend and device count. Parameters are named ``<keras layer name>/<weight>`` (``dense_1/kernel``); batch
normalization's moving statistics are model state. Keras is imported only when these functions are called.

The graph is read once, at import: each call of a layer (a Keras node) becomes one step of a program that reads and
writes numbered tensors, each with its Keras mask, propagated by Keras' rules (``Embedding(mask_zero=True)`` makes
one; layers pass it on; merges AND theirs; attention and recurrent layers consume it).

What differs from Keras by design: dropout draws the toolkit's per-example masks (reproducible across backends and
device counts), not Keras' random ones, so training with dropout matches Keras only in distribution; inference is
identical.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from toolkit.errors import KerasImportError
from toolkit.nn import layers
from toolkit.nn.model import Model, State

#: Keras activation names and the ops that compute them (``None``: linear).
ACTIVATIONS = {"linear": None, "relu": "relu", "tanh": "tanh", "sigmoid": "sigmoid", "softmax": "softmax",
               "gelu": "gelu", "silu": "silu", "swish": "silu", "softplus": "softplus"}


class Flow(NamedTuple):
    """A tensor of the imported graph as ``forward`` computes it: its value and its Keras mask (None: no mask)."""

    value: Any
    mask: Any


class _Slot(NamedTuple):
    """Where a Keras node's call reads a tensor of the program: its number."""

    index: int


class _MaskOf(NamedTuple):
    """Where a Keras node's call reads the Keras mask of a tensor of the program (Keras passes it as ``mask=``)."""

    index: int


class _Call(NamedTuple):
    """One call of a Keras layer in the model's graph: the layer, its (first) input's shape, its arguments bound by
    name to the layer's ``call`` signature (tensors as :class:`_Slot`), and whether Keras gave any input a mask.
    Its output is the program's next tensor.

    A translator takes a ``_Call`` and returns the layer's weights (by toolkit name, in Keras' order) and
    ``apply(ops, params, arguments) -> Flow``, which ``forward`` calls with the arguments' tensors as
    :class:`Flow`."""

    layer: Any
    shape: tuple
    arguments: dict
    masked: bool = False


def _activation(layer) -> str | None:
    activation = getattr(layer, "activation", None)
    name = getattr(activation, "__name__", None) if activation is not None else "linear"
    if name not in ACTIVATIONS:
        raise KerasImportError(f"layer {layer.name!r} ({type(layer).__name__}): activation {name!r} is not "
                               f"supported; supported: {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def _activate(ops, y, activation: str | None):
    if activation == "gelu":
        return ops.gelu(y, approximate=False)  # Keras' gelu activation is the exact one by default
    return layers.activate(ops, y, activation)


def _require(layer, condition: bool, what: str) -> None:
    if not condition:
        raise KerasImportError(f"layer {layer.name!r} ({type(layer).__name__}): {what} is not supported")


def _and(ops, masks):
    """Attention's rule where masks meet: a position stays where every mask keeps it (None: no mask at all)."""
    masks = [m for m in masks if m is not None]
    return functools.reduce(ops.logical_and, masks) if masks else None


# --- one-input layers: (layer, input shape) -> (weights, (ops, params, x, mask) -> (y, mask)) -----------------------
def _unary(translate):
    """A translator for a layer called on one tensor: its first ``call`` argument, and an optional explicit
    ``mask``. Keras passes a mask on only through layers that support masking. ``training`` is not read: the
    trainer sets the mode (training steps, or inference for predict and evaluate)."""

    def translator(call: _Call):
        layer, (first, *rest) = call.layer, call.arguments
        extra = [name for name in rest if name not in ("mask", "training")]
        _require(layer, not extra and isinstance(call.arguments[first], _Slot),
                 f"calling it with {extra or 'nested inputs'}")
        weights, step = translate(layer, call.shape)
        passes_mask = layer.supports_masking

        def apply(ops, p, args):
            x = args[first]
            mask = args["mask"].value if isinstance(args.get("mask"), Flow) else x.mask
            y, out = step(ops, p, x.value, mask)
            return Flow(y, None if out is mask and not passes_mask else out)

        return weights, apply

    return translator


def _dense(layer, shape):
    _require(layer, layer.use_bias, "use_bias=False")
    activation, prefix = _activation(layer), layer.name
    kernel, bias = layer.get_weights()
    return {f"{prefix}/kernel": kernel, f"{prefix}/bias": bias}, \
        lambda ops, p, x, mask: (_activate(ops, layers.dense(ops, p, x, prefix), activation), mask)


def _conv2d(layer, shape):
    _require(layer, layer.use_bias, "use_bias=False")
    _require(layer, layer.data_format == "channels_last", "channels_first")
    _require(layer, getattr(layer, "groups", 1) == 1, "groups > 1")
    activation, prefix = _activation(layer), layer.name
    strides, padding, dilation = tuple(layer.strides), layer.padding, tuple(layer.dilation_rate)
    kernel, bias = layer.get_weights()

    def step(ops, p, x, mask):
        y = layers.conv2d(ops, p, x, prefix, padding=padding, strides=strides, dilation_rate=dilation)
        return _activate(ops, y, activation), mask

    return {f"{prefix}/kernel": kernel, f"{prefix}/bias": bias}, step


def _pooling(reduce):
    def translate(layer, shape):
        _require(layer, layer.data_format == "channels_last", "channels_first")
        size, strides, padding = tuple(layer.pool_size), tuple(layer.strides), layer.padding
        return {}, lambda ops, p, x, mask: (reduce(ops, x, size, strides=strides, padding=padding), mask)
    return translate


def _global(reduce):
    def translate(layer, shape):
        _require(layer, layer.data_format == "channels_last", "channels_first")
        _require(layer, not layer.keepdims, "keepdims=True")
        return {}, lambda ops, p, x, mask: (reduce(ops, x), None)
    return translate


def _global_average_1d(layer, shape):
    """Keras' ``GlobalAveragePooling1D``: the mean over the steps, only the unmasked ones where there is a mask."""
    _require(layer, layer.data_format == "channels_last", "channels_first")
    _require(layer, not layer.keepdims, "keepdims=True")

    def step(ops, p, x, mask):
        if mask is None:
            return ops.mean(x, axis=1), None
        weight = ops.expand_dims(ops.cast(mask, ops.dtype_of(x)), -1)
        return ops.sum(x * weight, axis=1) / ops.sum(weight, axis=1), None

    return {}, step


def _last_axis(layer, axis, shape) -> None:
    axis = list(np.atleast_1d(axis))
    _require(layer, axis in ([-1], [len(shape) - 1]), f"axis={layer.axis!r} (only the last axis)")


def _batch_norm(layer, shape):
    _last_axis(layer, layer.axis, shape)
    _require(layer, layer.center and layer.scale, "center=False or scale=False")
    prefix, momentum, epsilon, synchronized = layer.name, layer.momentum, layer.epsilon, layer.synchronized
    gamma, beta, mean, variance = layer.get_weights()

    def step(ops, p, x, mask):
        return layers.batch_norm(ops, p, x, prefix, momentum=momentum, epsilon=epsilon,
                                 synchronized=synchronized), mask

    return {f"{prefix}/gamma": gamma, f"{prefix}/beta": beta, f"{prefix}/moving_mean": State(mean),
            f"{prefix}/moving_variance": State(variance)}, step


def _layer_norm(layer, shape):
    _last_axis(layer, layer.axis, shape)
    _require(layer, layer.center and layer.scale and not getattr(layer, "rms_scaling", False),
             "center=False, scale=False or rms_scaling")
    prefix, epsilon = layer.name, layer.epsilon
    gamma, beta = layer.get_weights()
    return {f"{prefix}/gamma": gamma, f"{prefix}/beta": beta}, \
        lambda ops, p, x, mask: (layers.layer_norm(ops, p, x, prefix, epsilon=epsilon), mask)


def _embedding(layer, shape):
    prefix, mask_zero = layer.name, layer.mask_zero
    (table,) = layer.get_weights()
    return {f"{prefix}/embeddings": table}, \
        lambda ops, p, ids, mask: (layers.embedding(ops, p, ids, prefix), (ids != 0) if mask_zero else None)


def _recurrent(run, names):
    def translate(layer, shape):
        _require(layer, not layer.return_sequences and not layer.return_state, "return_sequences or return_state")
        _require(layer, not layer.go_backwards and not layer.stateful, "go_backwards or stateful")
        _require(layer, layer.use_bias, "use_bias=False")
        cell = layer.cell
        _require(layer, getattr(cell.activation, "__name__", "") == "tanh" and
                 getattr(cell.recurrent_activation, "__name__", "") == "sigmoid", "non-default activations")
        _require(layer, getattr(cell, "reset_after", True), "reset_after=False")
        _require(layer, not cell.dropout and not cell.recurrent_dropout, "dropout inside the cell")
        steps = shape[1]
        _require(layer, steps is not None, "a sequence length unknown when the model was built")
        prefix, units, unroll = layer.name, cell.units, bool(layer.unroll)
        weights = dict(zip(names, layer.get_weights()))
        return {f"{prefix}/{k}": v for k, v in weights.items()}, \
            lambda ops, p, x, mask: (run(ops, p, x, steps=steps, units=units, prefix=prefix, mask=mask,
                                         unroll=unroll), None)
    return translate


def _dropout(layer, shape):
    rate, noise_shape = layer.rate, layer.noise_shape
    return {}, lambda ops, p, x, mask: (layers.dropout(ops, x, rate, noise_shape=noise_shape), mask)


def _activation_layer(layer, shape):
    activation = _activation(layer)
    return {}, lambda ops, p, x, mask: (_activate(ops, x, activation), mask)


def _relu(layer, shape):
    _require(layer, layer.max_value is None and not layer.negative_slope and not layer.threshold,
             "max_value, negative_slope or threshold")
    return {}, lambda ops, p, x, mask: (ops.relu(x), mask)


def _flatten(layer, shape):
    return {}, lambda ops, p, x, mask: (layers.flatten(ops, x), mask)


# --- layers of several tensors: (layer, input shape, call) -> (weights, apply) -----------------------------------
def _or(ops, masks):
    """Keras' rule for merged masks: None unless every input has one, then a position stays where any keeps it."""
    return None if any(m is None for m in masks) else functools.reduce(ops.logical_or, masks)


def _merge(combine, masks: bool = True):
    """Keras' merge layers, called on a list of tensors: their values combined in order, their masks ORed
    (``masks=False``: masked inputs refused)."""

    def translator(call: _Call):
        layer, inputs = call.layer, call.arguments.get("inputs")
        _require(layer, set(call.arguments) <= {"inputs", "training", "mask"} and isinstance(inputs, (list, tuple))
                 and all(isinstance(i, _Slot) for i in inputs), "calling it on anything but a list of tensors")
        _require(layer, masks or not call.masked, "masked inputs (a Keras mask reaching it)")
        axis = getattr(layer, "axis", None)

        def apply(ops, p, args):
            flows = args["inputs"]
            return Flow(combine(ops, [f.value for f in flows], axis), _or(ops, [f.mask for f in flows]))

        return {}, apply

    return translator


def _chain(op):
    return lambda ops, values, axis: functools.reduce(getattr(ops, op), values)


def _attention(c: _Call):
    """Keras' ``MultiHeadAttention`` called as ``(query, value, key=None, attention_mask=None,
    use_causal_mask=False)``; the query's, value's and key's Keras masks are ANDed into the attention mask as Keras
    does (query ``[B, T, 1]``, value and key ``[B, 1, S]``), and the output keeps the query's mask."""
    layer, call = c.layer, c.arguments
    _require(layer, not layer.dropout, f"dropout={layer.dropout} (attention dropout)")
    _require(layer, layer.use_bias, "use_bias=False")
    _require(layer, getattr(layer, "_output_shape", None) is None, "output_shape")
    _require(layer, layer.attention_axes in (None, (1,), [1]), f"attention_axes={layer.attention_axes!r}")
    _require(layer, not getattr(layer, "_use_gate", False) and getattr(layer, "_sliding_window", None) is None,
             "gating or a sliding window")
    extra = set(call) - {"query", "value", "key", "attention_mask", "use_causal_mask", "training",
                         "return_attention_scores"}
    _require(layer, not extra and not call.get("return_attention_scores"),
             f"calling it with {sorted(extra) or 'return_attention_scores'}")
    causal = call.get("use_causal_mask", False)
    _require(layer, isinstance(causal, bool), "a use_causal_mask that is not a Python bool")
    prefix = layer.name
    names = [f"{prefix}/{part}/{w}" for part in ("query", "key", "value", "attention_output")
             for w in ("kernel", "bias")]

    def apply(ops, p, args):
        query, value, key = args["query"], args["value"], args.get("key")
        given = args.get("attention_mask")
        auto = _and(ops, [None if query.mask is None else ops.expand_dims(query.mask, -1),
                          None if value.mask is None else ops.expand_dims(value.mask, -2),
                          None if key is None or key.mask is None else ops.expand_dims(key.mask, -2),
                          None if given is None else ops.cast(given.value, "bool")])
        y = layers.multi_head_attention(ops, p, query.value, value.value, None if key is None else key.value,
                                        attention_mask=auto, use_causal_mask=causal, prefix=prefix)
        return Flow(y, query.mask)

    return dict(zip(names, layer.get_weights())), apply


#: Keras layer class names and how each is translated.
SUPPORTED: dict[str, Callable] = {
    **{name: _unary(translate) for name, translate in {
        "Dense": _dense, "Conv2D": _conv2d, "MaxPooling2D": _pooling(layers.max_pool2d),
        "AveragePooling2D": _pooling(layers.average_pool2d),
        "GlobalAveragePooling2D": _global(layers.global_average_pool2d),
        "GlobalMaxPooling2D": _global(layers.global_max_pool2d), "GlobalAveragePooling1D": _global_average_1d,
        "Flatten": _flatten, "Dropout": _dropout, "BatchNormalization": _batch_norm,
        "LayerNormalization": _layer_norm, "Embedding": _embedding,
        "LSTM": _recurrent(layers.lstm, ("kernel", "recurrent", "bias")),
        "GRU": _recurrent(layers.gru, ("kernel", "recurrent", "bias")),
        "Activation": _activation_layer, "ReLU": _relu}.items()},
    "Add": _merge(_chain("add")), "Subtract": _merge(lambda ops, values, axis: ops.subtract(*values)),
    "Multiply": _merge(_chain("multiply")), "Maximum": _merge(_chain("maximum")),
    "Minimum": _merge(_chain("minimum")),
    "Average": _merge(lambda ops, values, axis: _chain("add")(ops, values, axis) / float(len(values))),
    "Concatenate": _merge(lambda ops, values, axis: ops.concatenate(values, axis=axis), masks=False),
    "MultiHeadAttention": _attention,
}


def _loss(keras_model, loss) -> Callable:
    """The toolkit loss for ``loss`` (a name or a Keras loss object), or the model's compiled loss."""
    import keras

    loss = getattr(keras_model, "loss", None) if loss is None else loss
    if loss is None:
        raise KerasImportError("the Keras model has no loss (it was not compiled with one): pass loss=, for example "
                               "'sparse_categorical_crossentropy'")
    from_logits = bool(getattr(loss, "from_logits", False))
    name = loss if isinstance(loss, str) else getattr(loss, "name", type(loss).__name__)
    if isinstance(loss, keras.losses.SparseCategoricalCrossentropy) or name == "sparse_categorical_crossentropy":
        def sparse_categorical_crossentropy(ops, outputs, y):
            if from_logits:
                log_p = ops.log_softmax(outputs, axis=-1)
            else:  # Keras: normalise, clip to [eps, 1 - eps], log
                log_p = ops.log(ops.clip(outputs / ops.sum(outputs, axis=-1, keepdims=True), 1e-7, 1 - 1e-7))
            picked = ops.take_along_axis(log_p, ops.expand_dims(ops.cast(y, "int32"), -1), axis=-1)
            return -ops.squeeze(picked, axis=-1)
        return sparse_categorical_crossentropy
    if isinstance(loss, keras.losses.MeanSquaredError) or name in ("mean_squared_error", "mse"):
        return lambda ops, outputs, y: ops.mean(ops.square(outputs - y), axis=-1)
    raise KerasImportError(f"loss {name!r} is not supported; supported: sparse_categorical_crossentropy "
                           "(from_logits or not), mean_squared_error")


# --- the graph ---------------------------------------------------------------------------------------------------
def _template(value, slots: dict[int, int], mask_of: dict[int, int]):
    from keras import KerasTensor

    if isinstance(value, KerasTensor):
        return _Slot(slots[id(value)]) if id(value) in slots else _MaskOf(slots[mask_of[id(value)]])
    if isinstance(value, (list, tuple)):
        return type(value)(_template(v, slots, mask_of) for v in value)
    return value


def _fill(value, flows: list[Flow]):
    if isinstance(value, _Slot):
        return flows[value.index]
    if isinstance(value, _MaskOf):
        return Flow(flows[value.index].mask, None)
    if isinstance(value, dict):
        return {k: _fill(v, flows) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_fill(v, flows) for v in value)
    return value


def _graph(keras_model) -> tuple[list[_Call], int]:
    """The calls of ``keras_model``'s layers in an order that computes each input before its use, and the number of
    the output tensor (tensor 0 is the model's input)."""
    import keras

    if isinstance(keras_model, keras.Sequential):
        calls = []
        for i, layer in enumerate(keras_model.layers):
            first = next(iter(inspect.signature(layer.call).parameters))
            inputs = layer.input
            shape = tuple((inputs[0] if isinstance(inputs, (list, tuple)) else inputs).shape)
            calls.append(_Call(layer, shape, {first: _Slot(i)}))  # a Sequential model has no merges
        return calls, len(calls)
    if not isinstance(keras_model, keras.Model) or getattr(keras_model, "_nodes_by_depth", None) is None:
        raise KerasImportError(f"from_keras takes a keras.Sequential or functional keras.Model, got "
                               f"{type(keras_model).__name__} (a subclassed model's call is Python the toolkit "
                               "cannot read)")
    if len(keras_model.inputs) != 1 or len(keras_model.outputs) != 1:
        raise KerasImportError(f"from_keras takes a model of one input and one output; this one has "
                               f"{len(keras_model.inputs)} inputs and {len(keras_model.outputs)} outputs")
    nodes = [node for depth in sorted(keras_model._nodes_by_depth, reverse=True)
             for node in keras_model._nodes_by_depth[depth]]
    # Keras computes masks with operations of their own in the graph (an Embedding's ``ids != 0``, a merge's OR)
    # and passes them to later layers as ``mask=``; the translators compute masks themselves, so those operations
    # are left out and a mask argument reads the mask of the tensor it belongs to.
    mask_of = {id(t._keras_mask): id(t) for node in nodes for t in node.outputs
               if getattr(t, "_keras_mask", None) is not None}
    slots, calls = {id(keras_model.inputs[0]): 0}, []
    for node in nodes:
        if node.is_input or node.operation is None or \
                any(id(t) not in slots and mask_of.get(id(t)) not in slots for t in node.input_tensors):
            continue  # an input, or a call of a shared layer in another graph (as Keras skips it)
        layer = node.operation
        if not isinstance(layer, keras.layers.Layer):
            if all(id(t) in mask_of for t in node.outputs):
                continue
            raise KerasImportError(f"the functional graph calls the operation {layer.name!r} "
                                   f"({type(layer).__name__}) directly, which from_keras cannot translate: use "
                                   "the Keras layer (keras.layers.Add rather than x + y, for example)")
        if len(node.outputs) != 1:
            raise KerasImportError(f"layer {layer.name!r} ({type(layer).__name__}) has {len(node.outputs)} "
                                   "outputs; from_keras supports layers of one output")
        bound = inspect.signature(layer.call).bind(*node.arguments.args, **node.arguments.kwargs)
        arguments = {name: _template(value, slots, mask_of) for name, value in bound.arguments.items()}
        masked = any(getattr(t, "_keras_mask", None) is not None for t in node.input_tensors)
        calls.append(_Call(layer, tuple(node.input_tensors[0].shape), arguments, masked))
        slots[id(node.outputs[0])] = len(slots)
    if id(keras_model.outputs[0]) not in slots:
        raise KerasImportError("the model's output is not computed from its input by layers alone, which "
                               "from_keras cannot translate")
    return calls, slots[id(keras_model.outputs[0])]


def _copied(values: dict) -> dict:
    """Fresh copies of weights and :class:`State` entries: every ``init`` call gets arrays of its own."""
    return {k: State(np.array(v.value)) if isinstance(v, State) else np.array(v) for k, v in values.items()}


def _translator(layer) -> Callable:
    kind = type(layer).__name__
    if kind not in SUPPORTED:
        raise KerasImportError(f"layer {layer.name!r} is a {kind}, which from_keras cannot translate; "
                               f"supported: {', '.join(SUPPORTED)}")
    return SUPPORTED[kind]


def from_keras(keras_model, loss: Any = None, name: str | None = None) -> Model:
    """A :class:`~toolkit.Model` computing what the built Keras model ``keras_model`` (``Sequential``, or functional
    with one input and one output) computes, with its current weights as the initial parameters, and its compiled
    loss (or ``loss``: a Keras loss name or object).

    Raises:
        KerasImportError: not a built Sequential or functional model, a layer, option or call not in
            :data:`SUPPORTED` (named in the message), or no supported loss; nothing is imported.
    """
    import keras

    if not isinstance(keras_model, keras.Model):
        raise KerasImportError(f"from_keras takes a built keras.Sequential or functional keras.Model, got "
                               f"{type(keras_model).__name__}")
    if not keras_model.built:
        raise KerasImportError("the Keras model is not built: give it an Input or call it on data first")
    calls, output = _graph(keras_model)
    params, program = {}, []
    for call in calls:
        weights, apply = _translator(call.layer)(call)
        params.update(weights)
        program.append((apply, call.arguments))
    score = _loss(keras_model, loss)
    initial = _copied(params)

    def init(rng):
        return _copied(initial)

    def forward(ops, p, x):
        flows = [Flow(x, None)]
        for apply, arguments in program:
            flows.append(apply(ops, p, _fill(arguments, flows)))
        return flows[output].value

    return Model(init, forward, score, name=name or keras_model.name, rows_independent=True)


def to_keras(params: dict[str, np.ndarray], keras_model, state: dict[str, np.ndarray] | None = None) -> None:
    """Write ``params`` (and model ``state``, for batch normalization), named as :func:`from_keras` names them,
    into ``keras_model``'s weights (``set_weights``), for example ``to_keras(trainer.params(), model,
    trainer.state())``.

    Raises:
        KerasImportError: a name missing or left over, or a shape that differs; nothing is written.
    """
    values = {**params, **(state or {})}
    plan, used = [], set()
    for call in _graph(keras_model)[0]:
        if any(call.layer is layer for layer, _ in plan):
            continue  # a shared layer, called again
        names = list(_translator(call.layer)(call)[0])
        for key, old in zip(names, call.layer.get_weights()):
            if key not in values:
                raise KerasImportError(f"to_keras: no value for {key!r}")
            if np.shape(values[key]) != np.shape(old):
                raise KerasImportError(f"to_keras: {key!r} has shape {np.shape(values[key])}, the Keras weight "
                                       f"{np.shape(old)}")
        plan.append((call.layer, [np.asarray(values[k]) for k in names]))
        used.update(names)
    if set(values) - used:
        raise KerasImportError(f"to_keras: {sorted(set(values) - used)} name no weight of this Keras model")
    for layer, weights in plan:
        if weights:
            layer.set_weights(weights)


__all__ = ["ACTIVATIONS", "SUPPORTED", "Flow", "KerasImportError", "from_keras", "to_keras"]
