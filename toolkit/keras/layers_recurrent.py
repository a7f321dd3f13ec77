"""How :func:`toolkit.from_keras` translates Keras' recurrent layers and wrappers: ``SimpleRNN``, ``LSTM`` and
``GRU`` (their last output or every step's, ``return_sequences``; forwards or ``go_backwards``),
``Bidirectional`` over any of them (``merge_mode`` concat, sum, ave or mul) and ``TimeDistributed`` over any one-input
layer the importer translates. Masks follow Keras' rule: a masked step leaves the state as it was. Registered by
:mod:`toolkit.keras.layers`.
"""

from __future__ import annotations

import inspect

from toolkit.keras.activations import resolve
from toolkit.keras.translation import Call, Flow, Slot, require, unary
from toolkit.nn import layers


def _checked(layer, prefix: str, shape: tuple):
    """The weights of a ``SimpleRNN``, ``LSTM`` or ``GRU`` (by ``prefix``) and ``run(ops, p, x, mask) -> y``,
    refusing what the toolkit's loops do not compute. With ``zero_output_for_mask`` (which ``Bidirectional`` sets
    where it returns sequences) the outputs at masked steps are 0, the last one too, as in Keras. Its ``dropout``
    is Keras': in training, one mask per sequence on the inputs, the same at every step, drawn on the trainer's keys
    as the toolkit's dropout layers draw; Keras drops nothing at a rate outside ``(0, 1)``. A cell of
    ``implementation=1`` (which ``recurrent_dropout`` sets, and a user may) draws a mask per gate instead
    (:func:`_recurrent_dropped`)."""
    recurrent_rate = float(layer.cell.recurrent_dropout)
    require(layer, recurrent_rate < 1.0, "recurrent_dropout=1")
    if recurrent_rate or (getattr(layer.cell, "implementation", 2) == 1 and 0.0 < float(layer.cell.dropout) < 1.0):
        return _recurrent_dropped(layer, prefix, shape, float(layer.cell.dropout), recurrent_rate)
    weights, run = _loop(layer, prefix, shape)
    rate = float(layer.cell.dropout)
    if not 0.0 < rate < 1.0:
        return weights, run

    def dropped(ops, p, x, mask):
        return run(ops, p, layers.dropout(ops, x, rate, noise_shape=(None, 1, ops.shape(x)[-1])), mask)

    return weights, dropped


def _recurrent_dropped(layer, prefix: str, shape: tuple, rate: float, recurrent_rate: float):
    """A ``SimpleRNN``, ``LSTM`` or ``GRU`` with ``recurrent_dropout`` (or an ``LSTM``/``GRU`` cell of
    ``implementation=1`` with ``dropout``), as Keras' cell of ``implementation=1`` computes it: in training, masks
    drawn once per sequence (on the trainer's keys) and used at every step, on the previous output before each
    recurrent product and, with ``dropout``, on the inputs; the ``LSTM``'s four gates (the ``GRU``'s three) each with
    masks of their own, a ``SimpleRNN`` one of each."""
    kind, units = type(layer).__name__, layer.cell.units
    weights, run = _loop(layer, prefix, shape)  # checks the layer's other settings, and runs inference
    gates = {"SimpleRNN": 1, "LSTM": 4, "GRU": 3}[kind]
    backwards, unroll = bool(layer.go_backwards), bool(layer.unroll)
    zeroed, sequences = bool(getattr(layer, "zero_output_for_mask", False)), bool(layer.return_sequences)
    activation = resolve(layer, layer.cell.activation) if kind == "SimpleRNN" else None

    def draws(ops, like, rate_):
        ones = ops.ones_like(like)
        return [layers.dropout(ops, ones, rate_) for _ in range(gates)] if 0.0 < rate_ < 1.0 else None

    def dropped(ops, p, x, mask):
        if not ops.training:
            return run(ops, p, x, mask)
        p = _with_bias(ops, layer, p, prefix)
        inputs, states = draws(ops, x[:, 0, :], rate), None  # [batch, features]
        if recurrent_rate:  # [batch, units]: the shape of a step's product with the first gate's kernel
            states = draws(ops, ops.matmul(x[:, 0, :], p[f"{prefix}/kernel"][:, :units]), recurrent_rate)
        if kind == "SimpleRNN":
            x = x if inputs is None else x * ops.expand_dims(inputs[0], 1)
            return simple_rnn(ops, p, x, prefix, activation, mask, backwards, sequences, unroll, zeroed,
                              recurrent_mask=states[0])
        y = gated_sequences(ops, p, x, prefix, kind, units, mask, backwards, unroll, zeroed, inputs, states)
        return y if sequences else y[:, -1]

    return weights, dropped


