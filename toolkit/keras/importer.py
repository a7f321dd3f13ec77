"""Keras models imported as they are (:func:`from_keras`) and trained parameters written back (:func:`to_keras`).

A built Keras 3 model, ``Sequential`` or functional (branches and merges, ``keras.ops`` calls and operators, custom
layers opened up: :mod:`toolkit.keras.graph`; inputs and outputs one tensor or a list of them:
:mod:`toolkit.keras.outputs`), made of the layers in :data:`~toolkit.keras.layers.SUPPORTED` becomes a
:class:`~toolkit.Model` whose ``forward`` runs the toolkit's layers (``toolkit.layers``: Keras' formulas and
parameter shapes) with the Keras model's current weights, so it runs on every backend and device count. Parameters
are named ``<keras layer name>/<weight>`` (``dense_1/kernel``); batch normalization's moving statistics are model
state. Keras is imported only when these functions are called.

The graph is read once, at import: each call of a layer (a Keras node) becomes one step of a program that reads and
writes numbered tensors, each with its Keras mask, propagated by Keras' rules (``Embedding(mask_zero=True)`` makes
one; layers pass it on; merges AND theirs; attention and recurrent layers consume it).

**Nothing silent.** Every constructor argument of every layer is applied as Keras applies it or refused with a
:class:`~toolkit.KerasImportError` naming the layer and the argument (:func:`~toolkit.keras.settings.check_config`):

- ``trainable = False`` (on a layer, or on a model holding it): its weights become model state
  (:class:`~toolkit.State`) that nothing updates, so they get no gradient, no update and no optimizer slots, and a
  ``BatchNormalization`` among them runs in inference mode in training too (Keras 3's rule); ``to_keras`` writes
  them back from the trainer's ``state()``.
- ``kernel_/bias_/..._regularizer`` and ``activity_regularizer`` (``L1``, ``L2``, ``L1L2``): added to the training
  loss as Keras adds them (``Trainer.compute_loss``: the compiled loss plus the sum of the model's losses). A weight
  penalty is one number for the batch: added to every example's loss, it adds once to their mean, whatever the
  split across devices. Keras divides an activity penalty (a sum over the whole output) by the batch size, which is
  the mean over the examples of each example's own sum: added to each example's loss, it is exact under any split.
  Only trainable weights are penalised, as in Keras. The trainer's ``evaluate`` scores outputs without the
  parameters, so it cannot add the penalties Keras' ``evaluate`` adds: the imported loss refuses to be evaluated
  there (a :class:`~toolkit.KerasImportError`) rather than give a different number.
- ``..._constraint`` on a trainable weight (``MaxNorm``, ``NonNeg``, ``UnitNorm``, ``MinMaxNorm``): the model's
  constraint of that parameter (:mod:`toolkit.nn.constraints`), applied after each update as Keras applies it;
  another constraint class is refused.
- The compiled loss and metrics (:mod:`toolkit.keras.losses`): every Keras loss and per-example metric by name,
  function or object with its arguments, computed as Keras computes it, with Keras' rank rules (targets ``(N,)``
  against outputs ``(N, 1)`` are not broadcast to ``(N, N)``; sparse labels ``(N, 1)`` are squeezed; other shapes
  raise a :class:`~toolkit.ShapeError` that says which to pass). The metrics become the model's ``metrics``, which
  ``fit`` and ``evaluate`` report when given none, named as Keras' ``fit`` logs them.
- The compiled optimizer (:mod:`toolkit.keras.optimizers`): SGD, Adam, AdamW or RMSprop as the model's
  ``optimizer``, with the built optimizer's ``iterations`` and slots as where it starts, so a trainer given no
  optimizer continues a loaded ``.keras`` model as Keras' ``fit`` would; another optimizer or setting is named
  when such a trainer is made.
- A mixed-precision dtype policy is refused (the trainer's ``dtype`` sets the model's one precision), and so are
  ``compile(run_eagerly=True)`` and ``steps_per_execution`` other than 1 (the trainers' steps are compiled, one
  batch a call); ``jit_compile`` is not read (Keras keeps it resolved by device, so a given value cannot be told).

What differs from Keras by design: dropout draws the toolkit's per-example masks (reproducible across backends and
device counts), not Keras' random ones, so training with dropout matches Keras only in distribution; inference is
identical. Regularization coefficients are used as given in float64, where Keras on TensorFlow rounds them to
float32 first (compare with coefficients exact in float32, such as 2**-4).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from toolkit.errors import KerasImportError
from toolkit.keras import losses as keras_losses
from toolkit.keras import optimizers as keras_optimizers
from toolkit.keras import outputs as keras_outputs
from toolkit.keras.activations import ACTIVATIONS
from toolkit.keras.graph import graph as _graph
from toolkit.keras.layers import SUPPORTED
from toolkit.keras.settings import check_config, refuse, translator
from toolkit.keras.translation import Flow, MaskOf, Slot
from toolkit.nn import constraints, context
from toolkit.nn.model import Model, State
from toolkit.ops.training import record_layer, unrecorded

#: Keras regularizer classes the importer computes, with their coefficients' attributes.
REGULARIZERS = {"L1": ("l1",), "L2": ("l2",), "L1L2": ("l1", "l2")}



def _config_key(layer, suffix: str, obj) -> str:
    """The constructor argument (``kernel_regularizer``, ...) that gave ``layer`` the setting ``obj``."""
    keys = [key for key, value in layer.get_config().items() if key.endswith(suffix) and isinstance(value, dict)
            and value.get("class_name") == type(obj).__name__]
    return f"{keys[0] if len(keys) == 1 else 'its ' + suffix.strip('_')}={type(obj).__name__}"


def _coefficients(layer, regularizer, key: str) -> tuple[float, float]:
    """``(l1, l2)`` of a Keras ``L1``, ``L2`` or ``L1L2`` regularizer; anything else is refused."""
    import keras

    kind = type(regularizer).__name__
    if kind not in REGULARIZERS or type(regularizer) is not getattr(keras.regularizers, kind):
        raise refuse(layer, f"{key} is not supported; supported regularizers: {', '.join(REGULARIZERS)}")
    return float(getattr(regularizer, "l1", 0.0)), float(getattr(regularizer, "l2", 0.0))


def _constraint(layer, constraint, key: str):
    """The toolkit's constraint for a Keras ``MaxNorm``, ``NonNeg``, ``UnitNorm`` or ``MinMaxNorm``; anything else
    (a subclass included, whose formula may differ) is refused."""
    import keras

    kind = type(constraint).__name__
    if kind not in constraints.KERAS or type(constraint) is not getattr(keras.constraints, kind):
        raise refuse(layer, f"{key} is not supported; supported constraints: {', '.join(constraints.KERAS)}")
    return constraints.KERAS[kind](**(constraint.get_config() or {}))


class _Settings:
    """What the importer applies besides a layer's own translation: its frozen weights (model state that nothing
    updates), the penalties of its regularized trainable weights and of its outputs, the constraints of its
    trainable weights."""

    def __init__(self, layer, weights: dict, trainable: set[int]):
        variables = list(layer.weights)
        if len(variables) != len(weights):
            raise refuse(layer, f"has {len(variables)} weights where its translation has {len(weights)}")
        self.weights, self.penalties, self.constraints, self.names = {}, [], {}, {}
        for (name, value), variable in zip(weights.items(), variables):
            trained = id(variable) in trainable
            if trained:
                self.names[id(variable)] = name
            if trained and getattr(variable, "constraint", None) is not None:  # frozen weights are never updated
                key = _config_key(layer, "_constraint", variable.constraint)
                self.constraints[name] = _constraint(layer, variable.constraint, key)
            if trained and getattr(variable, "regularizer", None) is not None:
                key = _config_key(layer, "_regularizer", variable.regularizer)
                self.penalties.append((name, *_coefficients(layer, variable.regularizer, key)))
            self.weights[name] = value if trained or isinstance(value, State) else State(value)
        regularizer = getattr(layer, "activity_regularizer", None)
        self.activity = None if regularizer is None else \
            _coefficients(layer, regularizer, f"activity_regularizer={type(regularizer).__name__}")


def _penalty(ops, x, l1: float, l2: float, axis=None):
    """Keras' ``L1L2(l1, l2)(x)``: ``l1 * sum(|x|) + l2 * sum(x**2)``, over ``axis``."""
    total = 0.0
    if l1:
        total = total + l1 * ops.sum(ops.abs(x), axis=axis)
    if l2:
        total = total + l2 * ops.sum(ops.square(x), axis=axis)
    return total


