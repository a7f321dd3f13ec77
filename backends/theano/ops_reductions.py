"""Theano translation of :class:`toolkit.nn.ops_reductions.ReductionOps`."""

from __future__ import annotations

from .graphs import tt  # noqa: F401


class TheanoReductionOps:
    pass
