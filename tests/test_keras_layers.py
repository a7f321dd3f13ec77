"""Each toolkit layer against the Keras layer of the same name: Keras' weights in, the same outputs and the same
weight gradients out (float64), on every backend; and each layer's init has Keras' parameter shapes."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import toolkit
from toolkit import layers

pytestmark = pytest.mark.skipif(importlib.util.find_spec("keras") is None,
                                reason='the Keras reference needs keras (pip install "multigpu-toolkit[tensorflow]")')

RNG = np.random.default_rng(11)
X = {
    "seq": RNG.normal(size=(4, 5, 6)),
    "img": RNG.normal(size=(3, 7, 6, 2)),
    "ids": RNG.integers(0, 10, size=(4, 5)).astype(np.int32),
    "query": RNG.normal(size=(2, 5, 8)),
    "value": RNG.normal(size=(2, 6, 8)),
    "mask": RNG.random((2, 5, 6)) > 0.3,
    # Keras' mask_zero rule: padded (False) steps after each sequence's end, one in the middle, none in row 0.
    "seq_mask": np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 1, 1, 0], [1, 1, 0, 0, 0]], bool),
}
#: Where Keras' TensorFlow backend rounds part of a float64 layer to float32, and how close it then is: its max
#: pooling returns float32; its MultiHeadAttention scales the queries by 1/sqrt(key_dim) through ops.cast of a Python
#: float, which TensorFlow converts to float32 first (measured: 9.3e-9 from an exact NumPy computation, which equals
#: that scale rounded to float32 to 7e-16). The toolkit keeps float64 exact.
FLOAT32_IN_KERAS = {"max_pool2d": 1e-6, "multi_head_attention": 1e-6, "multi_head_attention_causal": 1e-6}


def _mha(keras, **options):
    return keras.layers.MultiHeadAttention(num_heads=2, key_dim=3, dtype="float64", **options)


# name -> (Keras layer factory, its call(inputs), the toolkit layer(ops, params, inputs), the toolkit's names of the
# Keras layer's weights in Keras' order, the toolkit init(rng) or None)
CASES = {
    "dense": (lambda k: k.layers.Dense(5, activation="relu", dtype="float64"), lambda layer, t: layer(t["seq"]),
              lambda o, p, t: layers.dense(o, p, t["seq"], activation="relu"), ["dense/kernel", "dense/bias"],
              lambda rng: layers.dense_init(rng, 6, 5)),
    "embedding": (lambda k: k.layers.Embedding(10, 4, dtype="float64"), lambda layer, t: layer(t["ids"]),
                  lambda o, p, t: layers.embedding(o, p, t["ids"]), ["embedding/embeddings"],
                  lambda rng: layers.embedding_init(rng, 10, 4)),
    "conv2d_strided_same": (lambda k: k.layers.Conv2D(4, 3, strides=2, padding="same", activation="tanh",
                                                      dtype="float64"), lambda layer, t: layer(t["img"]),
                            lambda o, p, t: layers.conv2d(o, p, t["img"], strides=2, padding="same",
                                                          activation="tanh"),
                            ["conv/kernel", "conv/bias"], lambda rng: layers.conv2d_init(rng, 2, 4, 3)),
    "conv2d_dilated": (lambda k: k.layers.Conv2D(3, (2, 3), dilation_rate=2, dtype="float64"),
                       lambda layer, t: layer(t["img"]),
                       lambda o, p, t: layers.conv2d(o, p, t["img"], dilation_rate=2), ["conv/kernel", "conv/bias"],
                       lambda rng: layers.conv2d_init(rng, 2, 3, (2, 3))),
    "max_pool2d": (lambda k: k.layers.MaxPooling2D(3, strides=2, padding="same", dtype="float64"),
                   lambda layer, t: layer(t["img"]),
                   lambda o, p, t: layers.max_pool2d(o, t["img"], 3, strides=2, padding="same"), [], None),
    "average_pool2d": (lambda k: k.layers.AveragePooling2D(2, padding="same", dtype="float64"),
                       lambda layer, t: layer(t["img"]),
                       lambda o, p, t: layers.average_pool2d(o, t["img"], 2, padding="same"), [], None),
    "global_average_pool2d": (lambda k: k.layers.GlobalAveragePooling2D(dtype="float64"),
                              lambda layer, t: layer(t["img"]),
                              lambda o, p, t: layers.global_average_pool2d(o, t["img"]), [], None),
    "flatten": (lambda k: k.layers.Flatten(dtype="float64"), lambda layer, t: layer(t["img"]),
                lambda o, p, t: layers.flatten(o, t["img"]), [], None),
    "layer_norm": (lambda k: k.layers.LayerNormalization(dtype="float64"), lambda layer, t: layer(t["seq"]),
                   lambda o, p, t: layers.layer_norm(o, p, t["seq"]), ["layer_norm/gamma", "layer_norm/beta"],
                   lambda rng: layers.layer_norm_init(rng, 6)),
    "multi_head_attention": (
        lambda k: _mha(k), lambda layer, t: layer(t["query"], t["value"], attention_mask=t["mask"]),
        lambda o, p, t: layers.multi_head_attention(o, p, t["query"], t["value"], attention_mask=t["mask"]),
        [f"mha/{n}/{w}" for n in ("query", "key", "value", "attention_output") for w in ("kernel", "bias")],
        lambda rng: layers.multi_head_attention_init(rng, 8, 2, 3)),
    "multi_head_attention_causal": (
        lambda k: _mha(k), lambda layer, t: layer(t["query"], t["query"], use_causal_mask=True),
        lambda o, p, t: layers.multi_head_attention(o, p, t["query"], t["query"], use_causal_mask=True),
        [f"mha/{n}/{w}" for n in ("query", "key", "value", "attention_output") for w in ("kernel", "bias")], None),
    "lstm": (lambda k: k.layers.LSTM(4, dtype="float64"), lambda layer, t: layer(t["seq"]),
             lambda o, p, t: layers.lstm(o, p, t["seq"], steps=5, units=4),
             ["lstm/kernel", "lstm/recurrent", "lstm/bias"], lambda rng: layers.lstm_init(rng, 6, 4)),
    "lstm_masked": (lambda k: k.layers.LSTM(4, dtype="float64"), lambda layer, t: layer(t["seq"], mask=t["seq_mask"]),
                    lambda o, p, t: layers.lstm(o, p, t["seq"], steps=5, units=4, mask=t["seq_mask"]),
                    ["lstm/kernel", "lstm/recurrent", "lstm/bias"], None),
    "gru": (lambda k: k.layers.GRU(4, dtype="float64"), lambda layer, t: layer(t["seq"]),
            lambda o, p, t: layers.gru(o, p, t["seq"], steps=5, units=4),
            ["gru/kernel", "gru/recurrent", "gru/bias"], lambda rng: layers.gru_init(rng, 6, 4)),
    "gru_masked": (lambda k: k.layers.GRU(4, dtype="float64"), lambda layer, t: layer(t["seq"], mask=t["seq_mask"]),
                   lambda o, p, t: layers.gru(o, p, t["seq"], steps=5, units=4, mask=t["seq_mask"]),
                   ["gru/kernel", "gru/recurrent", "gru/bias"], None),
}


def _keras(name):
    """The Keras layer built on the inputs, its output and the gradient of ``mean over examples of sum(output *
    weights)`` for each of its weights (by the toolkit's names)."""
    toolkit.get_backend("tensorflow")  # TensorFlow starts with the logical devices, not on Keras' first op
    import keras
    import tensorflow as tf

    factory, call, _, names, _ = CASES[name]
    layer = factory(keras)
    out = call(layer, X)
    direction = np.random.default_rng(3).normal(size=out.shape)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(call(layer, X) * direction) / out.shape[0]
    grads = tape.gradient(loss, [w.value for w in layer.weights])
    return ({n: w.numpy() for n, w in zip(names, layer.weights)}, np.asarray(out), direction,
            {n: np.asarray(tf.convert_to_tensor(g)) for n, g in zip(names, grads)})


@pytest.mark.parametrize("name", list(CASES))
def test_layer_equals_the_keras_layer(backend, name):
    if backend.name != "tensorflow" and importlib.util.find_spec("tensorflow") is None:
        pytest.skip("the Keras reference needs TensorFlow")
    params, expected, direction, keras_grads = _keras(name)
    _, _, fn, _, _ = CASES[name]
    device = backend.list_devices()[0]
    inputs = {k: backend.place(v, device) for k, v in X.items()}
    native = {k: backend.place(v, device) for k, v in params.items()}
    out = backend.to_numpy(backend.call(lambda ops, p, **t: fn(ops, p, t), device, {"p": native, **inputs},
                                        "float64"))
    tolerance = FLOAT32_IN_KERAS.get(name, 1e-10)
    np.testing.assert_allclose(out, expected, rtol=tolerance, atol=tolerance)
    if not params:
        return
    batch = len(direction)
    model = toolkit.Model(lambda rng: params, lambda ops, p, x: fn(ops, p, X),
                          lambda ops, out, target: ops.sum(ops.reshape(out * target, (batch, -1)), axis=1))
    trainer = toolkit.DataParallel(model, backend, 1, toolkit.optim.SGD(0.1), dtype="float64")
    grads = trainer.gradients(np.zeros((batch, 1)), direction)
    for n in params:
        np.testing.assert_allclose(grads[n], keras_grads[n], rtol=max(tolerance, 1e-9), atol=tolerance, err_msg=n)


@pytest.mark.parametrize("name", [n for n, case in CASES.items() if case[4] is not None])
def test_layer_init_has_the_keras_shapes(name):
    keras_params, _, _, _ = _keras(name)
    ours = CASES[name][4](np.random.default_rng(0))
    assert {k: v.shape for k, v in ours.items()} == {k: v.shape for k, v in keras_params.items()}
