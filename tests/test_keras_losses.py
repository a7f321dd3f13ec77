"""Keras' losses and compiled metrics, translated (toolkit/nn/keras_losses.py): every loss by name, function and
object with its arguments, against targets of each shape Keras accepts, equals Keras' value (float64, 1e-12) on every
backend; one gradient per loss against Keras' own gradient; every compiled metric equals Keras' metric; an imported
model's ``fit`` history equals Keras' ``fit`` history; and what is not translated is refused by name.

The Keras reference is Keras on TensorFlow (the tests skip elsewhere). Every backend computes all the cases of a
test in one compiled function (each graph compiles for seconds on the Theano family)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import toolkit
from tests.op_checks import gradients, run
from toolkit.nn import keras_losses

pytestmark = pytest.mark.skipif(importlib.util.find_spec("keras") is None,
                                reason='needs keras (pip install "multigpu-toolkit[tensorflow]")')

#: float64 values of the toolkit against Keras' (a few roundings of values of order 1..100).
TOLERANCE = 1e-12
#: Gradients: the same formulas differentiated by two frameworks (rounding only).
GRADIENT_TOLERANCE = 1e-12
#: Keras rounds its learning rate to float32: a power of two is the same number in float64.
LR = 2.0 ** -3
N = 6
RNG = np.random.default_rng(28)


@pytest.fixture(scope="module")
def keras():
    if importlib.util.find_spec("tensorflow") is not None:
        toolkit.get_backend("tensorflow")  # its logical devices, before Keras starts TensorFlow
    import keras

    if keras.backend.backend() != "tensorflow":
        # keras.ops.mean on JAX promotes float64 with "float32" to float32 (Keras 3.15): no float64 reference there.
        pytest.skip(f"the float64 reference is Keras on TensorFlow; this Keras runs on {keras.backend.backend()}")
    floatx, policy = keras.config.floatx(), keras.config.dtype_policy()
    keras.config.set_floatx("float64")
    keras.config.set_dtype_policy("float64")
    yield keras
    keras.config.set_floatx(floatx)
    keras.config.set_dtype_policy(policy)


def _softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _data():
    """Targets and outputs by kind; probabilities include exact 0 and 1 (Keras' clipping decides those)."""
    probs = _softmax(RNG.normal(size=(N, 4)))
    probs[0] = [1.0, 0.0, 0.0, 0.0]
    sigmoid = 1 / (1 + np.exp(-RNG.normal(size=(N, 1))))
    sigmoid[0, 0], sigmoid[1, 0] = 0.0, 1.0
    labels = np.array([0, 1, 3, 2, 1, 0], np.int32)
    binary = np.array([1, 0, 1, 1, 0, 0], np.int32)
    return {
        "reg": RNG.normal(size=(N, 3)), "reg_y": RNG.normal(size=(N, 3)),
        "reg1": RNG.normal(size=(N, 1)), "reg1_y": RNG.normal(size=(N,)),
        "seq": RNG.normal(size=(N, 2, 3)), "seq_y": RNG.normal(size=(N, 2, 3)),
        "pos": RNG.uniform(0.1, 3, size=(N, 3)), "pos_y": RNG.poisson(2.0, size=(N, 3)).astype(float),
        "mape_y": np.where(RNG.uniform(size=(N, 3)) < 0.2, 0.0, RNG.normal(size=(N, 3))),
        "msle": RNG.normal(size=(N, 3)), "msle_y": np.abs(RNG.normal(size=(N, 3))),
        "probs": probs, "onehot": np.eye(4)[labels], "labels": labels, "labels1": labels[:, None],
        "logits": RNG.normal(size=(N, 4)) * 3, "dist": _softmax(RNG.normal(size=(N, 4))),
        "sigmoid": sigmoid, "binary": binary, "binary1": binary[:, None].astype(float),
        "multi": 1 / (1 + np.exp(-RNG.normal(size=(N, 3)))), "multi_y": RNG.integers(0, 2, size=(N, 3)).astype(float),
        "z": RNG.normal(size=(N, 1)) * 3, "pm1": 2.0 * binary[:, None] - 1.0, "margins": RNG.normal(size=(N, 3)),
        "cat_y": np.eye(3)[RNG.integers(0, 3, size=N)],
        "axis1": _softmax(RNG.normal(size=(N, 4, 2)).transpose(0, 2, 1)).transpose(0, 2, 1),
        "axis1_y": np.eye(4)[RNG.integers(0, 4, size=(N, 2))].transpose(0, 2, 1),
    }


DATA = _data()


def _loss_cases(keras):
    """(case id, Keras loss identifier, outputs, targets): every loss, its arguments, and the label shapes."""
    losses = keras.losses
    return [
        ("mse", "mse", "reg", "reg_y"), ("mse-N-vs-N1", "mean_squared_error", "reg1", "reg1_y"),
        ("mse-fn-seq", losses.mean_squared_error, "seq", "seq_y"), ("MSE-class", losses.MeanSquaredError(), "reg1",
                                                                   "reg1_y"),
        ("mae", "mae", "reg", "reg_y"), ("mae-N1", losses.MeanAbsoluteError(), "reg1", "reg1_y"),
        ("mape", "mape", "reg", "mape_y"), ("mape-class", losses.MeanAbsolutePercentageError(), "reg1", "reg1_y"),
        ("msle", "msle", "msle", "msle_y"), ("msle-class", losses.MeanSquaredLogarithmicError(), "msle", "msle_y"),
        ("huber", "huber", "reg", "reg_y"), ("huber-delta", losses.Huber(delta=0.5), "reg", "reg_y"),
        ("huber-N1", losses.Huber(delta=2.0), "reg1", "reg1_y"),
        ("log_cosh", "log_cosh", "reg", "reg_y"), ("log_cosh-class", losses.LogCosh(), "seq", "seq_y"),
        ("cosine", "cosine_similarity", "reg", "reg_y"), ("cosine-axis1", losses.CosineSimilarity(axis=1), "seq",
                                                          "seq_y"),
        ("hinge-01", "hinge", "margins", "multi_y"), ("hinge-pm1", losses.Hinge(), "z", "pm1"),
        ("hinge-N", losses.hinge, "z", "binary"),
        ("squared_hinge", "squared_hinge", "margins", "multi_y"), ("squared_hinge-N", losses.SquaredHinge(), "z",
                                                                   "binary"),
        ("categorical_hinge", "categorical_hinge", "margins", "cat_y"),
        ("kld", "kld", "dist", "probs"), ("kl-class", losses.KLDivergence(), "probs", "dist"),
        ("poisson", "poisson", "pos", "pos_y"), ("poisson-class", losses.Poisson(), "pos", "pos_y"),
        ("bce", "binary_crossentropy", "sigmoid", "binary1"), ("bce-N", "bce", "sigmoid", "binary"),
        ("bce-multi", losses.binary_crossentropy, "multi", "multi_y"),
        ("bce-smooth", losses.BinaryCrossentropy(label_smoothing=0.2), "sigmoid", "binary"),
        ("bce-logits", losses.BinaryCrossentropy(from_logits=True), "z", "binary"),
        ("bce-axis", losses.BinaryCrossentropy(from_logits=True, label_smoothing=0.1, axis=1), "margins", "multi_y"),
        ("cce", "categorical_crossentropy", "probs", "onehot"),
        ("cce-smooth", losses.CategoricalCrossentropy(label_smoothing=0.3), "probs", "onehot"),
        ("cce-logits", losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1), "logits", "onehot"),
        ("cce-soft", losses.categorical_crossentropy, "probs", "dist"),
        ("cce-axis1", losses.CategoricalCrossentropy(axis=1), "axis1", "axis1_y"),
        ("scce", "sparse_categorical_crossentropy", "probs", "labels"),
        ("scce-N1", losses.SparseCategoricalCrossentropy(), "probs", "labels1"),
        ("scce-logits", losses.SparseCategoricalCrossentropy(from_logits=True), "logits", "labels1"),
        ("scce-fn", losses.sparse_categorical_crossentropy, "logits", "labels"),
        ("crossentropy-binary", "crossentropy", "sigmoid", "binary"), ("ce-sparse", "ce", "probs", "labels"),
        ("crossentropy-categorical", "crossentropy", "probs", "onehot"),
        ("wrapper", keras.src.losses.LossFunctionWrapper(losses.huber, delta=0.7), "reg", "reg_y"),
        ("class-name", "BinaryCrossentropy", "multi", "multi_y"),
    ]


