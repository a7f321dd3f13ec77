"""Keras' loss and metric functions written with :class:`toolkit.ops.Ops`, one for each function in
``keras/src/losses/losses.py`` and ``keras/src/metrics/accuracy_metrics.py`` that :mod:`toolkit.keras.losses`
translates, with Keras' name, arguments and formula: ``fn(ops, y, p, rules, **arguments)`` gives what Keras'
function gives for targets ``y`` and outputs ``p``, with the batch axis kept (see :func:`_mean`).
:data:`FUNCTIONS` lists them by Keras' ``(module, name)`` with a check for each argument they apply.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from toolkit.errors import ShapeError
from toolkit.ops.losses import log_probabilities, sparse_crossentropy

#: log(2) as Keras' ``log_cosh`` has it: ``ops.log(2.0)`` of a Python float computes in float32, then is cast.
LOG_2 = float(np.float32(math.log(2.0)))

LOSSES = "keras.src.losses.losses"
_ACCURACY = "keras.src.metrics.accuracy_metrics"
_REGRESSION = "keras.src.metrics.regression_metrics"


@dataclass(frozen=True)
class Rules:
    """What a translation reads from Keras when it is made, and where it runs."""

    epsilon: float  # keras.config.epsilon()
    tensorflow: bool  # Keras on TensorFlow: sparse crossentropy clips before it normalizes
    metric: bool  # a metric (MeanMetricWrapper: no rank rule of its own; each batch's values keep the batch axis)
    name: str


# --- shapes: Keras' rank rule and the refusals -------------------------------------------------------------------
def same_rank(ops, y, p):
    """Keras' ``squeeze_or_expand_to_same_rank(y, p)``: where the ranks differ by one and the longer one ends in an
    axis of size 1, that axis is squeezed, or the shorter one expanded where it has rank 1."""
    ry, rp = ops.ndim(y), ops.ndim(p)
    if ry == rp + 1 and ops.shape(y)[-1] == 1:
        y, p = (y, ops.expand_dims(p, -1)) if rp == 1 else (ops.squeeze(y, -1), p)
    if rp == ry + 1 and ops.shape(p)[-1] == 1:
        y, p = (ops.expand_dims(y, -1), p) if ry == 1 else (y, ops.squeeze(p, -1))
    return y, p


def _shapes(ops, y, p) -> str:
    return f"targets of shape {tuple(ops.shape(y))} against outputs of shape {tuple(ops.shape(p))}"


def _check_ranks(ops, y, p, rules: Rules) -> None:
    """Elementwise Keras functions broadcast targets against outputs; with unequal ranks that pairs one example's
    targets with another's outputs."""
    if ops.ndim(y) != ops.ndim(p):
        raise ShapeError(f"{rules.name}: {_shapes(ops, y, p)}, which Keras broadcasts across examples: pass targets "
                         f"of the outputs' shape {tuple(ops.shape(p))}")


def _check_shapes(ops, y, p, rules: Rules) -> None:
    """Keras' crossentropy ops require one shape (a ValueError in Keras)."""
    if ops.ndim(y) != ops.ndim(p) or any(a is not None and b is not None and a != b
                                         for a, b in zip(ops.shape(y), ops.shape(p))):
        raise ShapeError(f"{rules.name}: {_shapes(ops, y, p)}; Keras needs one shape: pass targets of the "
                         f"outputs' shape {tuple(ops.shape(p))}")


def _not_batch_axis(ops, x, axis: int, rules: Rules) -> int:
    """``axis`` of ``x``, refused where it is the batch axis (a reduction there mixes examples)."""
    if axis % max(ops.ndim(x), 1) == 0:
        raise ShapeError(f"{rules.name}: axis={axis} of an array of shape {tuple(ops.shape(x))} is the batch axis; "
                         "the toolkit computes each example's loss on its own: pass outputs with an axis after the "
                         "batch axis, for example of shape (N, 1)")
    return axis


def _mean(ops, values, axis: int, rules: Rules):
    """Keras' ``mean(values, axis)`` as per-example values: the values themselves, since the mean of every example's
    mean over equal-size groups is the mean of all. A metric keeps Keras' batch axis (Keras' ``Mean`` counts a batch
    reduced to one value as one example)."""
    if rules.metric:
        _not_batch_axis(ops, values, axis, rules)
    return values


def _floats(ops, y):
    return ops.cast(y, ops.dtype)


# --- Keras' loss functions (keras/src/losses/losses.py), targets y and outputs p -----------------------------------
def mean_squared_error(ops, y, p, rules):
    y, p = same_rank(ops, _floats(ops, y), p)
    _check_ranks(ops, y, p, rules)
    return _mean(ops, ops.square(y - p), -1, rules)