def _activity_penalty(ops, y, l1: float, l2: float):
    """Each example's share of Keras' activity penalty (the penalty of the whole output divided by the batch size):
    the penalty of its own row."""
    return _penalty(ops, y, l1, l2, axis=tuple(range(1, len(ops.shape(y)))) or None)


# --- the graph ---------------------------------------------------------------------------------------------------
def _fill(value, flows: list[Flow]):
    if isinstance(value, Slot):
        return flows[value.index]
    if isinstance(value, MaskOf):
        return Flow(flows[value.index].mask, None)
    if isinstance(value, dict):
        return {k: _fill(v, flows) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_fill(v, flows) for v in value)
    return value


def _copied(values: dict) -> dict:
    """Fresh copies of weights and :class:`State` entries: every ``init`` call gets arrays of its own."""
    return {k: State(np.array(v.value)) if isinstance(v, State) else np.array(v) for k, v in values.items()}


def from_keras(keras_model, loss: Any = None, name: str | None = None) -> Model:
    """A :class:`~toolkit.Model` computing what the built Keras model ``keras_model`` (``Sequential``, or functional
    with inputs and outputs one tensor or a list of them) computes, with its current weights as the initial
    parameters, and its compiled loss (or ``loss``: a Keras loss name or object). Frozen weights
    (``trainable = False``) are model state that nothing updates; regularizers are added to the training loss as
    Keras adds them (see the module docstring).

    Args:
        keras_model: a built Keras 3 ``Sequential`` or functional ``keras.Model``.
        loss: the loss to train with, a Keras loss name, function or object; None: the loss ``keras_model`` was
            compiled with.
        name: the model's name (None: the Keras model's).

    Returns:
        A :class:`~toolkit.Model` whose parameters are named ``<keras layer name>/<weight>``, with the compiled
        metrics as its ``metrics`` and the compiled optimizer, continuing from its state where it was built, as its
        ``optimizer`` (:mod:`toolkit.keras.optimizers`: a trainer given no optimizer trains with it).

    Raises:
        KerasImportError: not a built Sequential or functional model, compiled with ``run_eagerly=True`` or
            ``steps_per_execution`` other than 1, a layer, argument or call not supported
            (the message names the layer and the argument: a constraint other than MaxNorm/NonNeg/UnitNorm/
            MinMaxNorm, a regularizer other than L1/L2/L1L2, a non-default argument no translator reads), or a
            loss or metric not translated; nothing is imported.
    """
    import keras

    if not isinstance(keras_model, keras.Model):
        raise KerasImportError(f"from_keras takes a built keras.Sequential or functional keras.Model, got "
                               f"{type(keras_model).__name__}")
    if not keras_model.built:
        raise KerasImportError("the Keras model is not built: give it an Input or call it on data first")
    _check_compile_options(keras_model)
    calls, output = _graph(keras_model)
    trainable = {id(variable) for variable in keras_model.trainable_weights}
    params, program, penalties, seen, constrained, names = {}, [], [], set(), {}, {}
    for call in calls:
        translate = translator(call.layer)
        if id(call.layer) not in seen:
            check_config(call.layer)
        weights, apply = translate(call)
        settings = _Settings(call.layer, weights, trainable)
        if id(call.layer) not in seen:  # a shared layer's weights are penalised once, as Keras counts variables
            params.update(settings.weights)
            penalties += settings.penalties
            constrained.update(settings.constraints)
            names.update(settings.names)
            seen.add(id(call.layer))
        program.append((apply, call.arguments, settings.activity))
    score = (keras_outputs.compiled_loss if isinstance(output, list) else keras_losses.compiled_loss)(keras_model,
                                                                                                      loss)
    optimizer, optimizer_state = keras_optimizers.compiled_optimizer(keras_model, names)
    inputs = keras_outputs.arrange(keras_outputs.input_names(keras_model))
    initial = _copied(params)
    penalized = bool(penalties) or any(activity is not None for _, _, activity in program)

    def init(rng):
        return _copied(initial)

    def forward(ops, p, x):
        flows, penalty = [Flow(value, None) for value in inputs(x)], 0.0
        for (apply, arguments, activity), call in zip(program, calls):
            with unrecorded():  # one recorded output per Keras layer (multigpu localize), named as Keras names it
                flows.append(apply(ops, p, _fill(arguments, flows)))
            record_layer(ops, call.layer.name, flows[-1].value)
            if activity is not None and ops.training:
                penalty = penalty + _activity_penalty(ops, flows[-1].value, *activity)
        if penalized and ops.training:
            for key, l1, l2 in penalties:
                penalty = penalty + _penalty(ops, p[key], l1, l2)
            # Added to the loss by the run (Model.train_losses), after the examples' weights, as Keras adds them.
            context.current().penalties.append(penalty)
        return [flows[i].value for i in output] if isinstance(output, list) else flows[output].value

    def loss_fn(ops, outputs, y):
        losses = score(ops, outputs, y)
        if penalized and not ops.training:
            raise KerasImportError(
                f"the loss of {keras_model.name!r} includes its regularizers' penalties, which need the parameters: "
                "the trainer's evaluate (and fit's validation) scores outputs alone, so it cannot add them as Keras' "
                "evaluate does; use trainer.loss(x, y) (training mode), or import a model without regularizers to "
                "evaluate it")
        return losses

    loss_fn.__name__ = getattr(score, "__name__", "loss")
    return Model(init, forward, loss_fn, name=name or keras_model.name, rows_independent=True,
                 metrics=(*getattr(score, "metrics", ()),
                          *(() if isinstance(output, list) else keras_losses.compiled_metrics(keras_model))),
                 constraints=constrained, optimizer=optimizer, optimizer_state=optimizer_state,
                 **_example_shapes(keras_model, isinstance(output, list)))


