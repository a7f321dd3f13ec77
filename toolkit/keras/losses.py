"""Keras' losses and compiled metrics as toolkit functions: what ``model.compile(loss=..., metrics=...)`` names, given
by name (``"binary_crossentropy"``, ``"mse"``, ``"BinaryCrossentropy"``), by function
(``keras.losses.binary_crossentropy``) or by object with its arguments (``keras.losses.Huber(delta=2.0)``,
``keras.metrics.TopKCategoricalAccuracy(k=3)``), computed as Keras computes it. This module reads Keras' objects;
:mod:`toolkit.nn.losses` writes each Keras function with the toolkit's ops.

A loss is ``loss(ops, outputs, y) -> per-example values`` whose mean over the batch is Keras' loss with its default
reduction (``"sum_over_batch_size"``: the mean of every value the loss function returns, so each example's share is
the mean of its own values). A metric is a :class:`toolkit.metrics.Metric` with Keras' name, whose per-example
values are those Keras' ``MeanMetricWrapper`` averages. Keras' rules are kept:

- a loss first brings targets and outputs to one rank (``squeeze_or_expand_to_same_rank``: targets ``(N,)``
  against outputs ``(N, 1)`` are not broadcast to ``(N, N)``), as ``LossFunctionWrapper`` does; a metric does it only
  where Keras' metric function does; shapes that Keras would broadcast across examples, or that it refuses, raise a
  :class:`~toolkit.ShapeError` naming the shapes to pass;
- the crossentropies clip probabilities to ``[epsilon, 1 - epsilon]`` with ``keras.config.epsilon()`` as it is when
  the loss is translated, and sparse crossentropy normalizes and clips in the order of the Keras backend in use
  (TensorFlow clips, then normalizes inside its softmax crossentropy; the others normalize, then clip);
- ``"accuracy"``/``"acc"`` (and the loss ``"crossentropy"``/``"ce"``) become binary, sparse categorical or categorical
  by the shapes of targets and outputs, as ``compile`` picks them;
- a metric whose Keras function averages over the batch axis (``mse`` of outputs of shape ``(N,)``) is refused with
  a ShapeError: Keras' ``Mean`` would count that batch as one example; outputs ``(N, 1)`` give the per-example mean;
- Keras' constants are kept where they round: ``log_cosh`` subtracts log 2 rounded to float32, as Keras does;
- hinge losses map labels in {0, 1} to {-1, 1} when every label is 0 or 1; Keras decides over the batch, the toolkit
  over each device's shard: the same numbers for labels in {0, 1} or in {-1, 1}.

**Nothing silent**: anything else is a :class:`~toolkit.KerasImportError` that names it: another loss or metric (a
custom function, ``AUC``, ``RootMeanSquaredError``: not a mean of per-example values), a subclass, an argument the
translation does not apply (``reduction`` other than Keras' default, ``ignore_class``, ``from_sorted_ids``, an axis
across examples), a loss or metric dtype other than the model's, ``loss_weights`` on a model of one output.

What differs from Keras on TensorFlow by design: behind a final ``softmax``/``sigmoid``, Keras on TensorFlow computes
a crossentropy from the logits the activation received (``_keras_logits``) and does not clip; the toolkit computes
it from the probabilities, as Keras on JAX, NumPy and PyTorch do. The two agree to rounding unless a probability is
within ``epsilon`` of 0 or 1 (a saturated output).

``weighted_metrics`` become weighted metrics (:attr:`toolkit.metrics.Metric.weighted`), named as Keras names them
(``weighted_<name>`` where ``metrics`` already has the name); the trainer's ``fit(sample_weight=, class_weight=)`` and
``evaluate(sample_weight=)`` weigh the loss and them as Keras does.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

from toolkit.errors import KerasImportError
from toolkit.nn.losses import (
    DEFAULT,
    FUNCTIONS,
    LOSSES,
    Entry,
    Rules,
    compiled_accuracy,
    kind_by_shapes,
    same_rank,
)
from toolkit.training.metrics import Metric

#: Loss reductions applied as Keras applies them: both are the mean over every value the loss function returns.
REDUCTIONS = ("sum_over_batch_size", "mean")
#: Names ``compile`` resolves by the shapes of targets and outputs (``compile_utils.get_loss``/``get_metric``).
SHAPE_RESOLVED_LOSSES = ("crossentropy", "ce")
SHAPE_RESOLVED_METRICS = ("accuracy", "acc")


def _entry(fn, what: str) -> tuple[tuple[str, str], Entry]:
    """The table's key and entry for the Keras function ``fn`` (the very function, not one of the same name)."""
    key = (getattr(fn, "__module__", None), getattr(fn, "__name__", None))
    entry = FUNCTIONS.get(key)
    if entry is None or getattr(importlib.import_module(key[0]), key[1], None) is not fn:
        known = sorted({name for _, name in FUNCTIONS})
        raise KerasImportError(f"{what} ({getattr(fn, '__name__', type(fn).__name__)}) is not supported: from_keras "
                               f"translates Keras' own {', '.join(known)} (a function of your own cannot be read)")
    return key, entry


