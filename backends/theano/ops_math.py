"""Theano translation of :class:`toolkit.ops.math.MathOps`: elementwise math as the engine's own elementwise ops;
``nextafter``, which they lack, as :class:`~.graphs.JaxElementwise`, the ``jax.numpy`` function itself."""

from __future__ import annotations

from .graphs import JaxElementwise, tt


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
        return JaxElementwise("nextafter")(x1, x2)

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
