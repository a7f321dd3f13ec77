"""Finding and loading backends by name."""

from __future__ import annotations

import pytest

import toolkit
from toolkit.backend import registry


def test_available_backends_are_those_whose_modules_are_all_installed_in_registry_order(monkeypatch):
    specs = [registry.BackendSpec(name, f"toolkit.backends.{name}", requires, requires, name)
             for name, requires in (("first", ("json",)), ("partial", ("json", "no_such_framework_xyz")),
                                    ("missing", ("no_such_framework_xyz",)), ("last", ("json", "csv")))]
    monkeypatch.setattr(registry, "REGISTRY", {spec.name: spec for spec in specs})
    assert toolkit.available_backends() == ["first", "last"]


def test_unknown_backend_names_the_known_ones():
    with pytest.raises(toolkit.BackendUnavailableError, match="unknown backend 'torch'; known backends: tensorflow"):
        toolkit.get_backend("torch")
    with pytest.raises(ImportError):  # BackendUnavailableError is an ImportError
        toolkit.get_backend(None)


def test_missing_framework_gives_the_pip_command(monkeypatch):
    spec = registry.BackendSpec("fake", "toolkit.backends.fake", ("no_such_framework_xyz",), ("no_such_framework_xyz",),
                                "fake")
    monkeypatch.setitem(registry.REGISTRY, "fake", spec)
    assert "fake" not in toolkit.available_backends()
    with pytest.raises(toolkit.BackendUnavailableError) as info:
        toolkit.get_backend("fake")
    assert "missing: no_such_framework_xyz" in str(info.value)
    assert 'pip install "multigpu-toolkit[fake]"' in str(info.value)


def test_same_name_and_options_give_the_same_backend(backend_name):
    assert toolkit.get_backend(backend_name) is toolkit.get_backend(backend_name)
    assert toolkit.get_backend(backend_name).name == backend_name
