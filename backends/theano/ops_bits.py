"""Theano translation of :class:`toolkit.ops.bits.BitOps`: the engine's own bitwise ops; the shifts and gcd,
which the engines lack, as :class:`~.graphs.JaxElementwise`, the ``jax.numpy`` function itself."""

from __future__ import annotations

from .graphs import JaxElementwise, tt


class TheanoBitOps:
    def _bitwise(self, x1, x2, operation):
        return {"and": tt.and_, "or": tt.or_, "xor": tt.xor}[operation](x1, x2)  # bitwise on integers

    def _invert(self, x):
        return tt.invert(x)

    def _shift(self, x, y, direction):
        return JaxElementwise(f"{direction}_shift")(x, y)  # the engines have no shift op

    def _gcd(self, x1, x2):
        return JaxElementwise("gcd")(x1, x2)
