"""The neutral op interface model code is written against (``from toolkit.ops import Ops, Tensor``, for annotations).

A model's ``forward(ops, params, x)`` and ``loss(ops, outputs, y)`` receive an :class:`Ops` of the backend that
runs them and :class:`Tensor` values; :mod:`toolkit.ops.interface` and :mod:`toolkit.ops.tensor` define and document
both.
"""

from toolkit.ops.interface import Ops
from toolkit.ops.tensor import Tensor

__all__ = ["Ops", "Tensor"]
