"""How :func:`toolkit.from_keras` reads a Keras model's graph: the calls of its layers, its ``keras.ops`` calls and
operators, and the inside of custom layers, as one program of :class:`~toolkit.keras.translation.Call` steps in an
order that computes each tensor before its use.

- A Keras layer of :data:`~toolkit.keras.layers.SUPPORTED` is one step, translated by its translator.
- A ``keras.ops`` call or an operator on Keras tensors (``x + y``, ``x[:, 0]``, ``keras.ops.mean(x, axis=1)``) is
  recorded by Keras as an ``Operation`` node; it becomes the toolkit op of the same name (``ops.add``,
  ``ops.getitem``, ``ops.mean``) called with the same arguments (:class:`~toolkit.keras.op_calls.OperationStep`).
  An operation the toolkit lacks, or an argument its op does not take, is a :class:`~toolkit.KerasImportError`
  naming it.
- A custom ``Layer`` subclass (one not defined by Keras), or a Keras model used as a layer, is opened up: its
  ``call`` is run on fresh symbolic inputs, which records its inside as a graph of layers and operations, read the
  same way. Its own weights (``add_weight``) are parameters ``<layer name>/<weight name>``
  (:class:`~toolkit.keras.op_calls.WeightStep`).
  What cannot be traced that way is refused, naming the layer and why: ``call`` failing on symbolic tensors (Python
  control flow on values, a weight assigned, ``add_loss``), a graph that depends on ``training``, a constant the
  trace computed from weights (a sub-layer called on a constant, or an operation on a sub-layer's weight alone:
  found by tracing again with other weights), a weight the trace does not read, a sub-layer's weight read directly
  (weight tying), a Keras mask reaching a layer that takes one, and an ``activity_regularizer`` on it. Python
  values the layer computes from static shapes are fixed at import; ``keras.ops.arange`` of such values (keras.io's
  ``TokenAndPositionEmbedding``: an ``Embedding`` of ``ops.arange(0, maxlen)`` positions) is a constant of the
  program (:class:`~toolkit.keras.op_calls.ConstantStep`), and the sub-layers it feeds train.
"""

from __future__ import annotations

import inspect

import numpy as np

from toolkit.errors import KerasImportError
from toolkit.keras.layers import SUPPORTED
from toolkit.keras.op_calls import (
    OPERATION_NAMES,
    ConstantStep,
    OperationStep,
    PickStep,
    Step,
    WeightStep,
    init_arguments,
    operation_name,
)
from toolkit.keras.translation import Call, MaskOf, Slot


def _refuse(layer, why: str) -> KerasImportError:
    return KerasImportError(f"layer {layer.name!r} ({type(layer).__name__}): {why}")


def _traced(layer) -> bool:
    """Whether ``layer`` is opened up: a Keras model used as a layer, or a layer class Keras does not define."""
    import keras

    return isinstance(layer, keras.Model) or (type(layer).__name__ not in SUPPORTED
                                              and not type(layer).__module__.startswith("keras."))


def _sequence(model) -> list:
    """A Sequential model's layers in order, with those of Sequential models inside it (a frozen base) in their
    place."""
    import keras

    return [inner for layer in model.layers
            for inner in (_sequence(layer) if isinstance(layer, keras.Sequential) else [layer])]


def _ordered(nodes_by_depth: dict) -> list:
    return [node for depth in sorted(nodes_by_depth, reverse=True) for node in nodes_by_depth[depth]]


def _constants(nodes: list) -> list[np.ndarray]:
    """The constant tensors (computed while the graph was built) among the arguments of ``nodes``, in order."""
    import keras

    return [np.asarray(keras.ops.convert_to_numpy(v)) for node in nodes
            for v in keras.tree.flatten((list(node.arguments.args), dict(node.arguments.kwargs)))
            if keras.ops.is_tensor(v) and not isinstance(v, (keras.KerasTensor, keras.Variable))]


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"


