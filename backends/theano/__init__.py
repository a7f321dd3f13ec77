"""The Theano family's implementation, written once for its two engines: Aesara and PyTensor.

This folder's modules are not imported from this package. Each engine's package (``toolkit.backends.aesara``,
``toolkit.backends.pytensor``) puts the folder on its ``__path__`` (:func:`engine_path`), so
``toolkit.backends.pytensor.backend`` is this folder's ``backend.py`` loaded as a module of the PyTensor package,
and its relative import ``from . import engine`` finds that package's ``engine.py``: the one place where the
engines differ (their name, flags variable, linker modes, moved symbols and the JAX conversions one of them lacks).
Everything else (graph building, gradients, step compilation, JAX placement, natives) is here.
"""

from __future__ import annotations

import os


def engine_path(package_path: list[str]) -> list[str]:
    """An engine package's ``__path__``: its own folder first (``engine.py``), then this family's."""
    return [*package_path, os.path.dirname(os.path.abspath(__file__))]
