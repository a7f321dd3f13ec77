"""Theano translation of :class:`toolkit.nn.ops_core.CoreOps`."""

from __future__ import annotations

from .graphs import tt  # noqa: F401


class TheanoCoreOps:
    pass