class _Walker:
    """Builds the program: ``calls`` in order; tensor ``i`` is input ``i`` for ``i < inputs``, then the output of
    call ``i - inputs``."""

    def __init__(self, inputs: int):
        self.inputs, self.calls = inputs, []
        self.names: dict[str, int] = {}  # layer name -> id(layer): parameters are named by layer names
        self.reached: set[int] = set()  # ids of the Keras variables some step reads
        self.weights: dict[int, int] = {}  # id(own weight of a custom layer) -> its tensor's number
        self.weight_at: dict[int, int] = {}  # the other way round

    def _emit(self, call: Call) -> int:
        self.calls.append(call)
        return self.inputs + len(self.calls) - 1

    def _template(self, value, slots: dict, mask_of: dict):
        from keras import KerasTensor, Variable

        if isinstance(value, KerasTensor):
            if id(value) not in slots:
                return MaskOf(slots[mask_of[id(value)]])
            slot = slots[id(value)]
            if slot in self.weight_at:
                self.reached.add(self.weight_at[slot])
            return Slot(slot)
        if isinstance(value, Variable):
            if id(value) not in self.weights:
                raise KerasImportError(f"an operation reads the weight {value.path!r} directly (weight tying, or a "
                                       "sub-layer's weight), which from_keras cannot translate: only a custom "
                                       "layer's own weights (add_weight) can be read by its operations")
            self.reached.add(id(value))
            return Slot(self.weights[id(value)])
        if isinstance(value, dict):
            return {k: self._template(v, slots, mask_of) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self._template(v, slots, mask_of) for v in value)
        if hasattr(value, "numpy") and hasattr(value, "dtype") and not isinstance(value, np.ndarray):
            return np.asarray(value.numpy())  # a constant tensor computed while Keras built the graph
        return value

    def walk(self, nodes: list, slots: dict, mask_of: dict) -> None:
        """Adds the steps of ``nodes`` (in order), whose input tensors are numbered in ``slots``."""
        import keras

        for node in nodes:
            if node.is_input or node.operation is None or \
                    any(id(t) not in slots and mask_of.get(id(t)) not in slots for t in node.input_tensors):
                continue  # an input, or a call of a shared layer in another graph (as Keras skips it)
            operation = node.operation
            if not isinstance(operation, keras.layers.Layer):
                if not all(id(t) in mask_of for t in node.outputs):
                    self._operation(node, slots, mask_of)
            elif _traced(operation):
                takes_mask = operation.supports_masking or "mask" in inspect.signature(operation.call).parameters
                if takes_mask and any(getattr(t, "_keras_mask", None) is not None for t in node.input_tensors):
                    raise _refuse(operation, "a Keras mask reaches this custom layer, which from_keras does not "
                                             "pass into one")
                outputs = self.open(operation, node.arguments.args, node.arguments.kwargs, slots)
                if len(outputs) != len(node.outputs):
                    raise _refuse(operation, f"its call gave {len(outputs)} outputs where the model's graph has "
                                             f"{len(node.outputs)}")
                slots.update((id(t), index) for t, index in zip(node.outputs, outputs))
            else:
                self._layer(node, slots, mask_of)

    def _layer(self, node, slots: dict, mask_of: dict) -> None:
        layer = node.operation
        if self.names.setdefault(layer.name, id(layer)) != id(layer):
            raise _refuse(layer, "another layer of the model has the same name, and from_keras names parameters "
                                 "by layer names (give the layers inside custom layers distinct names)")
        signature = inspect.signature(layer.call)
        # Keras' __call__ takes ``training`` for every layer and passes it on only to a call that has it (a model
        # used as a layer records it on the nodes of layers without it).
        kwargs = {k: v for k, v in node.arguments.kwargs.items() if k != "training" or k in signature.parameters}
        bound = signature.bind(*node.arguments.args, **kwargs)
        arguments = {name: self._template(value, slots, mask_of) for name, value in bound.arguments.items()}
        masked = any(getattr(t, "_keras_mask", None) is not None for t in node.input_tensors)
        call = Call(layer, tuple(node.input_tensors[0].shape), arguments, masked)
        if len(node.outputs) != 1:
            SUPPORTED[type(layer).__name__](call)  # refuses the argument that gives it several (return_state)
            raise _refuse(layer, f"has {len(node.outputs)} outputs; from_keras supports layers of one output")
        self.reached.update(id(v) for v in layer.weights)
        slots[id(node.outputs[0])] = self._emit(call)

    def _operation(self, node, slots: dict, mask_of: dict) -> None:
        from toolkit.ops.interface import Ops
        from toolkit.ops.table import PLUMBING

        operation = node.operation
        op = operation_name(operation)
        if op.startswith("_") or op in PLUMBING or not callable(getattr(Ops, op, None)):
            raise KerasImportError(f"the functional graph calls the operation {operation.name!r} "
                                   f"({type(operation).__name__}, keras.ops.{op}), which the toolkit's ops do not "
                                   "have")
        try:
            named = dict(inspect.signature(operation.call).bind(*node.arguments.args, **node.arguments.kwargs)
                         .arguments)
        except TypeError as error:
            raise KerasImportError(f"the operation {operation.name!r} ({type(operation).__name__}) was called in a "
                                   f"way from_keras cannot read: {error}") from error
        named.update(init_arguments(operation, op))
        try:
            inspect.signature(getattr(Ops, op)).bind(None, **named)
        except TypeError as error:
            raise KerasImportError(f"the operation {operation.name!r} (keras.ops.{op}) has arguments "
                                   f"{sorted(named)}, which the toolkit's ops.{op} does not take: {error}") from error
        arguments = {name: self._template(value, slots, mask_of) for name, value in named.items()}
        tensors = node.input_tensors
        step = OperationStep(operation, op, len(node.outputs))
        index = self._emit(Call(step, tuple(tensors[0].shape) if tensors else (), arguments))
        if len(node.outputs) == 1:
            slots[id(node.outputs[0])] = index
            return
        for i, tensor in enumerate(node.outputs):
            slots[id(tensor)] = self._emit(Call(PickStep(operation.name, i), (), {"x": Slot(index)}))

    @staticmethod
    def _trace(layer, args, kwargs, training, inputs) -> tuple[list, list, list]:
        """The outputs of ``layer.call`` on symbolic inputs, the nodes that compute them, in order, and the
        constants its ``keras.ops.arange`` calls made: ``(symbolic stand-in, value)``."""
        import keras
        from keras.src.ops.function import Function

        given = kwargs if training is None else {**kwargs, "training": training}
        made, arange = [], keras.ops.arange

        # Keras computes arange of Python numbers (a static length) at once, and a sub-layer called on it too (an
        # Embedding of positions: a constant that would never train). A symbolic stand-in of the same value keeps
        # what the call does with it in the graph.
        def symbolic_arange(*arguments, **options):
            value = arange(*arguments, **options)
            if isinstance(value, keras.KerasTensor):
                return value
            stand_in = keras.Input(batch_shape=tuple(value.shape), dtype=keras.backend.standardize_dtype(value.dtype))
            made.append((stand_in, np.asarray(keras.ops.convert_to_numpy(value))))
            return stand_in

        keras.ops.arange = symbolic_arange
        try:
            outputs = keras.tree.flatten(layer.call(*args, **given))
            if not all(isinstance(t, keras.KerasTensor) for t in outputs):
                raise TypeError("an output is not computed from the layer's inputs")
            function = Function([*inputs, *(stand_in for stand_in, _ in made)], outputs)
        except Exception as error:  # any failure of the user's call on symbolic tensors
            raise _refuse(layer, "its call cannot be traced on symbolic Keras tensors, which from_keras needs to "
                                 "read it as a graph of layers and keras.ops (Python control flow on values, a "
                                 "weight assigned, add_loss?): "
                                 f"{_first_line(error)}") from error
        finally:
            keras.ops.arange = arange
        return outputs, _ordered(function._nodes_by_depth), made

    def open(self, layer, args, kwargs, slots: dict) -> list[int]:
        """Adds the inside of a custom layer (or a model used as a layer) called with ``args`` and ``kwargs``
        (Keras tensors numbered in ``slots``), traced on fresh symbolic inputs; returns its outputs' numbers."""
        import keras

        if getattr(layer, "activity_regularizer", None) is not None:
            raise _refuse(layer, "activity_regularizer on a custom layer is not supported")
        policy = layer.dtype_policy
        if type(policy).__name__ != "DTypePolicy" or policy.compute_dtype != policy.variable_dtype:
            raise _refuse(layer, f"dtype={policy.name!r} is not supported: the trainer's dtype= sets the precision "
                                 "of the whole model")
        outer = [t for t in keras.tree.flatten((list(args), dict(kwargs)))
                 if isinstance(t, keras.KerasTensor) and id(t) in slots]
        fresh = {id(t): keras.Input(batch_shape=t.shape, dtype=t.dtype) for t in outer}
        inputs = [fresh[id(t)] for t in outer]
        inside = {id(w) for sub in layer._flatten_layers(include_self=False) for w in sub.weights}
        own = [v for v in layer.weights if id(v) not in inside]
        for variable in own:
            self.weights[id(variable)] = self._emit(Call(WeightStep(layer, variable), tuple(variable.shape), {}))
            self.weight_at[self.weights[id(variable)]] = id(variable)
        # Keras computes an operation on weights alone (softplus(self.scale)) at once, as a constant: the weights
        # the layer holds as attributes are replaced by symbolic inputs while it is traced, so that it is recorded.
        held = {name: value for name, value in vars(layer).items()
                if isinstance(value, keras.Variable) and id(value) in self.weights}
        stand_ins = {name: keras.Input(batch_shape=v.shape, dtype=v.dtype) for name, v in held.items()}
        inputs += list(stand_ins.values())

        def renew(value):
            if isinstance(value, keras.KerasTensor):
                return fresh[id(value)]
            if isinstance(value, (list, tuple)):
                return type(value)(renew(v) for v in value)
            if isinstance(value, dict):
                return {k: renew(v) for k, v in value.items()}
            return value

        args, kwargs = renew(list(args)), renew(dict(kwargs))
        kwargs.pop("mask", None)
        modes = (False, True) if "training" in inspect.signature(layer.call).parameters else (None,)
        traces = []
        for name, stand_in in stand_ins.items():
            object.__setattr__(layer, name, stand_in)  # past Keras' tracking of attributes
        weights = list(layer.weights)
        saved = [np.array(v.numpy()) for v in weights]
        try:
            for training in modes:
                traces.append(self._trace(layer, args, kwargs, training, inputs))
            # A constant the trace computed from weights (ops.transpose(self.dense.kernel): Keras computes an
            # operation on weights alone at once) would never train: traced again with other weights, it changes.
            for variable, value in zip(weights, saved):
                variable.assign(value * 1.5 + 1.0)
            moved = self._trace(layer, args, kwargs, modes[0], inputs)[1]
        finally:
            for name, variable in held.items():
                object.__setattr__(layer, name, variable)
            for variable, value in zip(weights, saved):
                variable.assign(value)
        if any(a.shape != b.shape or not np.array_equal(a, b)
               for a, b in zip(_constants(traces[0][1]), _constants(moved))):
            raise _refuse(layer, "its call computes a constant from weights at trace time (an operation on a "
                                 "sub-layer's weight alone, such as ops.transpose(self.dense.kernel), or a "
                                 "sub-layer called on a constant), which would never train: from_keras cannot "
                                 "translate it")
        if len(traces) == 2 and [type(n.operation) for n in traces[0][1]] != \
                [type(n.operation) for n in traces[1][1]]:
            raise _refuse(layer, "its call computes a different graph in training and in inference (a branch on "
                                 "training), which from_keras cannot translate: the trainer sets the mode")
        outputs, nodes, made = traces[0]
        inner = {id(fresh[id(t)]): slots[id(t)] for t in outer}
        inner.update((id(stand_in), self._emit(Call(ConstantStep(layer, value), value.shape, {})))
                     for stand_in, value in made)
        inner.update((id(stand_ins[name]), self.weights[id(v)]) for name, v in held.items())
        inner_masks = {id(t._keras_mask): id(t) for n in reversed(nodes) for t in n.outputs
                       if getattr(t, "_keras_mask", None) is not None}
        self.walk(nodes, inner, inner_masks)
        missing = [v.path for v in layer.weights if id(v) not in self.reached]
        if missing:
            raise _refuse(layer, f"its weights {missing} are not read by its graph on symbolic inputs (a sub-layer "
                                 "called on a constant other than keras.ops.arange's is computed once with the "
                                 "current weights and would never train): from_keras cannot translate it")
        return [inner[id(t)] for t in outputs]