def _keras_loss(keras, identifier, y, p):
    """What ``compile`` makes of ``identifier`` (Keras' own ``get_loss``) applied to ``(y, p)``: one number."""
    from keras.src.trainers import compile_utils

    return float(compile_utils.get_loss(identifier, y, p)(y, p))


def _toolkit_values(backend, functions, cases):
    """Each ``function(ops, outputs, y)`` on its case, all in one compiled function, as NumPy."""
    inputs = {}
    for i, (_, _, outputs, targets) in enumerate(cases):
        inputs[f"p{i}"], inputs[f"y{i}"] = DATA[outputs], DATA[targets]
    return run(backend, lambda ops, **t: [fn(ops, t[f"p{i}"], t[f"y{i}"]) for i, fn in enumerate(functions)], inputs)


def test_every_loss_equals_keras(keras, backend):
    cases = _loss_cases(keras)
    values = _toolkit_values(backend, [keras_losses.translate_loss(c[1]) for c in cases], cases)
    for (case, identifier, outputs, targets), value in zip(cases, values):
        assert value.shape == (N,), (case, value.shape)  # one value per example
        expected = _keras_loss(keras, identifier, DATA[targets], DATA[outputs])
        assert abs(float(np.mean(value)) - expected) <= TOLERANCE * max(1.0, abs(expected)), (case, value, expected)


