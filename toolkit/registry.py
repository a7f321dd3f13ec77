"""Backends by name: the installed ones, and one loaded by name with its options (``from toolkit.registry import
get_backend``). Finding a backend never imports its framework; loading one does.

The public names of :mod:`toolkit.backend.registry`, where they are written and documented.
"""

from toolkit.backend.registry import REGISTRY, BackendSpec, available_backends, backend_class, get_backend

__all__ = ["REGISTRY", "BackendSpec", "available_backends", "backend_class", "get_backend"]
