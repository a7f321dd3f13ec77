"""Keras' sample_weight and class_weight: fit and evaluate weigh each example's loss as Keras does
(``sum(loss * weight) / N``, the regularization penalties added after the weighting), weighted metrics are
``sum(value * weight) / sum(weight)``, validation data takes its weights, and bad weights are refused before any
step. Compared with Keras' own fit, evaluate and train_on_batch in float64, on 1 and 2 devices (an uneven last
batch: padded shards on the Theano family's mesh), through the composed step (micro-batches) too."""

from __future__ import annotations

import numpy as np
import pytest

import toolkit

RNG = np.random.default_rng(2028)
#: Ten examples in batches of four: the last batch (two) is smaller, and split over 2 devices, uneven shards.
X, LABELS = RNG.normal(size=(10, 3)), RNG.integers(0, 3, size=10)
#: Weights of every kind Keras takes: zero, fractional, larger than 1, negative.
WEIGHTS = np.array([1.0, 0.0, 2.5, 0.5, -0.25, 3.0, 1.0, 0.75, 2.0, 0.125])
VALIDATION = (RNG.normal(size=(5, 3)), RNG.integers(0, 3, size=5), np.array([0.5, 2.0, 0.0, 1.0, 1.5]))
#: A class the dict does not name (2) weighs 1.0, as in Keras.
CLASS_WEIGHT = {0: 2.0, 1: 0.25}
BATCH, EPOCHS = 4, 2
#: Keras rounds learning rates, betas and epsilon to float32: these are the same numbers in float64.
LR, BETA2, EPS = 2.0 ** -4, 1 - 2.0 ** -10, 2.0 ** -20
TOLERANCE = 1e-10
CROSSENTROPY = "sparse_categorical_crossentropy"


def _model(keras, optimizer: str, regularized: bool = False):
    """A small softmax classifier, compiled with a weighted and an unweighted metric of one name."""
    keras.utils.set_random_seed(3)
    regularizer = keras.regularizers.L2(2.0 ** -3) if regularized else None
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="tanh",
                                                                    kernel_regularizer=regularizer),
                              keras.layers.Dense(3, activation="softmax")])
    keras_optimizer = (keras.optimizers.SGD(LR) if optimizer == "sgd"
                       else keras.optimizers.Adam(LR, beta_1=0.875, beta_2=BETA2, epsilon=EPS))
    model.compile(optimizer=keras_optimizer, loss=CROSSENTROPY, metrics=[CROSSENTROPY],
                  weighted_metrics=[CROSSENTROPY, "sparse_categorical_accuracy"])
    return model


def _optimizer(name: str):
    return toolkit.optim.SGD(LR) if name == "sgd" else toolkit.optim.Adam(LR, beta1=0.875, beta2=BETA2, eps=EPS)


def _weights_diff(model, trainer) -> float:
    keras_weights = {"/".join(w.path.split("/")[-2:]): np.asarray(w.numpy()) for w in model.weights}
    return max(float(np.max(np.abs(trainer.params()[k] - v))) for k, v in keras_weights.items())


# Each fit compiles a few graphs on the Theano family: one device count each covers one shard (the host step) and
# uneven, padded shards (the mesh)
@pytest.mark.parametrize(("optimizer", "weighing", "n_devices"),
                         [("sgd", "sample_weight", 2), ("adam", "class_weight", 1)],
                         ids=["sgd-sample_weight-2dev", "adam-class_weight-1dev"])