def mean_absolute_error(ops, y, p, rules):
    y, p = same_rank(ops, _floats(ops, y), p)
    _check_ranks(ops, y, p, rules)
    return _mean(ops, ops.abs(y - p), -1, rules)


def mean_absolute_percentage_error(ops, y, p, rules):
    y, p = same_rank(ops, _floats(ops, y), p)
    _check_ranks(ops, y, p, rules)
    return _mean(ops, 100.0 * ops.abs((y - p) / ops.maximum(ops.abs(y), rules.epsilon)), -1, rules)


def mean_squared_logarithmic_error(ops, y, p, rules):
    y, p = same_rank(ops, _floats(ops, y), p)
    _check_ranks(ops, y, p, rules)
    first, second = ops.log(ops.maximum(p, rules.epsilon) + 1.0), ops.log(ops.maximum(y, rules.epsilon) + 1.0)
    return _mean(ops, ops.square(first - second), -1, rules)


def _cosine(ops, y, p, rules, axis: int):
    y, p = same_rank(ops, _floats(ops, y), p)
    _check_ranks(ops, y, p, rules)
    axis = _not_batch_axis(ops, p, axis, rules)
    return ops.sum(ops.normalize(y, axis=axis, epsilon=rules.epsilon)
                   * ops.normalize(p, axis=axis, epsilon=rules.epsilon), axis=axis)


def cosine_similarity(ops, y, p, rules, axis=-1):
    """The loss: minus the cosine similarity."""
    return -_cosine(ops, y, p, rules, axis)


def cosine_similarity_metric(ops, y, p, rules, axis=-1):
    """The metric (``keras.metrics.CosineSimilarity``): the cosine similarity."""
    return _cosine(ops, y, p, rules, axis)


def huber(ops, y, p, rules, delta=1.0):
    y, p = same_rank(ops, _floats(ops, y), p)
    _check_ranks(ops, y, p, rules)
    error = p - y
    magnitude = ops.abs(error)
    values = ops.where(magnitude <= delta, 0.5 * ops.square(error), delta * magnitude - 0.5 * delta * delta)
    return _mean(ops, values, -1, rules)


def log_cosh(ops, y, p, rules):
    y, p = same_rank(ops, _floats(ops, y), p)
    _check_ranks(ops, y, p, rules)
    x = p - y
    return _mean(ops, x + ops.softplus(x * -2.0) - LOG_2, -1, rules)


def _hinge_labels(ops, y):
    """Keras' ``convert_binary_labels_to_hinge``: labels all in {0, 1} become -1 and 1, others stay."""
    binary = ops.all(ops.logical_or(ops.equal(y, 0.0), ops.equal(y, 1.0)))
    return ops.where(binary, 2.0 * y - 1.0, y)


def hinge(ops, y, p, rules):
    y = _hinge_labels(ops, _floats(ops, y))
    _check_ranks(ops, y, p, rules)
    return _mean(ops, ops.maximum(1.0 - y * p, 0.0), -1, rules)


def squared_hinge(ops, y, p, rules):
    y = _hinge_labels(ops, _floats(ops, y))
    _check_ranks(ops, y, p, rules)
    return _mean(ops, ops.square(ops.maximum(1.0 - y * p, 0.0)), -1, rules)


def categorical_hinge(ops, y, p, rules):
    y = _floats(ops, y)
    _check_ranks(ops, y, p, rules)
    _not_batch_axis(ops, p, -1, rules)
    positive = ops.sum(y * p, axis=-1)
    negative = ops.max((1.0 - y) * p, axis=-1)
    return ops.maximum(negative - positive + 1.0, 0.0)


def kl_divergence(ops, y, p, rules):
    y = ops.clip(_floats(ops, y), rules.epsilon, 1.0)
    _check_ranks(ops, y, p, rules)
    _not_batch_axis(ops, p, -1, rules)
    p = ops.clip(p, rules.epsilon, 1.0)
    return ops.sum(y * ops.log(y / p), axis=-1)


def poisson(ops, y, p, rules):
    y = _floats(ops, y)
    _check_ranks(ops, y, p, rules)
    return _mean(ops, p - y * ops.log(p + rules.epsilon), -1, rules)


def binary_crossentropy(ops, y, p, rules, from_logits=False, label_smoothing=0.0, axis=-1):
    y = _floats(ops, y)
    if label_smoothing:
        y = y * (1.0 - label_smoothing) + 0.5 * label_smoothing
    _check_shapes(ops, y, p, rules)
    if from_logits:  # TensorFlow's sigmoid_cross_entropy_with_logits
        values = ops.maximum(p, 0.0) - p * y + ops.log1p(ops.exp(-ops.abs(p)))
    else:
        p = ops.clip(p, rules.epsilon, 1.0 - rules.epsilon)
        values = -(y * ops.log(p) + (1.0 - y) * ops.log(1.0 - p))
    return _mean(ops, values, axis, rules)