def _with_bias(ops, layer, p, prefix: str):
    """``p`` with zeros for the bias of a recurrent layer without one (``use_bias=False``): the same numbers."""
    if layer.use_bias:
        return p
    zeros = ops.zeros_like(p[f"{prefix}/kernel"][0])  # the kernel's columns: one bias per unit and gate
    return {**p, f"{prefix}/bias": ops.stack([zeros, zeros]) if type(layer).__name__ == "GRU" else zeros}


def _loop(layer, prefix: str, shape: tuple):
    """:func:`_checked`'s loop, without dropout. Without a bias (``use_bias=False``) the loop adds zeros where
    Keras adds no bias, which is the same number."""
    weights, run = _biased_loop(layer, prefix, shape)
    if layer.use_bias:
        return weights, run
    return weights, lambda ops, p, x, mask: run(ops, _with_bias(ops, layer, p, prefix), x, mask)


def _biased_loop(layer, prefix: str, shape: tuple):
    """:func:`_loop` of weights named as with a bias (none among them where Keras has none)."""
    kind, cell = type(layer).__name__, layer.cell
    require(layer, not layer.return_state and not layer.stateful, "return_state or stateful")
    backwards, unroll, units = bool(layer.go_backwards), bool(layer.unroll), cell.units
    zeroed = bool(getattr(layer, "zero_output_for_mask", False))
    variables = layer.get_weights()
    if kind == "SimpleRNN":
        activation = resolve(layer, cell.activation)
        sequences = bool(layer.return_sequences)
        weights = dict(zip((f"{prefix}/kernel", f"{prefix}/recurrent_kernel", f"{prefix}/bias"), variables))

        def run(ops, p, x, mask):
            return simple_rnn(ops, p, x, prefix, activation, mask, backwards, sequences, unroll, zeroed)

        return weights, run
    require(layer, getattr(cell.activation, "__name__", "") == "tanh", "an activation other than tanh")
    require(layer, getattr(cell.recurrent_activation, "__name__", "") == "sigmoid",
             "a recurrent_activation other than sigmoid")
    require(layer, getattr(cell, "reset_after", True), "reset_after=False")
    run_loop = layers.lstm if kind == "LSTM" else layers.gru
    weights = dict(zip((f"{prefix}/kernel", f"{prefix}/recurrent", f"{prefix}/bias"), variables))
    if layer.return_sequences:
        def every_step(ops, p, x, mask):
            return gated_sequences(ops, p, x, prefix, kind, units, mask, backwards, unroll, zeroed)

        return weights, every_step

    steps = shape[1]  # None (Input(shape=(None, ...))): every step of each batch, whatever its length

    def run(ops, p, x, mask):
        if backwards:  # Keras reads the steps (and the mask) last to first
            x, mask = ops.flip(x, axis=1), None if mask is None else ops.flip(mask, axis=1)
        h = run_loop(ops, p, x, steps=steps, units=units, prefix=prefix, mask=mask, unroll=unroll)
        last = -1 if steps is None else steps - 1
        return h if mask is None or not zeroed else h * ops.expand_dims(ops.cast(mask[:, last], ops.dtype), -1)

    return weights, run