def test_keras_fit_with_weights(keras, backend, n_devices, optimizer, weighing):
    model = _model(keras, optimizer)
    trainer = toolkit.DataParallel(toolkit.from_keras(model), backend, n_devices, _optimizer(optimizer),
                                   dtype="float64")
    weights = {"sample_weight": WEIGHTS} if weighing == "sample_weight" else {"class_weight": CLASS_WEIGHT}
    history = trainer.fit(X, LABELS, epochs=EPOCHS, batch_size=BATCH, shuffle=False, validation_data=VALIDATION,
                          verbose=0, **weights)
    expected = model.fit(X, LABELS, epochs=EPOCHS, batch_size=BATCH, shuffle=False, validation_data=VALIDATION,
                         verbose=0, **weights).history
    assert sorted(history.history) == sorted(expected)  # Keras' names: weighted_<name> beside <name>
    for name, values in expected.items():
        assert np.max(np.abs(np.subtract(history.history[name], values))) <= TOLERANCE, name
    assert _weights_diff(model, trainer) <= TOLERANCE


def test_keras_evaluate_with_sample_weight(keras, backend):
    model = _model(keras, "sgd")
    trainer = toolkit.DataParallel(toolkit.from_keras(model), backend, 2, _optimizer("sgd"), dtype="float64")
    found = trainer.evaluate(X, LABELS, batch_size=BATCH, sample_weight=WEIGHTS)
    expected = model.evaluate(X, LABELS, batch_size=BATCH, sample_weight=WEIGHTS, verbose=0, return_dict=True)
    assert sorted(found) == sorted(expected)
    for name, value in expected.items():
        assert abs(found[name] - value) <= TOLERANCE, name


def test_keras_regularized_step_adds_the_penalty_after_the_weighting(keras, backend):
    """Two weighted steps of a regularized model, the second composed over micro-batches, as Keras'
    train_on_batch: the penalty is added once, not weighed with the examples."""
    model = _model(keras, "sgd", regularized=True)
    trainer = toolkit.DataParallel(toolkit.from_keras(model), backend, 2, _optimizer("sgd"), dtype="float64")
    for micro_batches in (1, 2):
        loss = trainer.step(X, LABELS, micro_batches=micro_batches, sample_weight=WEIGHTS)
        expected = model.train_on_batch(X, LABELS, sample_weight=WEIGHTS, return_dict=True)["loss"]
        assert abs(loss - expected) <= TOLERANCE
    assert _weights_diff(model, trainer) <= TOLERANCE


def test_bad_weights_are_refused_before_any_step(backend):
    model = toolkit.models.mlp([3, 4, 3])
    trainer = toolkit.DataParallel(model, backend, 2, toolkit.optim.SGD(0.1), dtype="float64")
    before = trainer.params()
    refused = [
        (toolkit.ShapeError, "one weight per example", {"sample_weight": WEIGHTS[:9]}),
        (toolkit.ShapeError, "one weight per example", {"sample_weight": np.ones((10, 2))}),
        (toolkit.NonFiniteError, "example 3", {"sample_weight": np.where(np.arange(10) == 3, np.nan, 1.0)}),
        (toolkit.DTypeError, "numbers", {"sample_weight": np.array(["a"] * 10)}),
        (toolkit.ArgumentError, "not both", {"sample_weight": WEIGHTS, "class_weight": CLASS_WEIGHT}),
        (toolkit.ArgumentError, "integer class indices", {"class_weight": {"0": 1.0}}),
        (toolkit.ArgumentError, "finite number", {"class_weight": {0: np.inf}}),
        (toolkit.ArgumentError, r"dict \{class index", {"class_weight": [1.0, 2.0, 3.0]}),
    ]
    for error, words, weights in refused:
        with pytest.raises(error, match=words):
            trainer.fit(X, LABELS, epochs=1, batch_size=BATCH, verbose=0, **weights)
    with pytest.raises(toolkit.ShapeError, match="validation_data's sample_weight"):
        trainer.fit(X, LABELS, verbose=0, validation_data=(*VALIDATION[:2], np.ones(4)))
    with pytest.raises(toolkit.ShapeError, match="one weight per example"):
        trainer.evaluate(X, LABELS, sample_weight=WEIGHTS[:3])
    assert trainer.step_count == 0
    for name, value in trainer.params().items():
        np.testing.assert_array_equal(value, before[name])