def categorical_crossentropy(ops, y, p, rules, from_logits=False, label_smoothing=0.0, axis=-1):
    y = _floats(ops, y)
    _check_shapes(ops, y, p, rules)
    axis = _not_batch_axis(ops, p, axis, rules)
    if label_smoothing:  # over the last axis' classes, whatever ``axis`` is (as Keras)
        y = y * (1.0 - label_smoothing) + label_smoothing / ops.shape(y)[-1]
    return -ops.sum(y * log_probabilities(ops, p, from_logits, axis, rules.epsilon), axis=axis)


def sparse_categorical_crossentropy(ops, y, p, rules, from_logits=False, axis=-1):
    if ops.ndim(y) == ops.ndim(p) and ops.shape(y)[-1] == 1:
        y = ops.squeeze(y, -1)
    shape = tuple(ops.shape(p))
    if ops.ndim(p) < 2 or ops.ndim(y) != len(shape) - 1:
        raise ShapeError(f"{rules.name}: {_shapes(ops, y, p)}: pass one class index per output row, shape "
                         f"{shape[:-1]} (or {shape[:-1] + (1,)})")
    if rules.tensorflow and not from_logits:  # clip, log, then TensorFlow's sparse softmax crossentropy normalizes
        log_p = ops.log_softmax(ops.log(ops.clip(p, rules.epsilon, 1.0 - rules.epsilon)), axis=-1)
    else:
        log_p = log_probabilities(ops, p, from_logits, -1, rules.epsilon)
    return sparse_crossentropy(ops, ops.cast(y, "int32"), log_p, shape[-1])


# --- Keras' accuracy functions (keras/src/metrics/accuracy_metrics.py) ----------------------------------------------
def _classes(ops, p, rules: Rules) -> None:
    if ops.ndim(p) < 2:
        raise ShapeError(f"{rules.name}: outputs of shape {tuple(ops.shape(p))} have no class axis after the batch "
                         "axis: pass outputs of shape (N, classes)")


def accuracy(ops, y, p, rules):
    y, p = same_rank(ops, _floats(ops, y), p)
    _check_ranks(ops, y, p, rules)
    return _floats(ops, ops.equal(y, p))


def binary_accuracy(ops, y, p, rules, threshold=0.5):
    y, p = same_rank(ops, y, p)
    _check_ranks(ops, y, p, rules)
    return _floats(ops, ops.equal(y, ops.cast(p > threshold, ops.dtype_of(y))))


def categorical_accuracy(ops, y, p, rules):
    _classes(ops, p, rules)
    labels = ops.argmax(y, axis=-1)
    if ops.ndim(labels) == ops.ndim(p):
        labels = ops.squeeze(labels, -1)
    _check_ranks(ops, ops.expand_dims(labels, -1), p, rules)
    return _floats(ops, ops.equal(labels, ops.argmax(p, axis=-1)))


def sparse_categorical_accuracy(ops, y, p, rules):
    _classes(ops, p, rules)
    if ops.ndim(y) == ops.ndim(p) and ops.shape(y)[-1] == 1:
        y = ops.squeeze(y, -1)
    _check_ranks(ops, ops.expand_dims(y, -1), p, rules)
    return _floats(ops, ops.equal(_floats(ops, y), _floats(ops, ops.argmax(p, axis=-1))))


def _in_top_k(ops, labels, p, k: int):
    """TensorFlow's ``in_top_k``: fewer than ``k`` classes score strictly above the label's (ties count in)."""
    target = ops.take_along_axis(p, ops.expand_dims(ops.cast(labels, "int32"), -1), axis=-1)
    return _floats(ops, ops.sum(ops.cast(p > target, "int32"), axis=-1) < k)


def top_k_categorical_accuracy(ops, y, p, rules, k=5):
    _classes(ops, p, rules)
    _check_ranks(ops, y, p, rules)
    return _in_top_k(ops, ops.argmax(y, axis=-1), p, k)


def sparse_top_k_categorical_accuracy(ops, y, p, rules, k=5):
    _classes(ops, p, rules)
    if ops.ndim(y) == ops.ndim(p) and ops.shape(y)[-1] == 1:
        y = ops.squeeze(y, -1)
    _check_ranks(ops, ops.expand_dims(y, -1), p, rules)
    return _in_top_k(ops, y, p, k)


