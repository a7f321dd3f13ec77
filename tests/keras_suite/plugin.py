"""The pytest plugin that runs Keras' op tests on a toolkit backend (``-p tests.keras_suite.plugin``; the command
in :mod:`tests.keras_suite.__main__` sets it up).

In each process that runs tests (every xdist worker, or the one process), it replaces ``keras.ops`` before the test
modules are imported (:func:`~tests.keras_suite.replacement.install`) and records what each test called; the
record and the error's kind travel with the test's report (``user_properties``, which xdist sends to the
controller). The controller (or the one process) gathers them and writes them as JSON (``--suite-report``).
With ``--keras-reference`` nothing is replaced: Keras' own ops run, their calls recorded (the eligible tests).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.keras_suite import sdist
from tests.keras_suite.replacement import RECORDER, Runner, install

#: The name of the user property that carries a test's record to the controller.
PROPERTY = "keras_suite"
#: Keras' backends without a trainer: Keras' own conftest.py skips ``requires_trainable_backend`` tests on them.
TRAINLESS_KERAS_BACKENDS = ("numpy", "openvino")
#: Each test's outcome and record, gathered by the controller (nodeid -> entry).
TESTS: dict[str, dict] = {}


def pytest_addoption(parser) -> None:
    group = parser.getgroup("keras_suite", "Keras' op tests on a toolkit backend")
    group.addoption("--toolkit-backend", help="the toolkit backend whose ops replace keras.ops")
    group.addoption("--keras-tests", help="the root of the unpacked Keras tests (sdist.unpacked_tests)")
    group.addoption("--perturb", action="store_true", help="perturb every toolkit result (the self-test)")
    group.addoption("--keras-reference", action="store_true",
                    help="replace nothing: Keras' own ops, calls recorded (which tests are eligible)")
    group.addoption("--suite-report", help="where the controller writes each test's outcome and record (JSON)")


def _is_worker(config) -> bool:
    return hasattr(config, "workerinput")


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "requires_trainable_backend: needs a Keras backend that trains (Keras' own)")
    sdist.KerasTestFinder.install(Path(config.getoption("keras_tests")))
    reference = config.getoption("keras_reference")
    name = config.getoption("toolkit_backend")
    if not (name or reference):
        raise pytest.UsageError("tests.keras_suite.plugin needs --toolkit-backend or --keras-reference")
    if _is_worker(config) or not getattr(config.option, "numprocesses", None):  # this process runs tests
        install(None if reference else Runner(name, perturb=config.getoption("perturb")))


def pytest_collection_modifyitems(config, items) -> None:
    # Keras' own conftest.py (in its repository, not in the sdist) skips these on its NumPy backend, which cannot train.
    from keras.src.backend import backend

    if backend() in TRAINLESS_KERAS_BACKENDS:
        skip = pytest.mark.skip(reason=f"requires_trainable_backend: Keras' {backend()} backend cannot train")
        for item in items:
            if "requires_trainable_backend" in item.keywords:
                item.add_marker(skip)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    RECORDER.reset()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when != "call":
        return
    error = None
    if call.excinfo is not None and not call.excinfo.errisinstance(pytest.skip.Exception):
        from toolkit.errors import ComputeError, ToolkitError

        value = call.excinfo.value
        refused = isinstance(value, ToolkitError) and not isinstance(value, ComputeError)
        message = str(value).strip().splitlines()
        error = {"type": type(value).__name__, "refused": refused, "message": (message[0] if message else "")[:300]}
    outcome.get_result().user_properties.append((PROPERTY, {"record": RECORDER.record.as_dict(), "error": error}))


def pytest_runtest_logreport(report) -> None:
    """On the controller (and in a run without workers): a test's outcome over its phases, and its record."""
    entry = TESTS.setdefault(report.nodeid, {"nodeid": report.nodeid, "outcome": "passed", "record": None,
                                             "error": None, "seconds": 0.0})
    entry["seconds"] = round(entry["seconds"] + report.duration, 3)
    if report.skipped:
        entry["outcome"] = "skipped"
    elif report.failed and entry["outcome"] != "skipped":
        entry["outcome"] = "failed"
        if report.when != "call" and entry["error"] is None:
            entry["error"] = {"type": f"error in {report.when}", "refused": False, "message": ""}
    for key, value in report.user_properties:
        if key == PROPERTY:
            entry["record"] = value["record"]
            entry["error"] = value["error"] or entry["error"]


def pytest_sessionfinish(session, exitstatus) -> None:
    path = session.config.getoption("suite_report")
    if path and not _is_worker(session.config):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(sorted(TESTS.values(), key=lambda t: t["nodeid"]), indent=1))