def _check_compile_options(keras_model) -> None:
    """Refuse the options of ``compile`` that change how Keras runs its steps and that the trainers cannot apply
    (their steps are always compiled, one batch a call). ``jit_compile`` is not read: Keras keeps it resolved
    (``"auto"`` becomes True or False by device), so whether it was asked for cannot be told from the model."""
    if getattr(keras_model, "run_eagerly", False):
        raise KerasImportError(
            "the model is compiled with run_eagerly=True, which the toolkit's trainers do not apply: their steps "
            "are always compiled (a tf.function on TensorFlow, a compiled function on Aesara and PyTensor): compile "
            "the Keras model without it")
    steps = getattr(keras_model, "steps_per_execution", 1)
    if steps != 1:
        raise KerasImportError(f"the model is compiled with steps_per_execution={steps!r}, which the toolkit's "
                               f"trainers do not apply (each call runs one step); compile the Keras model without "
                               f"it")


def _example_shapes(keras_model, several_outputs: bool) -> dict[str, Any]:
    """The model's ``input_shape`` and ``output_shape`` as the Keras ``Input`` layers and outputs declare them
    (without the batch axis; None where Keras has None: a length that may change between batches)."""
    inputs = {name: tuple(tensor.shape[1:])
              for name, tensor in zip(keras_outputs.input_names(keras_model), keras_model.inputs)}
    outputs = ({name: tuple(tensor.shape[1:]) for name, tensor in zip(keras_model.output_names, keras_model.outputs)}
               if several_outputs else tuple(keras_model.outputs[0].shape[1:]))
    return {"input_shape": inputs if len(inputs) > 1 else next(iter(inputs.values())), "output_shape": outputs}


