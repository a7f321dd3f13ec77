"""Products and linear algebra: ``einsum``, ``tensordot``, ``dot``, ``vdot``, ``inner``, ``outer``, ``kron``, ``cross``,
``correlate``, ``trapezoid``, ``cdist`` (``keras.ops.numpy``) and what ``keras.ops.linalg`` has that models use.

Part of :class:`~toolkit.nn.ops.Ops`: a backend implements the primitives (the abstract methods, listed in
:data:`ARGUMENTS` with how their array arguments are converted) on natives; the composites are written once, here.
"""

from __future__ import annotations

from abc import ABC

#: How each primitive's array arguments are converted (the letters of :data:`toolkit.nn.ops.ARGUMENTS`).
ARGUMENTS: dict[str, str] = {}


class LinalgOps(ABC):
    """Mixed into :class:`~toolkit.nn.ops.Ops`."""
