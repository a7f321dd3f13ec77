"""The optimizer a Keras model was compiled with, as a :mod:`toolkit.optim` optimizer, and its state: a loaded
``.keras`` model's built optimizer (its ``iterations`` and slots) continues in the toolkit where Keras' ``fit``
would continue it.

Translated, each with Keras' update formula (:mod:`toolkit.training.optim`): ``SGD`` (``momentum``, not Nesterov),
``Adam`` (not AMSGrad), ``AdamW`` (every weight decayed) and ``RMSprop`` (no momentum, not centred), with a constant
learning rate (the number Keras' variable holds, in Keras' ``floatx``), ``clipnorm`` and
``global_clipnorm``. Refused by name with a :class:`~toolkit.KerasImportError`: other optimizers, a learning-rate
schedule, ``clipvalue``, ``weight_decay`` on another optimizer than AdamW, ``exclude_from_weight_decay``, EMA
(``use_ema``), ``gradient_accumulation_steps``, ``loss_scale_factor``, a ``LossScaleOptimizer``, and the variants
above. The slots are read from Keras' optimizer variables by the model weight they belong to (Keras'
``_get_variable_index``), so each lands on the parameter the importer named for that weight.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from toolkit.errors import KerasImportError
from toolkit.training import optim

#: Each translated Keras optimizer: the toolkit's class, its arguments from Keras' attributes, and each toolkit
#: slot's Keras variable list (attribute of the built Keras optimizer).
TRANSLATED = {
    "SGD": (optim.SGD, {"momentum": "momentum"}, {"velocity": "momentums"}),
    "Adam": (optim.Adam, {"beta1": "beta_1", "beta2": "beta_2", "eps": "epsilon"},
             {"m": "_momentums", "v": "_velocities"}),
    "AdamW": (optim.AdamW, {"weight_decay": "weight_decay", "beta1": "beta_1", "beta2": "beta_2", "eps": "epsilon"},
              {"m": "_momentums", "v": "_velocities"}),
    "RMSprop": (optim.RMSprop, {"rho": "rho", "eps": "epsilon"}, {"v": "_velocities"}),
}
#: Keras settings the translation does not apply, each with the value that it may have (Keras' default).
UNAPPLIED = {"clipvalue": None, "use_ema": False, "gradient_accumulation_steps": None, "loss_scale_factor": None,
             "nesterov": False, "amsgrad": False, "centered": False}


def _kind(keras_optimizer) -> str:
    kind = type(keras_optimizer).__name__
    module = type(keras_optimizer).__module__
    if kind not in TRANSLATED or module.split(".")[0] != "keras":
        kind = kind if module.split(".")[0] == "keras" else f"{module}.{kind}"  # a subclass or tf_keras' own
        raise KerasImportError(f"the model's optimizer {kind} is not supported: from_keras translates Keras' "
                               f"{', '.join(TRANSLATED)} (or give the trainer a toolkit.optim optimizer)")
    return kind


def _refused(keras_optimizer, kind: str) -> str | None:
    """The first Keras setting of ``keras_optimizer`` that the translation would not apply, in words, or None."""
    import keras

    for name, default in UNAPPLIED.items():
        if (value := getattr(keras_optimizer, name, default)) != default:
            return f"{name}={value!r}"
    if kind == "RMSprop" and keras_optimizer.momentum:
        return f"momentum={keras_optimizer.momentum!r}"
    if kind != "AdamW" and keras_optimizer.weight_decay:
        return f"weight_decay={keras_optimizer.weight_decay!r} (the toolkit decays weights in AdamW only)"
    if getattr(keras_optimizer, "_exclude_from_weight_decay", None) or \
            getattr(keras_optimizer, "_exclude_from_weight_decay_pattern", None) is not None:
        return "exclude_from_weight_decay (the toolkit's AdamW decays every weight)"
    rate = keras_optimizer._learning_rate
    if isinstance(rate, keras.optimizers.schedules.LearningRateSchedule):
        return f"the learning-rate schedule {type(rate).__name__} (toolkit.optim.schedules has the toolkit's)"
    if not isinstance(rate, keras.Variable):
        return f"the learning rate {rate!r}, a callable (the toolkit takes a number or a toolkit.optim.schedules one)"
    for theirs in TRANSLATED[kind][1].values():
        if not isinstance(value := getattr(keras_optimizer, theirs), (int, float)) or isinstance(value, bool):
            return f"{theirs}={value!r}, not a number"
    return None


def translate_optimizer(keras_optimizer) -> optim.Optimizer:
    """The toolkit optimizer computing what ``keras_optimizer`` computes.

    Args:
        keras_optimizer: a ``keras.optimizers`` optimizer.

    Returns:
        A :mod:`toolkit.optim` optimizer.

    Raises:
        KerasImportError: an optimizer or a setting the toolkit does not apply, named (see the module docstring).
    """
    kind = _kind(keras_optimizer)
    reason = _refused(keras_optimizer, kind)
    if reason is not None:
        raise KerasImportError(f"the model's optimizer {kind} has {reason}, which the toolkit does not apply; give "
                               f"the trainer a toolkit.optim optimizer instead, or compile the model without it")
    made, arguments, _ = TRANSLATED[kind]
    lr = float(keras_optimizer.learning_rate.numpy())  # the number Keras' step casts, exactly
    clipping = {name: float(value) for name in ("clipnorm", "global_clipnorm")
                if (value := getattr(keras_optimizer, name, None)) is not None}
    return made(lr, **{mine: float(getattr(keras_optimizer, theirs)) for mine, theirs in arguments.items()},
                **clipping)


def optimizer_state(keras_optimizer, names: dict[int, str], optimizer: optim.Optimizer) -> optim.OptimizerState | None:
    """The state of the built ``keras_optimizer``, by the toolkit's parameter names, for ``optimizer`` (its
    translation), or None where Keras has not built it (no step taken).

    Args:
        keras_optimizer: a translated ``keras.optimizers`` optimizer.
        names: the toolkit parameter name of each trainable Keras weight, by ``id`` of the weight.
        optimizer: :func:`translate_optimizer`'s result for it.

    Returns:
        The updates done and each slot's values, or None.

    Raises:
        KerasImportError: the optimizer was built for weights other than the model's trainable ones.
    """
    if not keras_optimizer.built:
        return None
    built_for = {id(variable) for variable in keras_optimizer._trainable_variables}
    if built_for != set(names):
        raise KerasImportError(f"the model's optimizer was built for {len(built_for)} weights, not the model's "
                               f"{len(names)} trainable ones (was a layer frozen or unfrozen after training?): "
                               f"compile the model again, or give the trainer a toolkit.optim optimizer")
    slot_of = _slot_variables(keras_optimizer)
    slots = {slot: {name: np.array(slot_of(slot, key).numpy()) for key, name in names.items()}
             for slot in optimizer.state_slots()}
    return optim.OptimizerState(int(keras_optimizer.iterations.numpy()), slots)


def _slot_variables(keras_optimizer) -> Any:
    """``slot_of(slot, weight id)``: the built ``keras_optimizer``'s variable holding the toolkit slot ``slot`` of
    the model weight whose ``id`` is given (Keras keeps one list per slot, in the order of the weights it was built
    for)."""
    index = {id(variable): i for i, variable in enumerate(keras_optimizer._trainable_variables)}
    lists = TRANSLATED[type(keras_optimizer).__name__][2]
    return lambda slot, key: getattr(keras_optimizer, lists[slot])[index[key]]


def optimizer_writes(keras_model, start: optim.OptimizerState, variables: dict[str, Any]) -> list[tuple[Any, Any]]:
    """What writing ``start`` into ``keras_model``'s compiled optimizer assigns, checked (nothing written here; once
    everything is checked, an optimizer Keras has not built yet is built for the model's trainable weights).

    Args:
        keras_model: a compiled Keras model whose optimizer :func:`translate_optimizer` translates.
        start: the updates done and each slot's values by parameter name (``toolkit.optim.OptimizerState(
            trainer.step_count, trainer.optimizer_state())``).
        variables: each parameter's Keras weight, by the name :func:`~toolkit.from_keras` gave it.

    Returns:
        ``(Keras variable, value)`` pairs, ``iterations`` first.

    Raises:
        KerasImportError: no compiled optimizer, one not translated, other slots than its translation keeps, a
            trainable weight without a value or a value of another shape.
    """
    keras_optimizer = getattr(keras_model, "optimizer", None)
    if keras_optimizer is None:
        raise KerasImportError("to_keras: the Keras model has no optimizer to write the optimizer state into: "
                               "compile it with the optimizer the trainer used")
    translated = translate_optimizer(keras_optimizer)
    if set(start.slots) != set(translated.state_slots()):
        raise KerasImportError(f"to_keras: the optimizer state has the slots {sorted(start.slots)}, the model's "
                               f"{type(keras_optimizer).__name__} keeps {sorted(translated.state_slots())}")
    trainable = {id(variable) for variable in keras_model.trainable_weights}
    named = {name: variable for name, variable in variables.items() if id(variable) in trainable}
    for slot, values in start.slots.items():
        if set(values) != set(named):
            raise KerasImportError(f"to_keras: the optimizer slot {slot!r} has values for {sorted(values)}, the "
                                   f"model's trainable weights are {sorted(named)}")
        for name, variable in named.items():
            if np.shape(values[name]) != tuple(variable.shape):
                raise KerasImportError(f"to_keras: the optimizer slot {slot!r} of {name!r} has shape "
                                       f"{np.shape(values[name])}, the weight {tuple(variable.shape)}")
    if not keras_optimizer.built:  # everything checked: its slots exist from here
        keras_optimizer.build(keras_model.trainable_weights)
    slot_of = _slot_variables(keras_optimizer)
    return [(keras_optimizer.iterations, int(start.iterations)),
            *((slot_of(slot, id(variable)), np.asarray(values[name]))
              for slot, values in start.slots.items() for name, variable in named.items())]


def compiled_optimizer(keras_model, names: dict[int, str]) -> tuple[Any, optim.OptimizerState | None]:
    """What the imported model brings as its optimizer (:attr:`toolkit.Model.optimizer`): the translation of the
    one ``keras_model`` was compiled with and its state (:func:`translate_optimizer`, :func:`optimizer_state`);
    for one that cannot be translated a :class:`~toolkit.optim.RefusedOptimizer` saying why (a trainer given no
    optimizer raises it; one given an optimizer trains with that); (None, None) for a model not compiled.

    Args:
        keras_model: the Keras model imported.
        names: the toolkit parameter name of each trainable Keras weight, by ``id`` of the weight.

    Returns:
        ``(optimizer, state)``: a :mod:`toolkit.optim` optimizer and its :class:`~toolkit.optim.OptimizerState` (None
        where Keras has not built it), a :class:`~toolkit.optim.RefusedOptimizer` and None, or (None, None).
    """
    keras_optimizer = getattr(keras_model, "optimizer", None)
    if keras_optimizer is None:
        return None, None
    try:
        optimizer = translate_optimizer(keras_optimizer)
        return optimizer, optimizer_state(keras_optimizer, names, optimizer)
    except KerasImportError as error:
        return optim.RefusedOptimizer(str(error)), None


__all__ = ["TRANSLATED", "UNAPPLIED", "compiled_optimizer", "optimizer_state", "optimizer_writes",
           "translate_optimizer"]
