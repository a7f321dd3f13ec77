"""Backends by name. Finding one never imports its framework; loading one does."""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from toolkit.errors import BackendUnavailableError

if TYPE_CHECKING:
    from toolkit.backend.interface import Backend


@dataclass(frozen=True)
class BackendSpec:
    """Where a backend lives and what it needs.

    Attributes:
        name: the public name (``get_backend(name)``).
        package: the package holding its ``backend.py`` and ``environment.py``.
        requires: top-level modules that must be installed.
        framework_modules: modules whose presence in ``sys.modules`` means the framework may have started.
        extra: the ``pip`` extra that installs it.
    """

    name: str
    package: str
    requires: tuple[str, ...]
    framework_modules: tuple[str, ...]
    extra: str

    @property
    def install_command(self) -> str:
        """The ``pip`` command that installs the backend with its framework, for error messages."""
        return f'pip install "multigpu-toolkit[{self.extra}]"'

    def installed(self) -> bool:
        """Whether every module of ``requires`` can be imported, found without importing it."""
        return all(importlib.util.find_spec(module) is not None for module in self.requires)

    def environment(self) -> ModuleType:
        """The backend's framework-free ``environment`` module (logical devices, quiet logs)."""
        return importlib.import_module(f"{self.package}.environment")


#: Every backend by name: where it lives, what it needs installed and the ``pip`` extra that installs it.
REGISTRY: dict[str, BackendSpec] = {
    spec.name: spec
    for spec in (
        BackendSpec("tensorflow", "toolkit.backends.tensorflow", ("tensorflow",), ("tensorflow",), "tensorflow"),
        BackendSpec("aesara", "toolkit.backends.aesara", ("aesara", "jax"), ("aesara", "jax"), "aesara"),
        BackendSpec("pytensor", "toolkit.backends.pytensor", ("pytensor", "jax"), ("pytensor", "jax"), "pytensor"),
    )
}

_loaded: dict[tuple[str, tuple[tuple[str, Any], ...]], Backend] = {}


def available_backends() -> list[str]:
    """Names of the installed backends, found without importing any framework."""
    return [name for name, spec in REGISTRY.items() if spec.installed()]


def backend_class(name: str) -> type[Backend]:
    """The class of the backend called ``name``, importing its module (and framework) without making a backend
    object: what :func:`toolkit.distributed.initialize` calls :meth:`~toolkit.Backend.join` on before the
    framework's devices start.

    Args:
        name: a registered backend name.

    Returns:
        The backend's class (a :class:`toolkit.Backend`).

    Raises:
        BackendUnavailableError: (an ``ImportError``) the name is unknown, or the framework is not installed; the
            message gives the ``pip`` command that fixes it.
    """
    spec = REGISTRY.get(name) if isinstance(name, str) else None
    if spec is None:
        raise BackendUnavailableError(f"unknown backend {name!r}; known backends: {', '.join(REGISTRY)}")
    if not spec.installed():
        missing = [m for m in spec.requires if importlib.util.find_spec(m) is None]
        raise BackendUnavailableError(
            f"backend {name!r} is not installed (missing: {', '.join(missing)}); fix: {spec.install_command}"
        )
    try:
        module = importlib.import_module(f"{spec.package}.backend")
    except ImportError as error:
        raise BackendUnavailableError(
            f"backend {name!r} failed to import ({error}); reinstall with: {spec.install_command}"
        ) from error
    return module.Backend


def get_backend(name: str, **options: Any) -> Backend:
    """The backend called ``name`` (``"tensorflow"``, ``"aesara"`` or ``"pytensor"``), loading its framework on first
    use. Loading Aesara or PyTensor changes two process-wide settings so that their steps keep their memory between
    calls (getting started says why and how to opt out): on Linux, glibc's malloc keeps freed memory (not where the
    user set glibc's malloc variables), and JAX's CPU client runs one-device computations in the calling thread (not
    where ``JAX_CPU_ENABLE_ASYNC_DISPATCH`` is set, or JAX had already started).

    Args:
        name: a registered backend name.
        **options: backend options, e.g. ``get_backend("aesara", linker="c")`` for Aesara's C linker (one device).
            The same name and options return the same object.

    Raises:
        BackendUnavailableError: (an ``ImportError``) the name is unknown, or the framework is not installed; the
            message gives the ``pip`` command that fixes it.
    """
    key = (name, tuple(sorted(options.items()))) if isinstance(name, str) else None
    if key in _loaded:
        return _loaded[key]
    backend = backend_class(name)(**options)
    _loaded[key] = backend
    return backend