def simple_rnn(ops, p, x, prefix: str, activation, mask=None, go_backwards: bool = False,
               return_sequences: bool = False, unroll: bool = False, zero_output_for_mask: bool = False,
               recurrent_mask=None):
    """Keras' ``SimpleRNN``: ``h_t = activation(x_t W + b + h_{t-1} U)`` from ``h_0 = 0`` over ``x``
    (``[batch, time, features]``); the last output, or every step's (``[batch, time, units]``, in the order the
    steps were read). At a masked step ``h`` stays as it was, and so does the output (0 with
    ``zero_output_for_mask``). ``recurrent_mask`` (``[batch, units]``, or None) multiplies ``h_{t-1}`` before
    its product, as Keras' ``recurrent_dropout``."""
    kernel, recurrent, bias = (p[f"{prefix}/{k}"] for k in ("kernel", "recurrent_kernel", "bias"))
    inputs = ops.transpose(ops.matmul(x, kernel) + bias, (1, 0, 2))
    keep = None if mask is None else ops.expand_dims(ops.transpose(ops.cast(mask, ops.dtype)), -1)
    if go_backwards:
        inputs, keep = ops.flip(inputs, axis=0), None if keep is None else ops.flip(keep, axis=0)

    def step(state, xs):
        h, _ = state
        z, k = xs
        new = activation(ops, z + ops.matmul(h if recurrent_mask is None else h * recurrent_mask, recurrent))
        h = new if k is None else h + k * (new - h)
        out = h if k is None or not zero_output_for_mask else k * h
        return (h, out), out if return_sequences else None

    zeros = ops.zeros_like(inputs[0, :, :ops.shape(recurrent)[0]])
    (_, last), outputs = ops.scan(step, (zeros, zeros), (inputs, keep), unroll=unroll)
    return ops.transpose(outputs, (1, 0, 2)) if return_sequences else last


def gated_sequences(ops, p, x, prefix: str, kind: str, units: int, mask=None, go_backwards: bool = False,
                    unroll: bool = False, zero_output_for_mask: bool = False, input_masks=None,
                    recurrent_masks=None):
    """Every step's output of Keras' ``LSTM`` or ``GRU`` (``return_sequences=True``; the equations of
    :func:`toolkit.nn.layers.lstm` and :func:`toolkit.nn.layers.gru`), ``[batch, time, units]`` in the order the
    steps were read; masks as :func:`simple_rnn`. ``input_masks`` and ``recurrent_masks`` (one ``[batch, features]``
    or ``[batch, units]`` mask per gate, or None): Keras' ``implementation=1`` with dropout, each gate's inputs and
    ``h_{t-1}`` multiplied by the gate's own mask before its products."""
    kernel, recurrent, bias = (p[f"{prefix}/{k}"] for k in ("kernel", "recurrent", "bias"))
    gru = kind == "GRU"
    if input_masks is None:
        projected = ops.matmul(x, kernel)
    else:
        projected = ops.concatenate([ops.matmul(x * ops.expand_dims(m, 1), kernel[:, g * units:(g + 1) * units])
                                     for g, m in enumerate(input_masks)], axis=-1)
    inputs = ops.transpose(projected + (bias[0] if gru else bias), (1, 0, 2))
    keep = None if mask is None else ops.expand_dims(ops.transpose(ops.cast(mask, ops.dtype)), -1)
    if go_backwards:
        inputs, keep = ops.flip(inputs, axis=0), None if keep is None else ops.flip(keep, axis=0)

    def carry(old, new, k):
        return new if k is None else old + k * (new - old)

    def recurrent_products(h):
        if recurrent_masks is None:
            return ops.matmul(h, recurrent)
        return ops.concatenate([ops.matmul(h * m, recurrent[:, g * units:(g + 1) * units])
                                for g, m in enumerate(recurrent_masks)], axis=-1)

    def step(state, xs):
        (h, c), (a, k) = state, xs
        if gru:
            r_in = recurrent_products(h) + bias[1]
            z = ops.sigmoid(a[:, :units] + r_in[:, :units])
            r = ops.sigmoid(a[:, units:2 * units] + r_in[:, units:2 * units])
            new_h, new_c = z * h + (1.0 - z) * ops.tanh(a[:, 2 * units:] + r * r_in[:, 2 * units:]), c
        else:
            a = a + recurrent_products(h)
            new_c = ops.sigmoid(a[:, units:2 * units]) * c + \
                ops.sigmoid(a[:, :units]) * ops.tanh(a[:, 2 * units:3 * units])
            new_h = ops.sigmoid(a[:, 3 * units:]) * ops.tanh(new_c)
        h, c = carry(h, new_h, k), carry(c, new_c, k)
        return (h, c), h if k is None or not zero_output_for_mask else k * h

    zeros = ops.zeros_like(inputs[0, :, :units])
    _, outputs = ops.scan(step, (zeros, zeros), (inputs, keep), unroll=unroll)
    return ops.transpose(outputs, (1, 0, 2))


