"""Theano translation of :class:`toolkit.nn.ops_math.MathOps`: elementwise math as the engine's own elementwise ops;
the few it lacks (shifts, gcd, nextafter) as :class:`_JaxElementwise`, the ``jax.numpy`` function itself."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .graphs import Apply, DisconnectedType, JaxOp, ShapeError, tt


class TheanoMathOps:
    def arccos(self, x):
        return tt.arccos(x)

    def arccosh(self, x):
        return tt.arccosh(x)

    def arcsin(self, x):
        return tt.arcsin(x)

    def arcsinh(self, x):
        return tt.arcsinh(x)

    def arctan(self, x):
        return tt.arctan(x)

    def arctanh(self, x):
        return tt.arctanh(x)

    def cosh(self, x):
        return tt.cosh(x)

    def sinh(self, x):
        return tt.sinh(x)

    def tan(self, x):
        return tt.tan(x)

    def arctan2(self, x1, x2):
        return tt.arctan2(x1, x2)

    def expm1(self, x):
        return tt.expm1(x)

    def log1p(self, x):
        return tt.log1p(x)

    def log2(self, x):
        return tt.log2(x)

    def log10(self, x):
        return tt.log10(x)

    def erfc(self, x):
        return tt.erfc(x)

    def erfinv(self, x):
        return tt.erfinv(x)

    def i0(self, x):
        return tt.i0(x)

    def nextafter(self, x1, x2):
        return _JaxElementwise("nextafter")(x1, x2)

    def floor(self, x):
        return tt.floor(x)

    def ceil(self, x):
        return tt.ceil(x)

    def _rint(self, x):
        return tt.round_half_to_even(x)  # tt.round rounds halves away from zero

    def _sign(self, x):
        return tt.sgn(x)

    def _isnan(self, x):
        return tt.isnan(x)

    def _isinf(self, x):
        return tt.isinf(x)

    def _bitwise(self, x1, x2, operation):
        return {"and": tt.and_, "or": tt.or_, "xor": tt.xor}[operation](x1, x2)  # bitwise on integers

    def _invert(self, x):
        return tt.invert(x)

    def _shift(self, x, y, direction):
        return _JaxElementwise(f"{direction}_shift")(x, y)  # the engines have no shift op

    def _gcd(self, x1, x2):
        return _JaxElementwise("gcd")(x1, x2)


class _JaxElementwise(JaxOp):
    """A broadcasting ``jax.numpy`` function (``jnp.<name>``) of arrays of one dtype, for what the engines lack.
    Only ``nextafter`` is differentiable: its gradient is the output's for ``x1`` (TensorFlow's), none for ``x2``;
    the integer functions have no gradient."""

    __props__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name
        self._functions: dict = {}

    def make_node(self, *inputs):
        inputs = [tt.as_tensor_variable(i) for i in inputs]
        ndim = max(i.ndim for i in inputs)
        shapes = [(1,) * (ndim - i.ndim) + tuple(i.type.shape) for i in inputs]
        shape = tuple(None if None in sizes else max(sizes) if min(sizes) != 0 else 0 for sizes in zip(*shapes))
        return Apply(self, inputs, [tt.tensor(dtype=inputs[0].dtype, shape=shape)])

    def function(self):
        if "forward" not in self._functions:
            self._functions["forward"] = getattr(jnp, self.name)
        return self._functions["forward"]

    def infer_shape(self, fgraph, node, shapes):
        shape = node.outputs[0].type.shape
        if None in shape:
            raise ShapeError("an elementwise result of unknown shape")  # the engine then asks the output
        return [tuple(np.int64(size) for size in shape)]

    def connection_pattern(self, node):
        return [[self.name == "nextafter" and i == 0] for i in range(len(node.inputs))]

    def L_op(self, inputs, outputs, output_grads):
        return [output_grads[0], DisconnectedType()()]  # nextafter's; the others are not connected

    pullback = L_op  # PyTensor 3's name for L_op