def kind_by_shapes(ops, y, p) -> str:
    """Keras' ``is_binary_or_sparse_categorical``, as ``compile`` resolves ``"accuracy"`` and ``"crossentropy"``:
    ``"binary"`` where outputs end in an axis of size 1, ``"sparse_categorical"`` where targets have a lower rank or
    end in 1 against several classes, else ``"categorical"``."""
    if ops.ndim(p) < 2:
        raise ShapeError(f"outputs of shape {tuple(ops.shape(p))}: Keras picks the kind of crossentropy or accuracy "
                         "from the last axis after the batch axis; pass outputs of shape (N, 1) or (N, classes)")
    if ops.shape(p)[-1] == 1:
        return "binary"
    if ops.ndim(y) < ops.ndim(p) or ops.shape(y)[-1] == 1:
        return "sparse_categorical"
    return "categorical"


def compiled_accuracy(ops, y, p, rules):
    """``compile(metrics=["accuracy"])``: binary, sparse categorical or categorical accuracy by the shapes."""
    return {"binary": binary_accuracy, "sparse_categorical": sparse_categorical_accuracy,
            "categorical": categorical_accuracy}[kind_by_shapes(ops, y, p)](ops, y, p, rules)


# --- the table: each Keras function, the arguments the translation applies, and how each is checked --------------
def _flag(value):
    if not isinstance(value, bool):
        raise ValueError("expected True or False")
    return value


def _number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("expected a number")
    return float(value)


def _integer(value):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("expected an int")
    return value


def _positive(value):
    if _integer(value) < 1:
        raise ValueError("expected an int >= 1")
    return value


def _fraction(value):
    if not 0.0 <= _number(value) <= 1.0:
        raise ValueError("expected a number in [0, 1]")
    return float(value)


#: What a check gives for an argument that is accepted at its default only: nothing to pass on.
DEFAULT = object()


def _only(default):
    def check(value):
        if value != default:
            raise ValueError(f"only Keras' default {default!r} is supported")
        return DEFAULT
    return check


@dataclass(frozen=True)
class Entry:
    """A translated Keras function and a check for each argument it applies."""

    fn: Callable
    checks: dict  # argument -> check(value) -> the value used (or ValueError)
    shape_resolved: bool = False


_CROSSENTROPY = {"from_logits": _flag, "label_smoothing": _fraction, "axis": _integer}
#: Keras' loss and metric functions the toolkit translates, by ``(module, name)`` (the same function is reached
#: through ``keras.losses`` and ``keras.metrics``), with the arguments each applies.
FUNCTIONS: dict[tuple[str, str], Entry] = {
    (LOSSES, "mean_squared_error"): Entry(mean_squared_error, {}),
    (LOSSES, "mean_absolute_error"): Entry(mean_absolute_error, {}),
    (LOSSES, "mean_absolute_percentage_error"): Entry(mean_absolute_percentage_error, {}),
    (LOSSES, "mean_squared_logarithmic_error"): Entry(mean_squared_logarithmic_error, {}),
    (LOSSES, "cosine_similarity"): Entry(cosine_similarity, {"axis": _integer}),
    (LOSSES, "huber"): Entry(huber, {"delta": _number}),
    (LOSSES, "log_cosh"): Entry(log_cosh, {}),
    (LOSSES, "hinge"): Entry(hinge, {}),
    (LOSSES, "squared_hinge"): Entry(squared_hinge, {}),
    (LOSSES, "categorical_hinge"): Entry(categorical_hinge, {}),
    (LOSSES, "kl_divergence"): Entry(kl_divergence, {}),
    (LOSSES, "poisson"): Entry(poisson, {}),
    (LOSSES, "binary_crossentropy"): Entry(binary_crossentropy, _CROSSENTROPY),
    (LOSSES, "categorical_crossentropy"): Entry(categorical_crossentropy, _CROSSENTROPY),
    (LOSSES, "sparse_categorical_crossentropy"): Entry(
        sparse_categorical_crossentropy, {"from_logits": _flag, "ignore_class": _only(None), "axis": _only(-1)}),
    (_REGRESSION, "cosine_similarity"): Entry(cosine_similarity_metric, {"axis": _integer}),
    (_ACCURACY, "accuracy"): Entry(accuracy, {}),
    (_ACCURACY, "binary_accuracy"): Entry(binary_accuracy, {"threshold": _number}),
    (_ACCURACY, "categorical_accuracy"): Entry(categorical_accuracy, {}),
    (_ACCURACY, "sparse_categorical_accuracy"): Entry(sparse_categorical_accuracy, {}),
    (_ACCURACY, "top_k_categorical_accuracy"): Entry(top_k_categorical_accuracy, {"k": _positive}),
    (_ACCURACY, "sparse_top_k_categorical_accuracy"): Entry(
        sparse_top_k_categorical_accuracy, {"k": _positive, "from_sorted_ids": _only(False)}),
}


__all__ = ["DEFAULT", "FUNCTIONS", "LOG_2", "LOSSES", "Entry", "Rules", "compiled_accuracy", "kind_by_shapes",
           "same_rank"]
