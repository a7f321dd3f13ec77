"""Multi-input and multi-output Keras models in :func:`toolkit.from_keras`: how the imported model's ``forward``
takes its inputs and gives its outputs, and its loss, as Keras computes them.

- Inputs: a model of several inputs takes a list (or tuple) of arrays in the order of ``keras_model.inputs``, or a
  dict by the names of its ``Input`` layers, as Keras' ``fit`` and ``predict`` do.
- Outputs: a model whose outputs are a list gives a list (``predict`` returns a list of arrays, as Keras').
- Loss: a list of losses (one per output, in order) or a dict by output name, with ``loss_weights`` (a list or a
  dict; 1 where not given), as Keras 3 compiles them: the training loss is ``sum_i w_i * mean(loss_i)``, which is
  the mean over the examples of ``sum_i w_i * loss_i(example)``, so it is computed per example and splits across
  devices like any loss. Targets are given like the outputs (a list in order, or a dict by output name), to
  ``fit``, ``evaluate`` and the steps alike. Each output's own loss (before ``loss_weights``) is one of the
  model's metrics, ``<output name>_loss``, as Keras' ``fit`` and ``evaluate`` log it. One loss
  for several outputs (Keras would apply it to the list of outputs as one structure) is refused with a
  :class:`~toolkit.KerasImportError`.
- Metrics: compiled ``metrics`` and ``weighted_metrics`` per output, as Keras 3 takes them (a list of one entry per
  output in order, or a dict by output name; an entry a metric, a list of them or None), each computed on its
  output and targets and named ``<output name>_<metric>`` (``<output name>_weighted_<metric>`` for a weighted
  metric whose name a plain one took), as Keras' ``fit`` logs them. Another structure (a flat list of another
  length), or one name twice (Keras numbers the second), is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolkit.errors import ArgumentError, KerasImportError
from toolkit.keras import losses as keras_losses
from toolkit.training.metrics import Metric


def input_names(keras_model) -> list[str]:
    """The names of the model's ``Input`` layers, in the order of ``keras_model.inputs``."""
    return [tensor._keras_history.operation.name for tensor in keras_model.inputs]


def arrange(names: list[str]) -> Callable[[Any], list]:
    """``inputs(x) -> [tensor per input]`` for a model of the inputs ``names``: ``x`` one tensor (one input), a list
    or tuple in order, or a dict by name.

    Raises (when called):
        ArgumentError: ``x`` not of that structure.
    """

    def inputs(x) -> list:
        if isinstance(x, dict):
            if sorted(x) != sorted(names):
                raise ArgumentError(f"the model's inputs are {names}; got a dict of {sorted(x)}")
            return [x[name] for name in names]
        if isinstance(x, (list, tuple)):
            if len(x) != len(names):
                raise ArgumentError(f"the model has {len(names)} inputs {names}; got a {type(x).__name__} of "
                                    f"{len(x)}")
            return list(x)
        if len(names) != 1:
            raise ArgumentError(f"the model has {len(names)} inputs {names}: give a list of arrays in that order, or "
                                "a dict by name")
        return [x]

    return inputs


def _per_output(given, names: list[str], what: str, default=None) -> list:
    """``given`` (a list in output order, or a dict by output name) as a list in output order."""
    if isinstance(given, dict):
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise KerasImportError(f"{what} names {unknown}, which are not outputs of the model {names}")
        return [given.get(name, default) for name in names]
    if isinstance(given, (list, tuple)) and len(given) == len(names):
        return list(given)
    raise KerasImportError(f"{what}={given!r}: a model of the outputs {names} takes one per output, as a list in "
                           "that order or a dict by output name")


