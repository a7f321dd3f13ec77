"""Metrics, written once against :class:`toolkit.ops.Ops` with Keras' names and formulas.

A metric gives one value per example (a model with several outputs per example, such as a language model's
positions, averages them within the example). ``trainer.evaluate`` sums those values and counts the examples on
every device, batch and process, in float64, and divides once at the end: the result is the mean over all examples
whatever the split, never a mean of per-device means.

The metrics named after Keras' functions compute those functions as Keras writes them
(:mod:`toolkit.nn.losses`, which ``from_keras`` translates compiled metrics to), so that a name gives
what ``compile(metrics=[name])`` gives in Keras.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from toolkit.errors import ArgumentError, ShapeError
from toolkit.nn import losses
from toolkit.ops.interface import Ops, Tensor
from toolkit.ops.nn import EPSILON


@dataclass(frozen=True)
class Metric:
    """A named per-example metric.

    Attributes:
        name: the name it is logged under (``val_`` prefixed on validation data); not ``"loss"``.
        fn: ``fn(ops, outputs, y)``, the values of a batch: ``[batch]``, or ``[batch, ...]`` averaged per example.
        weighted: False: the mean over the examples, whatever their weights (Keras' ``metrics``); True: the mean
            weighed by the examples' weights, ``sum(value * weight) / sum(weight)`` (Keras' ``weighted_metrics``;
            0 where the weights sum to 0). Without weights both are the plain mean.
        as_loss: True: weighed as the loss is, ``sum(value * weight) / N`` (Keras' per-output losses of a model of
            several outputs, logged as ``<output>_loss``).
    """

    name: str
    fn: Callable[[Ops, Tensor, Tensor], Tensor]
    weighted: bool = False
    as_loss: bool = False

    def __call__(self, ops: Ops, outputs: Tensor, y: Tensor) -> Tensor:
        """The metric of each example of a batch.

        Args:
            ops: the :class:`~toolkit.ops.Ops` running the model.
            outputs: the model's outputs for the batch.
            y: the batch's targets.

        Returns:
            ``[batch]`` values: ``fn``'s, averaged over every axis but the first.
        """
        return _per_example(ops, self.fn(ops, outputs, y))


def _per_example(ops: Ops, values: Tensor) -> Tensor:
    """``values`` averaged over every axis but the batch axis."""
    return ops.mean(values, axis=tuple(range(1, values.ndim))) if values.ndim > 1 else values


def _sparse_labels(ops: Ops, outputs: Tensor, y: Tensor, name: str) -> Tensor:
    if outputs.ndim != y.ndim + 1:
        raise ShapeError(f"{name} needs outputs with a class axis after the labels' axes: outputs {outputs.shape}, "
                         f"labels {y.shape}")
    return ops.cast(y, "int32")


def _keras(name: str, fn: Callable, **arguments) -> Metric:
    """The metric computing Keras' function ``fn`` (:mod:`toolkit.nn.losses`) as Keras'
    ``MeanMetricWrapper`` averages it, with Keras' default epsilon."""
    rules = losses.Rules(EPSILON, tensorflow=False, metric=True, name=name)

    def values(ops, outputs, y):
        return fn(ops, y, outputs, rules, **arguments)

    return Metric(name, values)