def to_keras(params: dict[str, np.ndarray], keras_model, state: dict[str, np.ndarray] | None = None,
             optimizer_state: Any = None, model: Model | None = None) -> None:
    """Write ``params`` (and model ``state``: batch normalization's statistics and frozen weights), named as
    :func:`from_keras` names them, into ``keras_model``'s weights (``set_weights``), for example
    ``to_keras(trainer.params(), model, trainer.state())``; with ``optimizer_state``, also into its compiled
    optimizer, so that Keras' ``fit`` (or a ``.keras`` file saved from it) continues where the trainer stopped.

    Args:
        params: NumPy values by the names :func:`from_keras` gave the parameters.
        keras_model: the Keras model :func:`from_keras` imported, or with ``model`` any Keras model of the same
            architecture (its generated layer names may differ).
        state: the model state by name (None: no state); together with ``params`` it must name every weight.
        optimizer_state: a :class:`toolkit.optim.OptimizerState`, ``OptimizerState(trainer.step_count,
            trainer.optimizer_state())``, for the model's compiled optimizer (one of those
            :mod:`toolkit.keras.optimizers` translates, compiled with the trainer's hyperparameters); None: the
            optimizer is left as it is.
        model: the toolkit model :func:`from_keras` made (``trainer.model``): the weights are matched by structure,
            the n-th weight of its Keras model to the n-th of ``keras_model`` in the graph's order, each of the same
            weight name and shape; None: by name.

    Raises:
        KerasImportError: a name missing or left over, or a shape that differs; with ``model``, a structure that
            differs (another count, weight name or shape, named); an optimizer state the model's optimizer cannot
            take (:func:`toolkit.keras.optimizers.optimizer_writes`); nothing is written.
    """
    values = {**params, **(state or {})}
    layers = []
    for call in _graph(keras_model)[0]:
        if not any(call.layer is layer for layer, _ in layers):  # a shared layer is written once
            layers.append((call.layer, list(translator(call.layer)(call)[0])))
    keys = [key for _, names in layers for key in names]
    source = keys if model is None else _by_structure(keys, model, [v for layer, _ in layers for v in layer.weights])
    plan, variables = [], {}
    for (layer, names), weights in zip(layers, _split(source, layers)):
        for key, mine, old in zip(names, weights, layer.get_weights()):
            if mine not in values:
                hint = "" if model is not None else (" (a Keras model built again has other layer names: pass "
                                                     "model=trainer.model to match the weights by structure)")
                raise KerasImportError(f"to_keras: no value for {mine!r}{hint}")
            if np.shape(values[mine]) != np.shape(old):
                raise KerasImportError(f"to_keras: {mine!r} has shape {np.shape(values[mine])}, the Keras weight "
                                       f"{key!r} {np.shape(old)}")
        plan.append((layer, [np.asarray(values[k]) for k in weights]))
        variables.update(zip(weights, layer.weights))
    if unused := sorted(set(values) - set(source)):
        raise KerasImportError(f"to_keras: {unused} name no weight of this Keras model")
    writes = [] if optimizer_state is None else keras_optimizers.optimizer_writes(keras_model, optimizer_state,
                                                                                  variables)
    for layer, weights in plan:
        if weights:
            layer.set_weights(weights)
    for variable, value in writes:
        variable.assign(value)