def compiled_loss(keras_model, loss: Any = None) -> Callable:
    """``loss_fn(ops, outputs, y) -> per-example values`` of a model whose outputs are a list: the compiled (or
    given) loss per output, weighed by the compiled ``loss_weights``.

    Raises:
        KerasImportError: no loss, one loss for all the outputs, losses or weights not one per output, a loss not
            translated, metrics not one entry per output (or one name twice), or an output carrying a Keras mask.
    """
    config = keras_losses.compile_config(keras_model)
    names = list(keras_model.output_names)
    if any(getattr(output, "_keras_mask", None) is not None for output in keras_model.outputs):
        raise KerasImportError("an output of the model carries a Keras mask, which Keras' loss weighs its values by; "
                               "from_keras does not apply it")
    loss = config.get("loss") if loss is None else loss
    if loss is None:
        raise KerasImportError(f"the Keras model has no loss: pass loss=, one per output {names}")
    losses = _per_output(loss, names, "loss")
    weights = config.get("loss_weights")
    weights = [1.0] * len(names) if weights is None else _per_output(weights, names, "loss_weights", 1.0)
    dtype = keras_model.compute_dtype
    terms = [(i, name, keras_losses.translate_loss(fn, dtype), float(w))
             for i, (name, fn, w) in enumerate(zip(names, losses, weights)) if fn is not None]
    if not terms:
        raise KerasImportError(f"loss={loss!r} gives no output a loss")

    def target(y, i: int, name: str):
        if isinstance(y, dict):
            if not set(y) <= set(names):
                raise ArgumentError(f"the targets name {sorted(set(y) - set(names))}, which are not outputs of the "
                                    f"model {names}")
            found = y.get(name)
        elif isinstance(y, (list, tuple)) and len(y) == len(names):
            found = y[i]
        else:
            raise ArgumentError(f"the model has the outputs {names}: give the targets as a list in that order, or a "
                                "dict by output name")
        if found is None:
            raise ArgumentError(f"no targets for the output {name!r}, which has a loss")
        return found

    def loss_fn(ops, outputs, y):
        total = 0.0
        for i, name, fn, weight in terms:
            total = total + weight * fn(ops, outputs[i], target(y, i, name))
        return total

    def output_loss(i: int, name: str, fn: Callable) -> Metric:
        return Metric(f"{name}_loss", lambda ops, outputs, y: fn(ops, outputs[i], target(y, i, name)), as_loss=True)

    def output_metric(i: int, name: str, metric: Metric, label: str, weighted: bool) -> Metric:
        fn = metric.fn
        return Metric(label, lambda ops, outputs, y: fn(ops, outputs[i], target(y, i, name)), weighted=weighted)

    loss_fn.__name__ = "loss"
    # Keras logs each output's loss (before loss_weights, weighed by sample_weight as the loss) where there are two
    # or more
    loss_fn.metrics = tuple(output_loss(i, name, fn) for i, name, fn, _ in terms) if len(terms) > 1 else ()
    labels: set[str] = set()
    for key in ("metrics", "weighted_metrics"):
        weighted = key == "weighted_metrics"
        for i, name, metric in _output_metrics(config.get(key), names, key, dtype):
            label = f"{name}_{metric.name}"
            if weighted and label in labels:  # Keras' name for a weighted metric a plain one already named
                label = f"{name}_weighted_{metric.name}"
            if label in labels:
                raise KerasImportError(f"{key}: the metric {label!r} is compiled twice (Keras numbers the second "
                                       f"{label}_1), which from_keras does not name: compile it once")
            labels.add(label)
            loss_fn.metrics += (output_metric(i, name, metric, label, weighted),)
    return loss_fn


def _output_metrics(given, names: list[str], key: str, dtype: str) -> list[tuple[int, str, Metric]]:
    """``(output index, output name, metric)`` of each metric that ``metrics=`` or ``weighted_metrics=`` (``key``)
    gives a model of the outputs ``names``, as Keras 3 reads them (see the module docstring)."""
    if not given:
        return []
    if isinstance(given, dict):
        entries = _per_output(given, names, key)
    elif isinstance(given, (list, tuple)) and len(given) == len(names):
        entries = list(given)
    else:
        raise KerasImportError(f"{key}={given!r}: a model of the outputs {names} takes one entry per output (a "
                               "metric, a list of them or None), as a list in that order or a dict by output name, "
                               "as Keras 3 does")
    found = []
    for i, (name, entry) in enumerate(zip(names, entries)):
        for metric in entry if isinstance(entry, (list, tuple)) else [] if entry is None else [entry]:
            if isinstance(metric, (list, tuple, dict)):
                raise KerasImportError(f"{key}={given!r}: the output {name!r} is given nested metrics {metric!r}; "
                                       "give it a metric or a flat list of them")
            found.append((i, name, keras_losses.translate_metric(metric, dtype)))
    return found


__all__ = ["arrange", "compiled_loss", "input_names"]
