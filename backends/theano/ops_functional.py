"""Theano translation of :class:`toolkit.nn.ops_functional.FunctionalOps`."""

from __future__ import annotations

import numpy as np

from toolkit.errors import ArgumentError

from .graphs import Apply, DisconnectedType, JaxOp, as_outputs, tt


class TheanoFunctionalOps:
    def _custom_gradient(self, inputs, forward):
        if self._scan_depth:
            raise ArgumentError("ops.custom_gradient inside scan, map or another loop is not supported on "
                                "Aesara/PyTensor: their loop differentiates its step with JAX, which would not see the "
                                "custom gradient; call the function outside the loop")
        outs, backward = forward(inputs)
        results = _CustomGradient(backward, len(inputs))(*inputs, *outs)
        return list(results) if isinstance(results, (list, tuple)) else [results]


def _is_float(x) -> bool:
    return x.dtype.startswith("float")


class _CustomGradient(JaxOp):
    """The outputs of a function, passed through (its last inputs), with the function's own gradient: ``grad`` asks
    :meth:`L_op`, which calls the user's ``backward`` for the function's inputs (the first ``count`` inputs) and
    gives the outputs' graph none, so that gradient is the only one that reaches the inputs through here."""

    def __init__(self, backward, count: int) -> None:
        self.backward, self.count = backward, count
        self._functions: dict = {}

    def __eq__(self, other):
        return self is other  # each call has its own gradient: never merged with another

    def __hash__(self):
        return id(self)

    def make_node(self, *inputs):
        inputs = [tt.as_tensor_variable(i) for i in inputs]
        return Apply(self, inputs, [o.type() for o in inputs[self.count:]])

    def function(self):
        count = self.count
        return lambda *inputs: as_outputs(tuple(inputs[count:]))

    def perform(self, node, inputs, outputs):
        for storage, value in zip(outputs, inputs[self.count:]):
            storage[0] = np.array(value, copy=True)

    def infer_shape(self, fgraph, node, shapes):
        return list(shapes[self.count:])

    def connection_pattern(self, node):
        return [[i < self.count and _is_float(x)] * len(node.outputs) for i, x in enumerate(node.inputs)]

    def L_op(self, inputs, outputs, output_grads):
        upstream = [tt.zeros_like(o) if isinstance(g.type, DisconnectedType) else g
                    for o, g in zip(outputs, output_grads)]
        grads = self.backward(upstream)
        found = []
        for i, x in enumerate(inputs):
            if i < self.count and _is_float(x):
                found.append(tt.zeros_like(x) if grads[i] is None else grads[i])
            else:
                found.append(DisconnectedType()())
        return found

    pullback = L_op  # PyTensor 3's name for L_op; Aesara calls L_op
