"""Theano translation of :class:`toolkit.nn.ops_arrays.ArrayOps`."""

from __future__ import annotations

from .graphs import tt  # noqa: F401


class TheanoArrayOps:
    pass
