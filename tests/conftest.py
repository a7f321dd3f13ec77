"""Fixtures shared by every test: backends (skipped with a reason when not installed) and device counts.

The process gets MAX_DEVICES logical CPU devices before any framework starts, so every test can use 1..4 devices.
"""

from __future__ import annotations

import pytest

import toolkit
from toolkit.registry import REGISTRY

#: Device counts every multi-device test runs with.
DEVICE_COUNTS = (1, 2, 4)
MAX_DEVICES = max(DEVICE_COUNTS)

toolkit.use_logical_devices(MAX_DEVICES)

INSTALLED = set(toolkit.available_backends())


def needs_backend(name: str):
    """Skips a test when backend ``name`` is not installed, with the command that installs it."""
    return pytest.mark.skipif(name not in INSTALLED,
                              reason=f"backend {name} is not installed ({REGISTRY[name].install_command})")


BACKEND_PARAMS = [pytest.param(name, marks=needs_backend(name), id=name) for name in REGISTRY]

#: Marks a test that needs every backend installed. It also gets the ``parity`` marker, so the nox session that
#: installs both backends (``-m parity``) runs it and the single-backend sessions (``-m "not parity"``) leave it out.
needs_all_backends = pytest.mark.both_backends


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m selection reads the markers
def pytest_collection_modifyitems(config, items):
    missing = sorted(set(REGISTRY) - INSTALLED)
    for item in items:
        if item.get_closest_marker("both_backends"):
            item.add_marker(pytest.mark.parity)
            if missing:
                item.add_marker(pytest.mark.skip(
                    reason=f'needs every backend; missing: {", ".join(missing)} (pip install "multigpu-toolkit[all]")'))


@pytest.fixture(params=BACKEND_PARAMS)
def backend_name(request) -> str:
    return request.param


@pytest.fixture
def backend(backend_name):
    return toolkit.get_backend(backend_name)


@pytest.fixture(params=DEVICE_COUNTS, ids=lambda n: f"{n}dev")
def n_devices(request) -> int:
    return request.param