def _describe(obj) -> str:
    if isinstance(obj, str) or not hasattr(obj, "name"):
        return repr(obj) if isinstance(obj, str) else getattr(obj, "__name__", type(obj).__name__)
    return f"{type(obj).__name__}(name={obj.name!r})"


def _arguments(entry: Entry, given: dict, what: str) -> dict:
    """The arguments of a Keras loss or metric object, each checked; one the translation does not apply is refused."""
    arguments = {}
    for key, value in given.items():
        check = entry.checks.get(key)
        if check is None:
            raise KerasImportError(f"{what}: {key}={value!r} is not supported (from_keras applies "
                                   f"{', '.join(entry.checks) or 'no arguments'} here)")
        try:
            arguments[key] = check(value)
        except ValueError as error:
            raise KerasImportError(f"{what}: {key}={value!r} is not supported ({error})") from error
    return {key: value for key, value in arguments.items() if value is not DEFAULT}


def _check_dtype(obj, dtype: str | None, what: str) -> None:
    found = getattr(obj, "dtype", None)
    if dtype is not None and found is not None and str(found) != dtype:
        raise KerasImportError(f"{what} computes in {found} where the model computes in {dtype}; the toolkit computes "
                               f"it in the trainer's dtype (give it dtype={dtype!r}, or call "
                               f"keras.config.set_floatx({dtype!r}) before compile, as Keras' losses and metrics "
                               "take floatx by default)")


def _rules(metric: bool, name: str) -> Rules:
    import keras

    return Rules(float(keras.config.epsilon()), keras.backend.backend() == "tensorflow", metric, name)


def translate_loss(loss: Any, dtype: str | None = None) -> Callable:
    """The toolkit loss ``fn(ops, outputs, y) -> per-example values`` computing the Keras loss ``loss``: a name
    (``keras.losses.get``'s, or ``"crossentropy"``), a Keras loss function, or a Keras loss object
    (``keras.losses.BinaryCrossentropy(from_logits=True)``, ``keras.losses.LossFunctionWrapper`` of a Keras
    function) with its arguments. ``dtype``: the model's compute dtype, which the loss must compute in.

    Raises:
        KerasImportError: a loss, class, argument, reduction or dtype the toolkit does not translate (named).
    """
    import keras

    what = f"loss {_describe(loss)}"
    if isinstance(loss, str) and loss.lower() in SHAPE_RESOLVED_LOSSES:
        losses = {kind: translate_loss(f"{kind}_crossentropy") for kind in ("binary", "sparse_categorical",
                                                                            "categorical")}

        def crossentropy(ops, outputs, y):
            return losses[kind_by_shapes(ops, y, outputs)](ops, outputs, y)

        return crossentropy
    try:
        obj = keras.losses.get(loss)
    except (ValueError, TypeError) as error:
        raise KerasImportError(f"{what} is not a Keras loss ({error})") from error
    wrapper = importlib.import_module(LOSSES).LossFunctionWrapper  # Keras' own losses are these (not exported)
    if isinstance(obj, keras.losses.Loss):
        if not isinstance(obj, wrapper) or (type(obj) is not wrapper
                                            and type(obj) is not getattr(keras.losses, type(obj).__name__, None)):
            raise KerasImportError(f"{what}: {type(obj).__name__} is not supported (a loss class of your own, or "
                                   "one whose call from_keras cannot read)")
        if obj.reduction not in REDUCTIONS:
            raise KerasImportError(f"{what}: reduction={obj.reduction!r} is not supported (from_keras applies "
                                   f"Keras' default, the mean over the batch: {' or '.join(REDUCTIONS)})")
        _check_dtype(obj, dtype, what)
        key, entry = _entry(obj.fn, what)
        arguments = _arguments(entry, dict(obj._fn_kwargs), what)
    elif callable(obj):
        key, entry = _entry(obj, what)
        arguments = {}
    else:
        raise KerasImportError(f"{what} is not a Keras loss")
    module, name = key
    if module != LOSSES:
        raise KerasImportError(f"{what}: {name} is a Keras metric, not a loss")
    rules = _rules(False, name)

    def loss_fn(ops, outputs, y):
        y, outputs = same_rank(ops, y, outputs)  # LossFunctionWrapper.call
        return _per_example(ops, entry.fn(ops, y, outputs, rules, **arguments))

    loss_fn.__name__ = name
    return loss_fn


