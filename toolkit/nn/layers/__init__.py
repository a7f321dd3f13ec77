"""Layers written once with :class:`toolkit.ops.Ops`: the same arithmetic on every backend.

Each layer is an ``*_init(rng, ...)`` returning a dict of NumPy arrays (model state, such as batch normalization's
moving statistics, marked :class:`~toolkit.State`), with Keras' default initialisers and Keras'
parameter shapes (so weights move between a Keras layer and the toolkit unchanged), and a function
``layer(ops, params, x, ...)``. Parameter dicts are flat; ``prefix`` keeps the names of several layers apart.
"""

from toolkit.nn.layers.attention import multi_head_attention, multi_head_attention_init
from toolkit.nn.layers.convolutional import (
    average_pool2d,
    conv2d,
    conv2d_init,
    global_average_pool2d,
    global_max_pool2d,
    max_pool2d,
)
from toolkit.nn.layers.core import (
    activate,
    dense,
    dense_init,
    embedding,
    embedding_init,
    fans,
    flatten,
    glorot_uniform,
    orthogonal,
)
from toolkit.nn.layers.normalization import batch_norm, batch_norm_init, layer_norm, layer_norm_init
from toolkit.nn.layers.recurrent import gru, gru_init, lstm, lstm_init
from toolkit.nn.layers.regularization import dropout

__all__ = [
    "activate", "average_pool2d", "batch_norm", "batch_norm_init", "conv2d", "conv2d_init", "dense", "dense_init",
    "dropout", "embedding", "embedding_init", "fans", "flatten", "global_average_pool2d", "global_max_pool2d",
    "glorot_uniform", "gru", "gru_init", "layer_norm", "layer_norm_init", "lstm", "lstm_init", "max_pool2d",
    "multi_head_attention", "multi_head_attention_init", "orthogonal",
]
