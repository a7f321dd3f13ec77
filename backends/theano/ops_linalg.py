"""Theano translation of :class:`toolkit.nn.ops_linalg.LinalgOps`."""

from __future__ import annotations

from .graphs import tt  # noqa: F401


class TheanoLinalgOps:
    pass
