"""Theano translation of :class:`toolkit.nn.ops_math.MathOps`."""

from __future__ import annotations

from .graphs import tt  # noqa: F401


class TheanoMathOps:
    pass