def sparse_top_k_categorical_accuracy(k: int = 5) -> Metric:
    """1 where the label's score is among the ``k`` largest (Keras' ``in_top_k``: classes tied with the label's
    score do not push it out), else 0.

    Args:
        k: how many of the largest scores count, an int >= 1.

    Returns:
        The :class:`Metric` named ``"sparse_top_k_categorical_accuracy"``; it takes ``[batch, ..., classes]``
        scores and integer labels, and raises :class:`~toolkit.ShapeError` when the scores have no class axis
        after the labels' axes.

    Raises:
        ArgumentError: ``k`` not an int >= 1.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ArgumentError(f"sparse_top_k_categorical_accuracy k must be an int >= 1, got {k!r}")

    def fn(ops, outputs, y):
        labels = _sparse_labels(ops, outputs, y, "sparse_top_k_categorical_accuracy")
        target = ops.take_along_axis(outputs, ops.expand_dims(labels, -1), axis=-1)
        above = ops.sum(ops.cast(outputs > target, "int32"), axis=-1)
        return ops.cast(above < k, ops.dtype)

    return Metric("sparse_top_k_categorical_accuracy", fn)


def sparse_categorical_crossentropy(from_logits: bool = False) -> Metric:
    """``-log p[label]`` of integer labels. Probabilities are clipped to ``[1e-7, 1 - 1e-7]`` as Keras does.

    Args:
        from_logits: the outputs are logits (as the built-in models' are), not probabilities.

    Returns:
        The :class:`Metric` named ``"sparse_categorical_crossentropy"``; it takes ``[batch, ..., classes]``
        outputs and integer labels, and raises :class:`~toolkit.ShapeError` when the outputs have no class axis
        after the labels' axes.
    """

    def fn(ops, outputs, y):
        labels = _sparse_labels(ops, outputs, y, "sparse_categorical_crossentropy")
        if from_logits:
            log_p = ops.log_softmax(outputs, axis=-1)
        else:
            log_p = ops.log(ops.clip(outputs / ops.sum(outputs, axis=-1, keepdims=True), 1e-7, 1 - 1e-7))
        return -ops.squeeze(ops.take_along_axis(log_p, ops.expand_dims(labels, -1), axis=-1), axis=-1)

    return Metric("sparse_categorical_crossentropy", fn)


def _same_shape(outputs: Tensor, y: Tensor, name: str) -> None:
    if len(outputs.shape) != len(y.shape) or any(a is not None and b is not None and a != b
                                                 for a, b in zip(outputs.shape, y.shape)):
        raise ShapeError(f"{name} needs outputs and targets of one shape, got {outputs.shape} and {y.shape}")


def _mean_squared_error(ops, outputs, y):
    _same_shape(outputs, y, "mean_squared_error")
    return ops.mean(ops.square(outputs - y), axis=-1)


def _mean_absolute_error(ops, outputs, y):
    _same_shape(outputs, y, "mean_absolute_error")
    return ops.mean(ops.abs(outputs - y), axis=-1)


#: Keras' metric functions a name selects as it is (``compile(metrics=[name])`` gives the same).
_KERAS_NAMED = {
    "binary_accuracy": losses.binary_accuracy,
    "categorical_accuracy": losses.categorical_accuracy,
    "sparse_categorical_accuracy": losses.sparse_categorical_accuracy,
    "top_k_categorical_accuracy": losses.top_k_categorical_accuracy,
    "binary_crossentropy": losses.binary_crossentropy,
    "categorical_crossentropy": losses.categorical_crossentropy,
    "kl_divergence": losses.kl_divergence,
    "poisson": losses.poisson,
    "hinge": losses.hinge,
    "squared_hinge": losses.squared_hinge,
    "categorical_hinge": losses.categorical_hinge,
    "mean_absolute_percentage_error": losses.mean_absolute_percentage_error,
    "mape": losses.mean_absolute_percentage_error,
    "mean_squared_logarithmic_error": losses.mean_squared_logarithmic_error,
    "msle": losses.mean_squared_logarithmic_error,
    "log_cosh_error": losses.log_cosh,
    "cosine_similarity": losses.cosine_similarity_metric,
}

#: The metrics a name selects (Keras' names and short forms). ``"accuracy"`` (or ``"acc"``) is binary, sparse
#: categorical or categorical accuracy by the shapes of outputs and targets, as Keras' ``compile`` picks it.
NAMED: dict[str, Callable[[], Metric]] = {
    "accuracy": lambda: _keras("accuracy", losses.compiled_accuracy),
    "acc": lambda: _keras("acc", losses.compiled_accuracy),
    **{name: functools.partial(_keras, name, fn) for name, fn in _KERAS_NAMED.items()},
    "sparse_top_k_categorical_accuracy": sparse_top_k_categorical_accuracy,
    "sparse_categorical_crossentropy": sparse_categorical_crossentropy,
    "mean_squared_error": lambda: Metric("mean_squared_error", _mean_squared_error),
    "mse": lambda: Metric("mse", _mean_squared_error),
    "mean_absolute_error": lambda: Metric("mean_absolute_error", _mean_absolute_error),
    "mae": lambda: Metric("mae", _mean_absolute_error),
}


@functools.cache
def _named(name: str) -> Metric:
    """The metric a name selects, one object per name (so what the backends compile for it is reused)."""
    if name not in NAMED:
        raise ArgumentError(f"unknown metric {name!r}; known: {', '.join(NAMED)} (or a toolkit.metrics.Metric)")
    return NAMED[name]()


def get(metrics: Iterable[str | Metric]) -> tuple[Metric, ...]:
    """Metrics from names (:data:`NAMED`) or :class:`Metric` objects.

    Args:
        metrics: a name, a :class:`Metric`, or an iterable of them.

    Returns:
        A tuple of :class:`Metric`, in the order given (one object per name, so compiled metrics are reused).

    Raises:
        ArgumentError: an unknown name, a name given twice, or something that is neither (nothing is evaluated).
    """
    if isinstance(metrics, (str, Metric)):
        metrics = [metrics]
    found = []
    for metric in metrics:
        if isinstance(metric, str):
            metric = _named(metric)
        elif not isinstance(metric, Metric):
            raise ArgumentError(f"a metric is a name or a toolkit.metrics.Metric, got {type(metric).__name__}")
        found.append(metric)
    names = [m.name for m in found]
    if "loss" in names or len(set(names)) != len(names):
        raise ArgumentError(f"metric names must be unique and not 'loss', got {names}")
    return tuple(found)


__all__ = ["NAMED", "Metric", "get", "sparse_categorical_crossentropy", "sparse_top_k_categorical_accuracy"]
