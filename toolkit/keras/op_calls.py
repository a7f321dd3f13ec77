"""The steps of an imported program that are not Keras layers (:mod:`toolkit.keras.graph` makes them as it
walks a graph): a ``keras.ops`` call or operator, one output of an operation of several, a constant a custom layer
makes with ``keras.ops.arange``, and a custom layer's own weight; and how an operation's ``keras.ops`` name and the
arguments it was made with are read.
"""

from __future__ import annotations

import inspect
import re

import numpy as np

from toolkit.errors import KerasImportError
from toolkit.keras.translation import Call, Flow

#: Keras operation classes whose ``keras.ops`` name is not their class name in snake case.
OPERATION_NAMES = {"GetItem": "getitem", "AllClose": "allclose", "IsIn": "isin", "SearchSorted": "searchsorted",
                   "CDist": "cdist", "BatchNorm": "batch_normalization", "LayerNorm": "layer_normalization",
                   "RMSNorm": "rms_normalization"}


def operation_name(operation) -> str:
    """The ``keras.ops`` name of a Keras operation object: ``Add`` -> ``add``, ``FFT2`` -> ``fft2``."""
    kind = type(operation).__name__
    return OPERATION_NAMES.get(kind) or re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", kind).lower()


def _resolve(value, p):
    """An operation's argument as the toolkit op takes it: tensors' values in place of :class:`Flow`."""
    if isinstance(value, Flow):
        return value.value
    if isinstance(value, dict):
        return {k: _resolve(v, p) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_resolve(v, p) for v in value)
    return value


class Step:
    """What the importer needs of a program step that is not a Keras layer: a name, its weights (Keras variables,
    in the order of its translation's weights), their values, and its translator. It has no other settings."""

    activity_regularizer = None
    weights: list = []

    def get_config(self) -> dict:
        return {}

    def get_weights(self) -> list:
        return [np.asarray(v.numpy()) for v in self.weights]

    def set_weights(self, values) -> None:
        for variable, value in zip(self.weights, values):
            variable.assign(value)


class OperationStep(Step):
    """A ``keras.ops`` call (or operator) of the graph, computed by the toolkit op of the same name."""

    def __init__(self, operation, op: str, outputs: int):
        self.operation, self.op, self.outputs = operation, op, outputs
        self.name = f"{operation.name} ({type(operation).__name__}: keras.ops.{op})"
        self.weights = []

    def translate(self, call: Call):
        op, several = self.op, self.outputs > 1

        def apply(ops, p, args):
            function = getattr(ops, op)
            bound = inspect.signature(function).bind(**{k: _resolve(v, p) for k, v in args.items()})
            y = function(*bound.args, **bound.kwargs)
            if several:
                y = tuple(y)
                if len(y) != self.outputs:
                    raise KerasImportError(f"the operation {self.name} gave {len(y)} outputs where Keras' has "
                                           f"{self.outputs}")
            return Flow(y, None)

        return {}, apply


class PickStep(Step):
    """One output of an operation of several outputs (``keras.ops.split``, ``top_k``)."""

    def __init__(self, name: str, index: int):
        self.name, self.index, self.weights = f"{name}[{index}]", index, []

    def translate(self, call: Call):
        index = self.index
        return {}, lambda ops, p, args: Flow(args["x"].value[index], None)


class ConstantStep(Step):
    """A constant a custom layer's call makes with ``keras.ops.arange`` (positions): a tensor of the program, so
    that the sub-layers and operations it feeds are steps that train (an ``Embedding`` of positions)."""

    def __init__(self, layer, value: np.ndarray):
        self.name, self.value, self.weights = f"{layer.name} (keras.ops.arange)", value, []

    def translate(self, call: Call):
        value = self.value
        return {}, lambda ops, p, args: Flow(ops.convert_to_tensor(value), None)


class WeightStep(Step):
    """A weight a custom layer makes itself (``add_weight``), as a tensor of the program: the parameter
    ``<layer name>/<weight name>``."""

    def __init__(self, layer, variable):
        self.name, self.layer, self.weights = f"{layer.name}/{variable.name}", layer, [variable]

    def translate(self, call: Call):
        name = self.name
        return {name: self.get_weights()[0]}, lambda ops, p, args: Flow(p[name], None)


def init_arguments(operation, op: str) -> dict:
    """The arguments an operation object was made with (``Mean(axis=1)``), as Keras saved them, else its
    attributes of the same names."""
    saved = getattr(operation, "_auto_config", None)
    if saved is not None:
        return dict(saved.config)
    arguments = {}
    for name, parameter in inspect.signature(type(operation).__init__).parameters.items():
        if name in ("self", "name") or parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if not hasattr(operation, name):
            raise KerasImportError(f"the operation {operation.name!r} (keras.ops.{op}): its argument {name!r} "
                                   "cannot be read back")
        arguments[name] = getattr(operation, name)
    return arguments



__all__ = ["OPERATION_NAMES", "ConstantStep", "OperationStep", "PickStep", "Step", "WeightStep",
           "init_arguments", "operation_name"]
