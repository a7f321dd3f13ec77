"""Compiled metrics of a Keras model of several outputs (issue 28): ``metrics`` and ``weighted_metrics`` per output,
as Keras 3 takes them (a dict by output name, or a list of one entry per output), named ``<output>_<metric>`` as
Keras' ``fit`` logs them and equal to Keras' values, with sample weights and on validation data; what Keras reads
another way is refused."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import toolkit

pytestmark = pytest.mark.skipif(importlib.util.find_spec("keras") is None
                                or importlib.util.find_spec("tensorflow") is None,
                                reason='needs keras on TensorFlow (pip install "multigpu-toolkit[tensorflow]")')

#: Keras rounds its learning rate to float32: a power of two is the same number in float64.
LR = 2.0 ** -4
#: float64 agreement with Keras on TensorFlow: the same formulas, summed in possibly different orders.
TOLERANCE = 1e-10
#: Examples, and examples per step (two steps, split 2 + 2 on two devices).
EXAMPLES, BATCH = 8, 4


def _two_heads(keras, **compile_arguments):
    """A regression head ``score`` and a classifier ``kind`` on one hidden layer."""
    keras.utils.set_random_seed(9)
    x = keras.Input((3,))
    h = keras.layers.Dense(4, activation="tanh")(x)
    model = keras.Model(x, [keras.layers.Dense(2, name="score")(h),
                            keras.layers.Dense(3, activation="softmax", name="kind")(h)])
    model.compile(optimizer=keras.optimizers.SGD(LR), loss={"score": "mse", "kind": "sparse_categorical_crossentropy"},
                  **compile_arguments)
    return model


@pytest.fixture(scope="module")
def reference(keras):
    """The model imported before training, the data and weights, and Keras' own fit history (two steps, validation
    on the training data, weighed)."""
    model = _two_heads(keras, metrics={"score": ["mae", "mse"], "kind": "accuracy"},
                       weighted_metrics=[None, ["accuracy", "sparse_categorical_crossentropy"]])
    rng = np.random.default_rng(28)
    x, y = rng.normal(size=(EXAMPLES, 3)), [rng.normal(size=(EXAMPLES, 2)), rng.integers(0, 3, EXAMPLES)]
    weights = rng.uniform(0.0, 2.0, EXAMPLES)
    imported = toolkit.from_keras(model)
    history = model.fit(x, y, batch_size=BATCH, shuffle=False, verbose=0, sample_weight=weights,
                        validation_data=(x, y, weights)).history
    return imported, x, y, weights, history


@pytest.mark.parametrize("devices", [1, 2], ids=["1dev", "2dev"])
def test_keras_metrics_of_several_outputs_equal_keras(reference, backend, devices):
    imported, x, y, weights, keras_history = reference
    assert [m.name for m in imported.metrics] == [
        "score_loss", "kind_loss", "score_mae", "score_mse", "kind_accuracy", "kind_weighted_accuracy",
        "kind_sparse_categorical_crossentropy"]
    trainer = toolkit.DataParallel(imported, backend, devices, toolkit.optim.SGD(LR), dtype="float64")
    history = trainer.fit(x, y, batch_size=BATCH, shuffle=False, verbose=0, sample_weight=weights,
                          validation_data=(x, y, weights)).history
    assert sorted(history) == sorted(keras_history)
    for name, values in keras_history.items():
        np.testing.assert_allclose(history[name], values, rtol=0, atol=TOLERANCE, err_msg=name)


def test_keras_metrics_keras_reads_another_way_are_refused(keras):
    with pytest.raises(toolkit.KerasImportError, match=r"one entry per output .* as Keras 3 does"):
        toolkit.from_keras(_two_heads(keras, metrics=["mae"]))  # Keras wants one entry per output too
    with pytest.raises(toolkit.KerasImportError, match=r"\['nope'\], which are not outputs"):
        toolkit.from_keras(_two_heads(keras, metrics={"nope": "mae"}))
    with pytest.raises(toolkit.KerasImportError, match="'score' is given nested metrics"):
        toolkit.from_keras(_two_heads(keras, metrics=[[["mae"]], None]))
    with pytest.raises(toolkit.KerasImportError, match="'score_mae' is compiled twice"):
        toolkit.from_keras(_two_heads(keras, metrics=[["mae", "mae"], None]))


def test_per_output_sample_weights_are_refused():
    """Keras takes one weight array per output (a dict or a list of arrays); the toolkit takes one per example,
    and refuses the others naming them, before any step."""
    from toolkit.training.batches import sample_weights

    weights = np.ones(EXAMPLES)
    for given in ({"score": weights, "kind": weights}, [weights, weights]):
        with pytest.raises(toolkit.ShapeError, match="per-output weights are not supported"):
            sample_weights(given, EXAMPLES, "float64")
    assert sample_weights([1.0] * EXAMPLES, EXAMPLES, "float64").shape == (EXAMPLES,)  # a list of one per example


def test_a_list_of_one_output_is_one_output_as_in_keras(keras):
    """``keras.Model(x, [y])``: Keras' call unpacks the list of one, so predict gives one array and fit logs
    ``mae``, not ``<output>_mae``; the import does the same."""
    keras.utils.set_random_seed(3)
    x = keras.Input((3,))
    model = keras.Model(x, [keras.layers.Dense(2, name="score")(x)])
    model.compile(optimizer=keras.optimizers.SGD(LR), loss="mse", metrics=["mae", "mse"])
    rng = np.random.default_rng(5)
    data, target = rng.normal(size=(EXAMPLES, 3)), rng.normal(size=(EXAMPLES, 2))
    imported = toolkit.from_keras(model)
    trainer = toolkit.DataParallel(imported, "tensorflow", 1, toolkit.optim.SGD(LR), dtype="float64")
    assert trainer.predict(data).shape == np.shape(model.predict(data, verbose=0)) == (EXAMPLES, 2)
    keras_history = model.fit(data, target, batch_size=BATCH, shuffle=False, verbose=0).history
    history = trainer.fit(data, target, batch_size=BATCH, shuffle=False, verbose=0).history
    assert sorted(history) == sorted(keras_history) == ["loss", "mae", "mse"]
    for key, values in keras_history.items():
        np.testing.assert_allclose(history[key], values, rtol=TOLERANCE, atol=TOLERANCE)

