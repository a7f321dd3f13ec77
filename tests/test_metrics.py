"""Metrics and ``evaluate``: each metric against Keras' on both backends, and evaluation as a sum and a count over
every example, equal to NumPy's evaluation of the same parameters on any device count, split and batch size."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import toolkit
from toolkit.tolerances import FLOAT64_ATOL

RNG = np.random.default_rng(3)
LOGITS = RNG.normal(size=(9, 4))
LOGITS[2] = [1.0, 1.0, 0.5, 1.0]  # ties with the label's score (label 1): in the top 1 as Keras counts them
LABELS = np.array([0, 1, 1, 3, 2, 0, 3, 1, 2], np.int32)
TARGETS = RNG.normal(size=(9, 4))
X, Y = RNG.normal(size=(23, 5)), RNG.integers(0, 3, size=23)
MODEL = toolkit.models.mlp([5, 7, 3])


def _keras_values(keras, name):
    m = keras.metrics
    return {
        "sparse_categorical_accuracy": lambda: m.sparse_categorical_accuracy(LABELS, LOGITS),
        "accuracy": lambda: m.sparse_categorical_accuracy(LABELS, LOGITS),
        "sparse_top_k_categorical_accuracy": lambda: m.sparse_top_k_categorical_accuracy(  # in_top_k: float32 only
            LABELS, LOGITS.astype(np.float32), k=2),
        "sparse_categorical_crossentropy": lambda: m.sparse_categorical_crossentropy(LABELS, LOGITS, from_logits=True),
        "mean_squared_error": lambda: m.mean_squared_error(TARGETS, LOGITS),
        "mean_absolute_error": lambda: m.mean_absolute_error(TARGETS, LOGITS),
    }[name]()


METRICS = {
    "sparse_categorical_accuracy": "sparse_categorical_accuracy",
    "accuracy": "accuracy",
    "sparse_top_k_categorical_accuracy": toolkit.metrics.sparse_top_k_categorical_accuracy(2),
    "sparse_categorical_crossentropy": toolkit.metrics.sparse_categorical_crossentropy(from_logits=True),
    "mean_squared_error": "mse",
    "mean_absolute_error": "mae",
}


@pytest.mark.skipif(importlib.util.find_spec("keras") is None,
                    reason='needs keras (pip install "multigpu-toolkit[tensorflow]")')
@pytest.mark.parametrize("name", list(METRICS))
def test_metric_values_equal_keras(backend, name):
    toolkit.get_backend("tensorflow")  # its logical devices, before Keras starts TensorFlow
    import keras

    (metric,) = toolkit.metrics.get([METRICS[name]])
    y = TARGETS if "error" in name else LABELS
    values = backend.call(lambda ops, outputs, y: metric(ops, outputs, y), backend.list_devices()[0],
                          {"outputs": LOGITS, "y": y}, "float64")
    np.testing.assert_allclose(backend.to_numpy(values), np.asarray(_keras_values(keras, name)), rtol=1e-6, atol=1e-7)


def _numpy_evaluation(params, x, y):
    h = np.maximum(x @ params["w0"] + params["b0"], 0) @ params["w1"] + params["b1"]
    log_p = h - h.max(1, keepdims=True) - np.log(np.exp(h - h.max(1, keepdims=True)).sum(1, keepdims=True))
    return {"loss": -log_p[np.arange(len(y)), y].mean(), "accuracy": (h.argmax(1) == y).mean(),
            "sparse_top_k_categorical_accuracy": ((h > h[np.arange(len(y)), y][:, None]).sum(1) < 2).mean()}


@pytest.mark.parametrize("weights, batch_size", [(None, None), (None, 5), ([1, 3, 1, 2], 10)])
def test_evaluate_is_the_mean_over_every_example(backend, n_devices, weights, batch_size):
    trainer = toolkit.DataParallel(MODEL, backend, n_devices, toolkit.optim.SGD(0.1), dtype="float64", seed=4,
                                   weights=None if weights is None else weights[:n_devices])
    trainer.step(X, Y)
    params = trainer.params()
    found = trainer.evaluate(X, Y, batch_size=batch_size,
                             metrics=["accuracy", toolkit.metrics.sparse_top_k_categorical_accuracy(2)])
    expected = _numpy_evaluation(params, X, Y)
    assert set(found) == set(expected)
    for name, value in expected.items():
        assert abs(found[name] - value) <= FLOAT64_ATOL, name
    assert trainer.step_count == 1 and max(np.max(np.abs(trainer.params()[k] - params[k])) for k in params) == 0.0


def test_evaluate_refuses_bad_metrics_and_batch_sizes(backend):
    trainer = toolkit.DataParallel(MODEL, backend, 2, toolkit.optim.SGD(0.1), dtype="float64")
    with pytest.raises(ValueError, match="unknown metric 'accuracy_top5'; known: accuracy"):
        trainer.evaluate(X, Y, metrics=["accuracy_top5"])
    with pytest.raises(ValueError, match="must be unique and not 'loss'"):
        trainer.evaluate(X, Y, metrics=["mse", "mse"])
    with pytest.raises(toolkit.ShapeError, match="batch_size must be an int >= 1 or None"):
        trainer.evaluate(X, Y, batch_size=0)
    with pytest.raises(ValueError, match="k must be an int >= 1"):
        toolkit.metrics.sparse_top_k_categorical_accuracy(0)
    with pytest.raises(toolkit.ComputeError, match=r"mean_squared_error needs outputs and targets of one shape, "
                                                   r"got \(12, 3\) and \(12,\)") as error:
        trainer.evaluate(X, Y, metrics=["mse"])  # class scores against labels
    assert isinstance(error.value.__cause__, toolkit.ShapeError)