def _recurrent(layer, shape):
    weights, run = _checked(layer, layer.name, shape)
    sequences = bool(getattr(layer, "return_sequences", False))
    return weights, lambda ops, p, x, mask: (run(ops, p, x, mask), mask if sequences else None)


#: Keras' Bidirectional merge modes and how they combine the forward and backward outputs.
MERGES = {"concat": lambda ops, f, b: ops.concatenate([f, b], axis=-1), "sum": lambda ops, f, b: f + b,
          "ave": lambda ops, f, b: (f + b) / 2.0, "mul": lambda ops, f, b: f * b}


def _bidirectional(layer, shape):
    """Keras' ``Bidirectional``: its forward layer on the steps in order, its backward layer on them last to first
    (with ``return_sequences``, its outputs flipped back into step order), merged."""
    from toolkit.keras.settings import check_config  # import cycle: settings -> layers -> layers_recurrent

    require(layer, layer.merge_mode in MERGES, f"merge_mode={layer.merge_mode!r}")
    forward_layer, backward_layer = layer.forward_layer, layer.backward_layer
    for inner in (forward_layer, backward_layer):
        check_config(inner)
        require(layer, getattr(inner, "activity_regularizer", None) is None, "an activity_regularizer inside")
    forward, run_forward = _checked(forward_layer, f"{layer.name}/forward", shape)
    backward, run_backward = _checked(backward_layer, f"{layer.name}/backward", shape)
    ids = {id(v) for v in forward_layer.weights}
    ordered = iter(forward.items()), iter(backward.items())
    # the wrapper's weights in Keras' order (layer.weights), each from its own layer
    weights = dict(next(ordered[0] if id(v) in ids else ordered[1]) for v in layer.weights)
    merge, sequences = MERGES[layer.merge_mode], bool(forward_layer.return_sequences)

    def step(ops, p, x, mask):
        f, b = run_forward(ops, p, x, mask), run_backward(ops, p, x, mask)
        b = ops.flip(b, axis=1) if sequences else b
        return merge(ops, f, b), mask if sequences else None

    return weights, step


def _time_distributed(call: Call):
    """Keras' ``TimeDistributed(layer)``: the inner layer on every step, as one batch of ``batch * steps``."""
    from toolkit.keras.settings import check_config, translator  # import cycle: settings -> layers -> layers_recurrent

    layer = call.layer
    inner, first = layer.layer, next(iter(call.arguments))
    require(layer, isinstance(call.arguments[first], Slot) and set(call.arguments) <= {first, "training", "mask"},
             "calling it with anything but one tensor")
    require(layer, not call.masked, "masked inputs (a Keras mask reaching it)")
    require(layer, getattr(inner, "activity_regularizer", None) is None, "an activity_regularizer inside")
    check_config(inner)
    steps, rest = call.shape[1], tuple(call.shape[2:])
    require(layer, steps is not None, "a number of steps unknown when the model was built")
    inner_first = next(iter(inspect.signature(inner.call).parameters))
    weights, apply = translator(inner)(Call(inner, (None, *rest), {inner_first: Slot(0)}))

    def run(ops, p, args):
        x = args[first].value
        y = apply(ops, p, {inner_first: Flow(ops.reshape(x, (-1, *rest)), None)}).value
        return Flow(ops.reshape(y, (-1, steps, *ops.shape(y)[1:])), None)

    return weights, run


#: Keras layer class names and their translators.
LAYERS = {**{name: unary(_recurrent) for name in ("SimpleRNN", "LSTM", "GRU")},
          "Bidirectional": unary(_bidirectional), "TimeDistributed": _time_distributed}

_RECURRENT = frozenset({"units", "activation", "recurrent_activation", "use_bias", "return_sequences",
                        "return_state", "go_backwards", "stateful", "unroll", "dropout", "recurrent_dropout",
                        "zero_output_for_mask"})
#: The constructor arguments each translator reads (see :data:`toolkit.keras.layers.OPTIONS`). The wrappers'
#: inner layers are checked as layers of their own.
OPTIONS: dict[str, frozenset] = {
    "SimpleRNN": _RECURRENT - {"recurrent_activation"}, "LSTM": _RECURRENT, "GRU": _RECURRENT | {"reset_after"},
    "Bidirectional": frozenset({"layer", "backward_layer", "merge_mode"}), "TimeDistributed": frozenset({"layer"}),
}
