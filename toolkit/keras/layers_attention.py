"""How :func:`toolkit.from_keras` translates Keras' ``Attention`` layer (Luong-style dot-product or Bahdanau-style
concat attention over ``[query, value]`` or ``[query, value, key]``), as Keras' own ``call`` computes it, with its
masks (the query's zeroes masked output rows; the value's leaves masked positions out) and ``use_causal_mask``.
Attention dropout draws the toolkit's per-example masks in training (as ``Dropout`` does), none in inference.
Registered by :mod:`toolkit.keras.layers`.
"""

from __future__ import annotations

from toolkit.keras.translation import Call, Flow, Slot, layer_weights, require
from toolkit.nn import layers

#: What Keras subtracts from the scores of masked positions before the softmax (float32 and float64).
MASKED_SCORE = 1.0e9


def _attention(call: Call):
    layer, arguments = call.layer, call.arguments
    inputs = arguments.get("inputs")
    require(layer, isinstance(inputs, (list, tuple)) and len(inputs) in (2, 3)
             and all(isinstance(i, Slot) for i in inputs), "calling it on anything but [query, value(, key)]")
    extra = set(arguments) - {"inputs", "mask", "training", "use_causal_mask", "return_attention_scores"}
    require(layer, not extra and not arguments.get("return_attention_scores"),
             f"calling it with {sorted(extra) or 'return_attention_scores'}")
    causal = arguments.get("use_causal_mask", False)
    require(layer, isinstance(causal, bool), "a use_causal_mask that is not a Python bool")
    weights, prefix = layer_weights(layer), layer.name
    scale = f"{prefix}/scale" if layer.use_scale else None
    concat = layer.score_mode == "concat"
    rate = float(layer.dropout)

    def apply(ops, p, args):
        flows = args["inputs"]
        query, value = flows[0].value, flows[1].value
        key = flows[2].value if len(flows) > 2 else value
        given = args.get("mask")
        masks = [m.value if isinstance(m, Flow) else m for m in given] if given is not None else \
            [flows[0].mask, flows[1].mask]
        q_mask, v_mask = (list(masks) + [None, None])[:2]
        if concat:
            summed = ops.expand_dims(query, -2) + ops.expand_dims(key, -3)
            scores = p[f"{prefix}/concat_score_weight"] * ops.sum(
                ops.tanh(p[scale] * summed if scale else summed), axis=-1)
        else:
            scores = ops.matmul(query, ops.swapaxes(key, -2, -1))
            scores = scores * p[scale] if scale else scores
        keep = None if v_mask is None else ops.expand_dims(ops.cast(v_mask, "bool"), -2)
        if causal:
            steps_q, steps_v = ops.shape(scores)[-2:]
            rows = ops.expand_dims(ops.arange(steps_q), -1)
            lower = ops.expand_dims(ops.greater_equal(rows, ops.expand_dims(ops.arange(steps_v), 0)), 0)
            keep = lower if keep is None else ops.logical_and(keep, lower)
        if keep is not None:
            scores = ops.where(keep, scores, scores - MASKED_SCORE)
        attention = layers.dropout(ops, ops.softmax(scores, axis=-1), rate)
        out = ops.matmul(attention, value)
        if q_mask is not None:
            out = ops.where(ops.expand_dims(ops.cast(q_mask, "bool"), -1), out, 0.0)
        return Flow(out, q_mask)

    return weights, apply


#: Keras layer class names and their translators.
LAYERS = {"Attention": _attention}
#: The constructor arguments each translator reads (see :data:`toolkit.keras.layers.OPTIONS`); the seed draws
#: Keras' dropout masks, which the toolkit draws from the trainer's keys.
OPTIONS: dict[str, frozenset] = {"Attention": frozenset({"use_scale", "score_mode", "dropout", "seed"})}