def _split(names: list[str], layers: list) -> list[list[str]]:
    """``names`` cut into one list per layer of ``layers``, as many as each layer has weights."""
    cut, start = [], 0
    for _, keys in layers:
        cut.append(names[start:start + len(keys)])
        start += len(keys)
    return cut


def _by_structure(keys: list[str], model: Model, weights: list) -> list[str]:
    """The name in ``model`` of each weight of the Keras model being written (``keys``, in the graph's order): the
    weight at the same place in ``model``'s own graph, checked to have the same weight name and shape."""
    made = model.init(np.random.default_rng(0))  # the imported model's weights, in its graph's order
    names = list(made)
    if len(names) != len(keys):
        raise KerasImportError(f"to_keras: the Keras model has {len(keys)} weights, {model.name!r} has {len(names)}: "
                               f"not the same architecture")
    for i, (key, name, weight) in enumerate(zip(keys, names, weights)):
        shape = np.shape(made[name].value if isinstance(made[name], State) else made[name])
        if key.split("/", 1)[-1] != name.split("/", 1)[-1] or shape != tuple(weight.shape):
            raise KerasImportError(f"to_keras: the Keras model's weight {i} is {key!r} of shape "
                                   f"{tuple(weight.shape)}, {model.name!r}'s is {name!r} of shape {shape}: not the "
                                   f"same architecture")
    return names


__all__ = ["ACTIVATIONS", "SUPPORTED", "Flow", "KerasImportError", "check_config", "from_keras", "to_keras"]
