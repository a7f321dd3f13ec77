"""Theano translation of :class:`toolkit.ops.arrays.ArrayOps`: the ops are composites; what the engine gives
here is a constant's value and the bitcast (the engines have no bitcast op: one that is JAX's)."""

from __future__ import annotations

import numpy as np

from .graphs import Apply, Constant, JaxOp, jax, tt


class TheanoArrayOps:
    def _constant_value(self, native):
        return np.asarray(native.data) if isinstance(native, Constant) else None

    def _bitcast(self, x, dtype):
        return _Bitcast(dtype)(x)


class _Bitcast(JaxOp):
    """``x``'s bits as another dtype (``jax.lax.bitcast_convert_type``: a narrower one adds a last axis, a wider
    one removes it); not differentiable. The backend compiles static shapes, so the output's is known."""

    __props__ = ("dtype",)

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype
        self._functions: dict = {}

    def make_node(self, x):
        x = tt.as_tensor_variable(x)
        old, new = np.dtype(x.dtype).itemsize, np.dtype(self.dtype).itemsize
        shape = tuple(x.type.shape)
        shape = shape if old == new else (*shape, old // new) if old > new else shape[:-1]
        return Apply(self, [x], [tt.tensor(dtype=self.dtype, shape=shape)])

    def function(self):
        if "forward" not in self._functions:
            dtype = self.dtype
            self._functions["forward"] = lambda x: jax.lax.bitcast_convert_type(x, dtype)
        return self._functions["forward"]

    def infer_shape(self, fgraph, node, shapes):
        return [node.outputs[0].type.shape]
