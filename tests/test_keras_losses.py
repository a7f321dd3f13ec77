"""Keras' losses and compiled metrics, translated (toolkit/keras/losses.py): every loss by name, function and
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
from tests.helpers import keras_in_float64
from tests.op_checks import gradients, run
from toolkit.keras import losses as keras_losses

pytestmark = pytest.mark.skipif(importlib.util.find_spec("keras") is None,
                                reason='needs keras (pip install "multigpu-toolkit[tensorflow]")')

#: float64 values of the toolkit against Keras', relative to values of at least 1 (a few roundings each).
TOLERANCE = 1e-12
#: Gradients, relative to the largest entry of at least 1: the same formulas differentiated by two frameworks.
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
    with keras_in_float64(keras):
        yield keras


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
        scale = max(1.0, float(np.max(np.abs(expected))))  # mape's gradient is ~1e8 where a target is 0
        assert np.max(np.abs(grads[f"p{i}"] - expected)) <= GRADIENT_TOLERANCE * scale, case


def _metric_cases(keras):
    """(case id, Keras metric identifier, outputs, targets): the metrics users compile, and their arguments."""
    metrics = keras.metrics
    return [
        ("accuracy-binary", "accuracy", "sigmoid", "binary"), ("accuracy-binary-N1", "accuracy", "sigmoid", "binary1"),
        ("acc-sparse", "acc", "probs", "labels"), ("accuracy-sparse-N1", "accuracy", "probs", "labels1"),
        ("accuracy-categorical", "accuracy", "probs", "onehot"),
        ("binary_accuracy", "binary_accuracy", "sigmoid", "binary1"),
        ("binary_accuracy-threshold", metrics.BinaryAccuracy(threshold=0.7), "sigmoid", "binary"),
        ("binary_accuracy-fn", metrics.binary_accuracy, "multi", "multi_y"),
        ("categorical_accuracy", "categorical_accuracy", "probs", "onehot"),
        ("categorical_accuracy-class", metrics.CategoricalAccuracy(name="cat"), "logits", "onehot"),
        ("sparse_categorical_accuracy", "sparse_categorical_accuracy", "probs", "labels"),
        ("sparse_categorical_accuracy-N1", metrics.SparseCategoricalAccuracy(), "logits", "labels1"),
        ("top_k", "top_k_categorical_accuracy", "probs", "onehot"),
        ("top_k-2", metrics.TopKCategoricalAccuracy(k=2), "logits", "onehot"),
        ("sparse_top_k", "sparse_top_k_categorical_accuracy", "probs", "labels"),
        ("sparse_top_k-2-N1", metrics.SparseTopKCategoricalAccuracy(k=2), "logits", "labels1"),
        ("mse", "mse", "reg", "reg_y"), ("mae", "mae", "reg", "reg_y"), ("mape", "mape", "reg", "mape_y"),
        ("msle", "msle", "msle", "msle_y"), ("mean_squared_error-N1", metrics.MeanSquaredError(), "reg1", "reg1_y"),
        ("mean_absolute_error", "mean_absolute_error", "seq", "seq_y"),
        ("binary_crossentropy", "binary_crossentropy", "sigmoid", "binary1"),
        ("bce-logits", metrics.BinaryCrossentropy(from_logits=True, label_smoothing=0.1), "z", "binary1"),
        ("categorical_crossentropy", "categorical_crossentropy", "probs", "onehot"),
        ("cce-logits", metrics.CategoricalCrossentropy(from_logits=True, label_smoothing=0.2), "logits", "onehot"),
        ("sparse_categorical_crossentropy", "sparse_categorical_crossentropy", "probs", "labels"),
        ("scce-logits-N1", metrics.SparseCategoricalCrossentropy(from_logits=True), "logits", "labels1"),
        ("kl_divergence", "kl_divergence", "dist", "probs"), ("poisson", metrics.Poisson(), "pos", "pos_y"),
        ("hinge", "hinge", "margins", "multi_y"), ("squared_hinge", metrics.SquaredHinge(), "z", "pm1"),
        ("categorical_hinge", "categorical_hinge", "margins", "cat_y"),
        ("log_cosh_error", metrics.LogCoshError(), "reg", "reg_y"),
        ("cosine_similarity", "cosine_similarity", "reg", "reg_y"),
        ("cosine_similarity-axis1", metrics.CosineSimilarity(axis=1), "seq", "seq_y"),
        ("huber-fn", keras.losses.huber, "reg", "reg_y"),
    ]


def test_every_metric_equals_keras(keras, backend):
    """Each metric as ``compile`` makes it (Keras' ``get_metric``, which picks the accuracy kind from the shapes):
    the same name and the same value as Keras' metric after one batch."""
    from keras.src.trainers import compile_utils

    cases = _metric_cases(keras)
    metrics = [keras_losses.translate_metric(c[1]) for c in cases]
    values = _toolkit_values(backend, metrics, cases)
    for (case, identifier, outputs, targets), metric, value in zip(cases, metrics, values):
        # TensorFlow's InTopKV2 takes float32 only: Keras' top-k metrics fail on float64 outputs (0 or 1 anyway).
        p = DATA[outputs].astype(np.float32) if "top_k" in case else DATA[outputs]
        expected = compile_utils.get_metric(identifier, DATA[targets], p)
        expected.update_state(DATA[targets], p)
        assert metric.name == expected.name, case
        assert value.shape == (N,), (case, value.shape)
        expected = float(expected.result())
        assert abs(float(np.mean(value)) - expected) <= TOLERANCE * max(1.0, abs(expected)), (case, value, expected)


def test_toolkit_metrics_by_keras_names_equal_keras(keras, backend):
    """``toolkit.metrics`` by name (``trainer.fit(metrics=["accuracy"])``) gives what ``compile(metrics=[name])``
    gives in Keras."""
    from keras.src.trainers import compile_utils

    # toolkit.metrics' own sparse crossentropy normalizes, then clips (Keras on JAX, NumPy, PyTorch), where Keras on
    # TensorFlow clips first: the two differ on a saturated row.
    cases = [c for c in _metric_cases(keras) if isinstance(c[1], str) and c[1] != "sparse_categorical_crossentropy"]
    values = _toolkit_values(backend, [toolkit.metrics.get(c[1])[0] for c in cases], cases)
    for (case, name, outputs, targets), value in zip(cases, values):
        p = DATA[outputs].astype(np.float32) if "top_k" in case else DATA[outputs]  # as above
        expected = compile_utils.get_metric(name, DATA[targets], p)
        expected.update_state(DATA[targets], p)
        expected = float(expected.result())
        assert abs(float(np.mean(value)) - expected) <= TOLERANCE * max(1.0, abs(expected)), (case, value, expected)


def _fit_models(keras):
    """Compiled models of the three kinds of targets, with the metrics users compile for each."""
    keras.utils.set_random_seed(3)
    layers = keras.layers
    binary = keras.Sequential([keras.Input((4,)), layers.Dense(3, activation="tanh"),
                               layers.Dense(1, activation="sigmoid")])
    binary.compile(optimizer=keras.optimizers.SGD(LR), loss=keras.losses.BinaryCrossentropy(label_smoothing=0.1),
                   metrics=["accuracy", "mae", keras.metrics.BinaryAccuracy(threshold=0.6, name="confident")])
    sparse = keras.Sequential([keras.Input((4,)), layers.Dense(4, activation="softmax")])
    sparse.compile(optimizer=keras.optimizers.SGD(LR), loss="sparse_categorical_crossentropy",
                   metrics=["acc", "sparse_categorical_crossentropy", keras.metrics.SparseCategoricalAccuracy("sca")])
    regression = keras.Sequential([keras.Input((4,)), layers.Dense(2)])
    regression.compile(optimizer=keras.optimizers.SGD(LR), loss=keras.losses.Huber(delta=0.5),
                       metrics=["mse", "mape", keras.metrics.CosineSimilarity()])
    x = RNG.normal(size=(10, 4))
    return {"binary": (binary, x, RNG.integers(0, 2, size=10)),
            "sparse": (sparse, x, RNG.integers(0, 4, size=(10, 1))),
            "regression": (regression, x, RNG.normal(size=(10, 2)))}


@pytest.mark.parametrize("kind", ["binary", "sparse", "regression"])
def test_imported_model_fits_and_evaluates_like_keras(keras, backend, kind):
    """``from_keras(model)`` carries the compiled metrics: ``fit`` without ``metrics=`` logs Keras' names and values
    (three steps a epoch, the last one smaller; two epochs; two devices), and ``evaluate`` gives Keras' numbers."""
    model, x, y = _fit_models(keras)[kind]
    imported = toolkit.from_keras(model)
    trainer = toolkit.DataParallel(imported, backend, 2, toolkit.optim.SGD(LR), dtype="float64")
    history = trainer.fit(x, y, epochs=2, batch_size=4, shuffle=False, verbose=0).history
    expected = model.fit(x, y, epochs=2, batch_size=4, shuffle=False, verbose=0).history
    assert sorted(history) == sorted(expected)
    for name, values in expected.items():
        assert np.max(np.abs(np.subtract(history[name], values))) <= 1e-10, (name, history[name], values)
    scores, keras_scores = trainer.evaluate(x, y), model.evaluate(x, y, verbose=0, return_dict=True)
    assert sorted(scores) == sorted(keras_scores)
    for name, value in keras_scores.items():
        assert abs(scores[name] - value) <= 1e-10, (name, scores[name], value)


def test_what_is_not_translated_is_refused_by_name(keras):
    losses, metrics = keras.losses, keras.metrics

    class Custom(losses.MeanSquaredError):
        pass

    for loss, words in [
        ("no_such_loss", "'no_such_loss' is not a Keras loss"),
        (lambda y, p: (y - p) ** 2, "<lambda>.*is not supported: from_keras translates Keras' own"),
        (Custom(), "Custom is not supported"),
        (losses.BinaryFocalCrossentropy(), "binary_focal_crossentropy.*is not supported"),
        (losses.MeanSquaredError(reduction="sum"), "reduction='sum' is not supported"),
        (losses.SparseCategoricalCrossentropy(ignore_class=0), "ignore_class=0 is not supported"),
        (losses.SparseCategoricalCrossentropy(axis=1), "axis=1 is not supported"),
        (losses.BinaryCrossentropy(from_logits=1), "from_logits=1 is not supported"),
        (metrics.binary_accuracy, "binary_accuracy is a Keras metric, not a loss"),
        (losses.MeanSquaredError(dtype="float32"), "computes in float32 where the model computes in float64"),
    ]:
        with pytest.raises(toolkit.KerasImportError, match=words):
            keras_losses.translate_loss(loss, "float64")
    for metric, words in [
        ("auc", "AUC is not supported: from_keras translates Keras' metrics that average one value per example"),
        (metrics.RootMeanSquaredError(), "RootMeanSquaredError is not supported"),
        (lambda y, p: y, "<lambda>.*is not supported"),
        (metrics.SparseTopKCategoricalAccuracy(from_sorted_ids=True), "from_sorted_ids=True is not supported"),
        (metrics.SparseCategoricalCrossentropy(ignore_class=3), "ignore_class=3 is not supported"),
        (metrics.TopKCategoricalAccuracy(k=0), "k=0 is not supported"),
    ]:
        with pytest.raises(toolkit.KerasImportError, match=words):
            keras_losses.translate_metric(metric, "float64")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    for settings, words in [
        ({"metrics": ["mse", metrics.AUC()]}, "AUC is not supported"),
        ({"loss_weights": [0.5]}, r"loss_weights=\[0.5\] is not supported"),
        ({"metrics": {"dense": ["mae"]}}, "per output are not supported"),
        ({"metrics": ["mse", "mse"]}, "names must be unique"),
    ]:
        model.compile(loss="mse", **settings)
        with pytest.raises(toolkit.KerasImportError, match=words):
            toolkit.from_keras(model)


@pytest.mark.parametrize("kind, identifier, outputs, targets, words", [
    ("loss", "binary_crossentropy", "margins", "binary", r"Keras needs one shape: pass targets of the outputs' shape"),
    ("loss", "sparse_categorical_crossentropy", "probs", "multi_y", "one class index per output row"),
    ("loss", "cosine_similarity", "reg1_y", "reg1_y", "is the batch axis"),
    ("metric", "hinge", "margins", "binary", "which Keras broadcasts across examples"),
    ("metric", "mse", "reg1_y", "reg1_y", "is the batch axis"),
    ("metric", "accuracy", "reg1_y", "binary", r"pass outputs of shape \(N, 1\) or \(N, classes\)"),
], ids=["bce-shapes", "sparse-labels", "cosine-rank-1", "hinge-metric-ranks", "mse-metric-rank-1", "accuracy-rank-1"])
def test_shapes_keras_would_mix_across_examples_raise_a_shape_error(keras, backend, kind, identifier, outputs,
                                                                     targets, words):
    translated = keras_losses.translate_loss(identifier) if kind == "loss" else keras_losses.translate_metric(
        identifier)
    with pytest.raises(toolkit.ShapeError, match=words):
        _toolkit_values(backend, [translated], [(kind, identifier, outputs, targets)])
