"""Layers written once with :class:`toolkit.Ops`: an ``*_init(rng, ...)`` giving a layer's parameters with Keras'
shapes and initialisers, and ``layer(ops, params, x, ...)`` (``from toolkit.layers import dense``).

The public names of :mod:`toolkit.nn.layers`, where they are written and documented.
"""

from toolkit.nn.layers import (
    activate,
    average_pool2d,
    batch_norm,
    batch_norm_init,
    conv2d,
    conv2d_init,
    dense,
    dense_init,
    dropout,
    embedding,
    embedding_init,
    fans,
    flatten,
    global_average_pool2d,
    global_max_pool2d,
    glorot_uniform,
    gru,
    gru_init,
    layer_norm,
    layer_norm_init,
    lstm,
    lstm_init,
    max_pool2d,
    multi_head_attention,
    multi_head_attention_init,
    orthogonal,
)

__all__ = [
    "activate", "average_pool2d", "batch_norm", "batch_norm_init", "conv2d", "conv2d_init", "dense", "dense_init",
    "dropout", "embedding", "embedding_init", "fans", "flatten", "global_average_pool2d", "global_max_pool2d",
    "glorot_uniform", "gru", "gru_init", "layer_norm", "layer_norm_init", "lstm", "lstm_init", "max_pool2d",
    "multi_head_attention", "multi_head_attention_init", "orthogonal",
]