def translate_metric(metric: Any, dtype: str | None = None) -> Metric:
    """The :class:`toolkit.metrics.Metric` computing the Keras metric ``metric`` as ``compile`` makes it: a name
    (``"accuracy"``, ``"mae"``, ``"top_k_categorical_accuracy"``, a loss' name), a Keras metric or loss function, or
    a Keras metric object with its arguments; named as Keras names it in ``fit``'s history (the string given, else
    the object's or function's name). ``dtype``: the model's compute dtype, which the metric must compute in.

    Raises:
        KerasImportError: a metric, class, argument or dtype the toolkit does not translate (named): metrics that are
            not a mean of per-example values (``AUC``, ``Precision``, ``RootMeanSquaredError``, ...) among them.
    """
    import keras

    what = f"metric {_describe(metric)}"
    if isinstance(metric, str) and metric.lower() in SHAPE_RESOLVED_METRICS:
        rules = _rules(True, metric)
        return Metric(metric, lambda ops, outputs, y: compiled_accuracy(ops, y, outputs, rules))
    try:
        obj = keras.metrics.get(metric)
    except (ValueError, TypeError) as error:
        raise KerasImportError(f"{what} is not a Keras metric ({error})") from error
    wrapper = keras.metrics.MeanMetricWrapper
    if isinstance(obj, keras.metrics.Metric):
        if not isinstance(obj, wrapper) or (type(obj) is not wrapper and type(obj) is not getattr(
                keras.metrics, type(obj).__name__, None)):
            raise KerasImportError(f"{what}: {type(obj).__name__} is not supported: from_keras translates Keras' "
                                   "metrics that average one value per example (a MeanMetricWrapper of a Keras "
                                   "function), not a metric of your own or one with other state (AUC, Precision, "
                                   "RootMeanSquaredError, ...)")
        _check_dtype(obj, dtype, what)
        _, entry = _entry(obj._fn, what)
        arguments, name = _arguments(entry, dict(obj._fn_kwargs), what), obj.name
    elif callable(obj):
        _, entry = _entry(obj, what)
        arguments, name = {}, obj.__name__
    else:
        raise KerasImportError(f"{what} is not a Keras metric")
    name = metric if isinstance(metric, str) else name
    rules = _rules(True, name)
    return Metric(name, lambda ops, outputs, y: entry.fn(ops, y, outputs, rules, **arguments))


def _per_example(ops, values):
    """Each example's mean of its values (Keras averages every value; the trainer averages the examples')."""
    rank = ops.ndim(values)
    return ops.mean(values, axis=tuple(range(1, rank))) if rank > 1 else values


def compile_config(keras_model) -> dict:
    """The arguments ``keras_model.compile`` was given (``loss``, ``metrics``, ...), or ``{}`` if it was not
    compiled.

    Args:
        keras_model: a Keras model.
    """
    config = getattr(keras_model, "_compile_config", None)  # Keras keeps what compile() was given there
    return dict(getattr(config, "config", None) or {})


def compiled_loss(keras_model, loss: Any = None) -> Callable:
    """The toolkit loss for ``loss``, or for the loss ``keras_model`` was compiled with (:func:`translate_loss`).

    Raises:
        KerasImportError: no loss, one that is not translated, ``loss_weights``, or outputs with a Keras mask
            (Keras weighs a loss by it).
    """
    config = compile_config(keras_model)
    if loss is None:
        loss = config.get("loss")
        if config.get("loss_weights") is not None:
            raise KerasImportError(f"loss_weights={config['loss_weights']!r} is not supported (from_keras imports "
                                   "models of one output, weighed 1)")
    if loss is None:
        raise KerasImportError("the Keras model has no loss (it was not compiled with one): pass loss=, for example "
                               "'sparse_categorical_crossentropy'")
    if any(getattr(output, "_keras_mask", None) is not None for output in getattr(keras_model, "outputs", ())):
        raise KerasImportError("the model's output carries a Keras mask, which Keras' loss weighs its values by; "
                               "from_keras does not apply it (end the model with a layer that consumes the mask)")
    return translate_loss(loss, keras_model.compute_dtype)


def compiled_metrics(keras_model) -> tuple[Metric, ...]:
    """The metrics ``keras_model`` was compiled with (``metrics=``, then ``weighted_metrics=``, those weighted:
    :attr:`toolkit.metrics.Metric.weighted`), as :class:`toolkit.metrics.Metric` objects named as Keras' ``fit``
    logs them; empty without.

    Raises:
        KerasImportError: a metric that is not translated, or metrics per output (a dict or nested lists).
    """
    from toolkit.training import metrics as metrics_module

    config = compile_config(keras_model)
    found = []
    for key in ("metrics", "weighted_metrics"):
        given = config.get(key) or ()
        given = [given] if not isinstance(given, (list, tuple, dict)) else given
        if isinstance(given, dict) or any(isinstance(m, (list, tuple, dict)) for m in given):
            raise KerasImportError(f"{key}={given!r} per output are not supported (from_keras imports models of one "
                                   "output: pass a flat list)")
        for metric in given:
            metric = translate_metric(metric, keras_model.compute_dtype)
            if key == "weighted_metrics":  # Keras' name, "weighted_" first where a metric already has it
                name = f"weighted_{metric.name}" if any(m.name == metric.name for m in found) else metric.name
                metric = dataclasses.replace(metric, name=name, weighted=True)
            found.append(metric)
    try:
        return metrics_module.get(found)
    except ValueError as error:
        raise KerasImportError(f"metrics={[m.name for m in found]!r}: {error}") from error


__all__ = ["FUNCTIONS", "REDUCTIONS", "compiled_loss", "compiled_metrics", "translate_loss", "translate_metric"]
