"""Fixtures shared by every test: backends (skipped with a reason when not installed) and device counts.

The process gets MAX_DEVICES logical CPU devices before any framework starts, so every test can use 1..4 devices.
"""

from __future__ import annotations

import pytest

import toolkit
from toolkit.backend.registry import REGISTRY

#: Device counts every multi-device test runs with.
DEVICE_COUNTS = (1, 2, 4)
MAX_DEVICES = max(DEVICE_COUNTS)

toolkit.use_logical_devices(MAX_DEVICES)

INSTALLED = set(toolkit.available_backends())

#: The Theano family's backends. They cannot share an environment (Aesara needs NumPy 1, PyTensor 3 NumPy 2), so an
#: environment has at most one of them, which the parity tests compare with TensorFlow.
THEANO_FAMILY = ("aesara", "pytensor")
#: This environment's Theano-family backend (Aesara where both are, in a hand-made environment), or "aesara" where
#: neither is, so that skips name the install command of the default one.
THEANO = next((name for name in THEANO_FAMILY if name in INSTALLED), THEANO_FAMILY[0])
#: The backends the parity tests compare.
PARITY = ("tensorflow", THEANO)


def needs_backend(name: str):
    """Skips a test when backend ``name`` is not installed, with the command that installs it."""
    return pytest.mark.skipif(name not in INSTALLED,
                              reason=f"backend {name} is not installed ({REGISTRY[name].install_command})")


BACKEND_PARAMS = [pytest.param(name, marks=needs_backend(name), id=name) for name in REGISTRY]

#: Marks a test that compares the backends of :data:`PARITY` (TensorFlow and this environment's Theano-family one). It
#: also gets the ``parity`` marker, so the nox sessions that install both (``-m parity``) run it and the
#: single-backend sessions (``-m "not parity"``) leave it out.
needs_all_backends = pytest.mark.both_backends


#: Test files whose tests each run a whole program for tens of seconds (the README's programs and usage lines, fits
#: killed and resumed, several processes, the bench, the examples, the command line, an installed wheel). They run
#: first: pytest-xdist hands out tests in collection order, and a long test taken last keeps one core busy while the
#: other worker has nothing left to do.
LONG_FIRST = ("test_readme.py", "test_resume.py", "test_packaging.py", "test_distributed.py", "test_bench.py",
              "test_examples.py", "test_cli.py")


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m selection reads the markers
def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: item.path.name not in LONG_FIRST)  # stable: each file's tests keep their order
    missing = [name for name in PARITY if name not in INSTALLED]
    for item in items:
        if item.get_closest_marker("both_backends"):
            item.add_marker(pytest.mark.parity)
            if missing:
                item.add_marker(pytest.mark.skip(
                    reason=f'needs {" and ".join(PARITY)}; missing: {", ".join(missing)} '
                           f'(pip install "multigpu-toolkit[tensorflow,aesara]" or "[tensorflow,pytensor]")'))


@pytest.fixture(params=BACKEND_PARAMS)
def backend_name(request) -> str:
    return request.param


@pytest.fixture
def backend(backend_name):
    return toolkit.get_backend(backend_name)


@pytest.fixture(params=DEVICE_COUNTS, ids=lambda n: f"{n}dev")
def n_devices(request) -> int:
    return request.param


@pytest.fixture(scope="module")
def keras():
    """Keras in float64, TensorFlow started with the toolkit's logical devices first (Keras' import starts it); skips
    where Keras is not installed. Modules whose Keras may run without TensorFlow define their own."""
    from tests.helpers import keras_in_float64

    pytest.importorskip("keras", reason='needs keras (pip install "multigpu-toolkit[tensorflow]")')
    toolkit.get_backend("tensorflow")
    import keras

    with keras_in_float64(keras):
        yield keras