def _gradient_cases(keras):
    """One case per loss function (and per from_logits path), away from kinks and clipping bounds."""
    losses = keras.losses
    return [
        ("mse", "mse", "reg", "reg_y"), ("mae", "mae", "reg", "reg_y"), ("mape", "mape", "reg", "mape_y"),
        ("msle", "msle", "pos", "msle_y"), ("huber", losses.Huber(delta=0.5), "reg", "reg_y"),
        ("log_cosh", "log_cosh", "reg", "reg_y"), ("cosine", losses.CosineSimilarity(axis=1), "seq", "seq_y"),
        ("hinge", "hinge", "margins", "multi_y"), ("squared_hinge", "squared_hinge", "margins", "multi_y"),
        ("categorical_hinge", "categorical_hinge", "margins", "cat_y"), ("kld", "kld", "dist", "probs"),
        ("poisson", "poisson", "pos", "pos_y"), ("bce", losses.BinaryCrossentropy(label_smoothing=0.1), "multi",
                                                 "multi_y"),
        ("bce-logits", losses.BinaryCrossentropy(from_logits=True), "z", "binary"),
        ("cce", losses.CategoricalCrossentropy(label_smoothing=0.2), "dist", "onehot"),
        ("cce-logits", losses.CategoricalCrossentropy(from_logits=True), "logits", "onehot"),
        ("scce", "sparse_categorical_crossentropy", "dist", "labels"),
        ("scce-logits", losses.SparseCategoricalCrossentropy(from_logits=True), "logits", "labels1"),
    ]


def test_every_loss_has_keras_gradient(keras, backend_name):
    """The gradient of each loss with respect to the outputs, through a trainer, equals TensorFlow's gradient of
    Keras' loss (GradientTape)."""
    import tensorflow as tf

    cases = _gradient_cases(keras)
    functions = [keras_losses.translate_loss(c[1]) for c in cases]
    inputs = {}
    for i, (_, _, outputs, targets) in enumerate(cases):
        inputs[f"p{i}"], inputs[f"y{i}"] = DATA[outputs], DATA[targets]

    def means(ops, **t):
        return ops.stack([ops.mean(fn(ops, t[f"p{i}"], t[f"y{i}"])) for i, fn in enumerate(functions)])

    grads = gradients(backend_name, means, inputs, np.ones(len(cases)))
    for i, (case, identifier, outputs, targets) in enumerate(cases):
        p = tf.Variable(DATA[outputs])
        with tf.GradientTape() as tape:
            from keras.src.trainers import compile_utils

            value = compile_utils.get_loss(identifier, DATA[targets], DATA[outputs])(DATA[targets], p)
        expected = tape.gradient(value, p).numpy()
        assert np.max(np.abs(grads[f"p{i}"] - expected)) <= GRADIENT_TOLERANCE, case