def graph(keras_model) -> tuple[list[Call], int | list[int]]:
    """The program of ``keras_model``: its steps in an order that computes each input before its use, and the
    number of its output tensor, or a list of them for a model whose outputs are a list (tensors ``0 .. n - 1``
    are its ``n`` inputs, in the order of ``keras_model.inputs``).

    Raises:
        KerasImportError: not a Sequential or functional model, inputs or outputs given as a dict, or a layer,
            operation or custom layer that cannot be translated (named).
    """
    import keras

    if isinstance(keras_model, keras.Sequential):
        walker, slot = _Walker(1), 0
        for layer in _sequence(keras_model):
            inputs = layer.input
            shape = tuple((inputs[0] if isinstance(inputs, (list, tuple)) else inputs).shape)
            if _traced(layer):
                x = keras.KerasTensor(shape, dtype=(inputs[0] if isinstance(inputs, (list, tuple)) else inputs).dtype)
                (slot,) = walker.open(layer, [x], {}, {id(x): slot})
                continue
            if walker.names.setdefault(layer.name, id(layer)) != id(layer):
                raise _refuse(layer, "another layer of the model has the same name")
            first = next(iter(inspect.signature(layer.call).parameters))
            walker.reached.update(id(v) for v in layer.weights)
            slot = walker._emit(Call(layer, shape, {first: Slot(slot)}))  # a Sequential model has no merges
        return walker.calls, slot
    if not isinstance(keras_model, keras.Model) or getattr(keras_model, "_nodes_by_depth", None) is None:
        raise KerasImportError(f"from_keras takes a keras.Sequential or functional keras.Model, got "
                               f"{type(keras_model).__name__} (a subclassed model's call is Python the toolkit "
                               "cannot read)")
    if not isinstance(keras_model._inputs_struct, (list, tuple)) and len(keras_model.inputs) > 1 or \
            not isinstance(keras_model._outputs_struct, (list, tuple)) and len(keras_model.outputs) > 1:
        raise KerasImportError("from_keras takes a model whose inputs and outputs are one tensor or a list of "
                               "them (inputs or outputs given as a dict are not supported)")
    nodes = _ordered(keras_model._nodes_by_depth)
    # Keras computes masks with operations of their own in the graph (an Embedding's ``ids != 0``, a merge's OR)
    # and passes them to later layers as ``mask=``; the translators compute masks themselves, so those operations
    # are left out and a mask argument reads the mask of the tensor it belongs to.
    # A mask that layers pass on is one tensor carried by several outputs: it is read from the first (in reverse
    # order, the first one written wins).
    mask_of = {id(t._keras_mask): id(t) for node in reversed(nodes) for t in node.outputs
               if getattr(t, "_keras_mask", None) is not None}
    walker = _Walker(len(keras_model.inputs))
    slots = {id(tensor): i for i, tensor in enumerate(keras_model.inputs)}
    walker.walk(nodes, slots, mask_of)
    if any(id(tensor) not in slots for tensor in keras_model.outputs):
        raise KerasImportError("an output of the model is not computed from its inputs by layers and operations, "
                               "which from_keras cannot translate")
    outputs = [slots[id(tensor)] for tensor in keras_model.outputs]
    # Keras' Functional.call unpacks a list of one output (unpack_singleton): that model predicts, scores and logs
    # one output, under the names of a model of one output.
    several = isinstance(keras_model._outputs_struct, (list, tuple)) and len(outputs) > 1
    return walker.calls, outputs if several else outputs[0]


__all__ = ["OPERATION_NAMES", "ConstantStep", "OperationStep", "PickStep", "Step", "WeightStep", "graph",
           "operation_name"]
