"""The backend interface and the backends' registry: what a framework provides to the core.

- ``interface.py``: :class:`~toolkit.Backend`, the primitives every backend implements (devices,
  placement, compiled functions, the optional fused step, the part across processes);
- ``composed.py``: the multi-device methods written once on those primitives (split, average, sum, a parted
  model's gradient);
- ``registry.py``: backends by name, found without importing their frameworks, with the install command of each;
- ``logical_devices.py``: the logical CPU devices this process asked for, given to each framework as it loads.

The backends themselves are in ``toolkit.backends`` (``backends/`` in the repository).
"""

from toolkit.backend.interface import Backend

__all__ = ["Backend"]
