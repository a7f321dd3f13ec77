"""Activations, losses and normalizations of ``keras.ops.nn`` (``leaky_relu``, ``elu``, ``binary_crossentropy``,
``normalize``...).

Part of :class:`~toolkit.nn.ops.Ops`: a backend implements the primitives (the abstract methods, listed in
:data:`ARGUMENTS` with how their array arguments are converted) on natives; the composites are written once, here.
"""

from __future__ import annotations

from abc import ABC

#: How each primitive's array arguments are converted (the letters of :data:`toolkit.nn.ops.ARGUMENTS`).
ARGUMENTS: dict[str, str] = {}


class NNOps(ABC):
    """Mixed into :class:`~toolkit.nn.ops.Ops`."""
