"""Theano translation of :class:`toolkit.ops.sorting.SortingOps`: the argsort is a :class:`~.graphs.JaxOp`,
since neither engine converts its sort ops to JAX."""

from __future__ import annotations

from .graphs import Apply, DisconnectedType, JaxOp, jax, tt


class TheanoSortingOps:
    def _argsort(self, x, axis):
        return _ArgSort(axis)(x)


class _ArgSort(JaxOp):
    """Stable ascending argsort along ``axis`` with NaN last: ``jnp.argsort``, as NumPy's stable sort orders."""

    __props__ = ("axis",)

    def __init__(self, axis: int) -> None:
        self.axis = axis
        self._functions: dict = {}

    def make_node(self, x):
        x = tt.as_tensor_variable(x)
        return Apply(self, [x], [tt.tensor(dtype="int32", shape=x.type.shape)])

    def function(self):
        if "forward" not in self._functions:
            axis = self.axis
            # int32 whatever jax_enable_x64 says (the engine's JAX backend sets it from floatX).
            self._functions["forward"] = lambda x: jax.numpy.argsort(x, axis=axis, stable=True).astype("int32")
        return self._functions["forward"]

    def infer_shape(self, fgraph, node, shapes):
        return shapes

    def connection_pattern(self, node):
        return [[False]]

    def L_op(self, inputs, outputs, output_grads):
        return [DisconnectedType()()]

    pullback = L_op  # PyTensor 3's name for L_op
