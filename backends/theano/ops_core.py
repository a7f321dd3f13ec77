"""Theano translation of :class:`toolkit.ops.core.CoreOps`."""

from __future__ import annotations

from .graphs import tt, zero_grad


class TheanoCoreOps:
    def stop_gradient(self, variable):
        return zero_grad(variable)

    def _scatter_rows(self, x, rows, updates, reduction):
        write = tt.set_subtensor if reduction is None else tt.inc_subtensor
        return tt.specify_shape(write(x[rows], updates), tuple(x.type.shape))
