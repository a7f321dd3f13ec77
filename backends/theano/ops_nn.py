"""Theano translation of :class:`toolkit.nn.ops_nn.NNOps`."""

from __future__ import annotations

from .graphs import tt  # noqa: F401


class TheanoNNOps:
    pass
