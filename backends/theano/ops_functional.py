"""Theano translation of :class:`toolkit.ops.functional.FunctionalOps`."""

from __future__ import annotations

import numpy as np

from .graphs import (
    Apply,
    DisconnectedType,
    FunctionGraph,
    JaxOp,
    Supervisor,
    as_outputs,
    clone_replace,
    get_mode,
    jax,
    jax_funcify,
    outer_values,
    tt,
)


class TheanoFunctionalOps:
    def _custom_gradient(self, inputs, forward):
        outs, backward = forward(inputs)
        # The gradient's graph is built once, from placeholders for the upstream gradients: the engine's grad
        # substitutes them (L_op), and a loop's JAX differentiation runs it as the op's custom_vjp.
        upstream = [o.type() for o in outs]
        grads = backward(upstream)
        floats = [i for i, x in enumerate(inputs) if _is_float(x)]
        grads = [tt.zeros_like(inputs[i]) if grads[i] is None else grads[i] for i in floats]
        outer = outer_values(upstream, grads)
        op = _CustomGradient(upstream, outer, grads, len(inputs), len(outs), floats)
        results = op(*inputs, *outs, *outer)
        return list(results) if isinstance(results, (list, tuple)) else [results]


def _is_float(x) -> bool:
    return x.dtype.startswith("float")


class _CustomGradient(JaxOp):
    """A function's outputs, passed through, with the function's own gradient. Inputs: the function's inputs, its
    outputs, then the values its gradient's graph reads (from ``upstream``, placeholders of the outputs' gradients,
    to ``grads``, one per floating input). The engine's ``grad`` asks :meth:`L_op`, which substitutes the real
    upstream gradients into that graph; under a loop, whose step JAX differentiates, the op is a ``jax.custom_vjp``
    that runs the same graph. The outputs' own graph gets no gradient through here."""

    def __init__(self, upstream, outer, grads, count: int, outputs: int, floats: list[int]) -> None:
        self.upstream, self.outer, self.grads = upstream, outer, grads
        self.count, self.outputs, self.floats = count, outputs, tuple(floats)
        fresh = [v.type() for v in outer]
        inner = clone_replace(grads, replace=dict(zip(outer, fresh))) if grads else []
        self.fgraph = FunctionGraph([*upstream, *fresh], inner, clone=True)
        self.fgraph.attach_feature(Supervisor(self.fgraph.inputs))
        get_mode("JAX").optimizer.rewrite(self.fgraph)
        self._functions: dict = {}

    def __eq__(self, other):
        return self is other  # each call has its own gradient: never merged with another

    def __hash__(self):
        return id(self)

    def make_node(self, *inputs):
        inputs = [tt.as_tensor_variable(i) for i in inputs]
        self.dtypes = [i.dtype for i in inputs]  # the JAX gradient's: its residuals may come as Python numbers
        return Apply(self, inputs, [o.type() for o in inputs[self.count:self.count + self.outputs]])

    def function(self):
        if "forward" not in self._functions:
            count, outputs, floats = self.count, self.outputs, self.floats
            gradient = jax_funcify(self.fgraph) if self.grads else None

            @jax.custom_vjp
            def passed(*inputs):
                return as_outputs(tuple(inputs[count:count + outputs]))

            def forward(*inputs):
                return passed(*inputs), inputs

            def backward(inputs, cotangents):
                cotangents = cotangents if outputs > 1 else (cotangents,)
                found = gradient(*cotangents, *inputs[count + outputs:]) if gradient else ()
                found = found if isinstance(found, (tuple, list)) else (found,)
                grads = dict(zip(floats, found))
                return tuple(jax.numpy.asarray(grads[i], dtype) if i in grads else None
                             for i, dtype in enumerate(self.dtypes))

            passed.defvjp(forward, backward)
            self._functions["forward"] = passed
        return self._functions["forward"]

    def perform(self, node, inputs, outputs):
        for storage, value in zip(outputs, inputs[self.count:self.count + self.outputs]):
            storage[0] = np.array(value, copy=True)

    def infer_shape(self, fgraph, node, shapes):
        return list(shapes[self.count:self.count + self.outputs])

    def connection_pattern(self, node):
        return [[i in self.floats] * len(node.outputs) for i in range(len(node.inputs))]

    def L_op(self, inputs, outputs, output_grads):
        upstream = [tt.zeros_like(o) if isinstance(g.type, DisconnectedType) else g
                    for o, g in zip(outputs, output_grads)]
        replace = dict(zip(self.upstream, upstream))
        replace.update((old, new) for old, new in zip(self.outer, inputs[self.count + self.outputs:]))
        grads = dict(zip(self.floats, clone_replace(self.grads, replace=replace) if self.grads else []))
        return [grads[i] if i in grads else DisconnectedType()() for i in range(len(inputs))]

    pullback = L_op  # PyTensor 3's name for L_op; Aesara calls L_op
