"""Multi-head attention (Keras ``MultiHeadAttention``), with an optional mask and a causal mask."""

from __future__ import annotations

import numpy as np

from toolkit.nn.layers.core import glorot_uniform
from toolkit.nn.layers.regularization import dropout as _dropout
from toolkit.ops.training import record_layer

#: What Keras' ``Softmax`` layer puts in place of a masked score (``keras.layers.Softmax``'s large negative number for
#: float32 and float64), where attention has dropout and Keras computes the scores itself.
_MASKED_SCORE = -1e9


def multi_head_attention_init(rng: np.random.Generator, query_dim: int, num_heads: int, key_dim: int,
                              value_dim: int | None = None, key_source_dim: int | None = None,
                              prefix: str = "mha") -> dict[str, np.ndarray]:
    """Keras ``MultiHeadAttention``'s weights in Keras' shapes: ``query``, ``key``, ``value`` kernels
    ``[input_dim, heads, depth]`` with biases ``[heads, depth]``, and ``attention_output`` ``[heads, value_dim,
    query_dim]`` with bias ``[query_dim]``; Glorot-uniform kernels (Keras' fans), zero biases.

    Args:
        rng: the NumPy generator drawn from.
        query_dim: the width of the query input, and of the output.
        num_heads: the number of attention heads.
        key_dim: each head's depth for queries and keys.
        value_dim: each head's depth for values (None: ``key_dim``).
        key_source_dim: the width of the key/value input (None: ``query_dim``).
        prefix: the layer's name in the flat parameter dict.

    Returns:
        The eight weights above, by ``f"{prefix}/query/kernel"`` and the like, float64 NumPy arrays.
    """
    value_dim = value_dim or key_dim
    source = key_source_dim or query_dim
    params = {}
    for name, width, depth in (("query", query_dim, key_dim), ("key", source, key_dim), ("value", source, value_dim)):
        params[f"{prefix}/{name}/kernel"] = glorot_uniform(rng, (width, num_heads, depth))
        params[f"{prefix}/{name}/bias"] = np.zeros((num_heads, depth))
    params[f"{prefix}/attention_output/kernel"] = glorot_uniform(rng, (num_heads, value_dim, query_dim))
    params[f"{prefix}/attention_output/bias"] = np.zeros(query_dim)
    return params


def _project(ops, params, x, name: str):
    """``x`` ``[batch, length, width]`` through a ``[width, heads, depth]`` kernel, plus bias: ``[batch, length,
    heads, depth]``."""
    width, heads, depth = ops.shape(params[name + "/kernel"])
    flat = ops.matmul(x, ops.reshape(params[name + "/kernel"], (width, heads * depth)))
    return record_layer(ops, name, ops.reshape(flat, (-1, ops.shape(x)[1], heads, depth)) + params[name + "/bias"])


def _attention_with_dropout(ops, q, k, v, mask, use_causal_mask: bool, rate: float):
    """Keras' ``MultiHeadAttention`` path for ``dropout > 0``: the scores ``(q / sqrt(key_dim)) k^T``, masked
    entries ``_MASKED_SCORE`` (Keras' ``Softmax`` layer), softmax over the sources, dropout on the attention
    probabilities (each example's from its key, as :func:`~toolkit.nn.layers.dropout`; off in inference), times
    ``v``: ``[batch, target, heads, value_dim]``."""
    target, source = ops.shape(q)[1], ops.shape(k)[1]
    scores = ops.einsum("bsnh,btnh->bnts", k, q * (1.0 / np.sqrt(float(ops.shape(q)[-1]))))
    if use_causal_mask:
        causal = ops.convert_to_tensor(np.tril(np.ones((target, source), bool)))
        mask = causal if mask is None else ops.logical_and(mask, causal)
    if mask is not None:
        scores = ops.where(mask, scores, _MASKED_SCORE)
    probabilities = _dropout(ops, ops.softmax(scores, axis=-1), rate)
    return ops.einsum("bnts,bsnh->btnh", probabilities, v)


def multi_head_attention(ops, params, query, value, key=None, attention_mask=None, use_causal_mask: bool = False,
                         prefix: str = "mha", dropout: float = 0.0):
    """Multi-head attention as Keras computes it::

        q, k, v = query W_q + b_q, key W_k + b_k, value W_v + b_v        (per head)
        heads   = dot_product_attention(q, k, v, mask, is_causal)      (softmax(q k^T / sqrt(key_dim)) v)
        output  = heads W_o + b_o                                      (the heads' outputs joined)

    With ``dropout``, as Keras: the attention probabilities (the softmax) are dropped in training, with the
    toolkit's per-example masks (reproducible on every backend and device count, not Keras' draws).

    Args:
        ops: the :class:`~toolkit.ops.Ops` running the model.
        params: the model's parameters, holding :func:`multi_head_attention_init`'s names for ``prefix``.
        query: ``[batch, target, query_dim]``.
        value: ``[batch, source, key_source_dim]``.
        key: ``[batch, source, key_source_dim]``; None: ``value``.
        attention_mask: booleans ``[batch, target, source]``, True where a query may attend (None: everywhere).
        use_causal_mask: the query at position ``t`` attends only to sources ``0..t``.
        prefix: the layer's name given to :func:`multi_head_attention_init`.
        dropout: the rate at which attention probabilities are dropped in training, in ``[0, 1)``.

    Returns:
        ``[batch, target, query_dim]``. Recorded (``ops.record``), as Keras names the sub-layers: the projections
        ``{prefix}/query``, ``/key``, ``/value`` (``[batch, length, heads, depth]``), the heads' attention
        ``{prefix}/heads`` (``[batch, target, heads, value_dim]``) and the output ``{prefix}/attention_output``.

    Raises:
        ArgumentError: ``dropout`` outside ``[0, 1)``.
    """
    key = value if key is None else key
    q = _project(ops, params, query, f"{prefix}/query")
    k = _project(ops, params, key, f"{prefix}/key")
    v = _project(ops, params, value, f"{prefix}/value")
    mask = None if attention_mask is None else ops.expand_dims(attention_mask, 1)  # one mask for every head
    if dropout:
        heads = _attention_with_dropout(ops, q, k, v, mask, use_causal_mask, dropout)
    else:
        heads = ops.dot_product_attention(q, k, v, mask=mask, is_causal=use_causal_mask)
    heads = record_layer(ops, f"{prefix}/heads", heads)
    kernel = params[f"{prefix}/attention_output/kernel"]
    num_heads, value_dim, out_dim = ops.shape(kernel)
    joined = ops.reshape(heads, (-1, ops.shape(query)[1], num_heads * value_dim))
    return record_layer(ops, f"{prefix}/attention_output", ops.matmul(
        joined, ops.reshape(kernel, (num_heads * value_dim, out_dim))) + params[f"{prefix}/attention_output/bias"])
