"""TensorFlow set-up that must happen around ``import tensorflow``. Imports TensorFlow only if already imported."""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.util
import os
import re
import sys
import tempfile

from toolkit.backend.logical_devices import apply_logical_devices

# Lines the GPU build of TensorFlow writes to the C-level stderr at import and at runtime start on a machine without
# an NVIDIA driver, which TF_CPP_MIN_LOG_LEVEL does not silence because absl is not initialised yet
# (tensorflow#100442). Only these are dropped, and the cuInit failure only where no driver is installed (elsewhere it
# is a real error); anything else printed meanwhile is passed through.
_NO_DRIVER = not os.path.exists("/proc/driver/nvidia/version")
_STARTUP_NOISE = re.compile(
    r"All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|cudart_stub\.cc:\d+\] Could not find cuda drivers on your machine, GPU will not be used"
    + (r"|cuda_platform\.cc:\d+\] failed call to cuInit: .*\(303\)" if _NO_DRIVER else "")
)


def set_quiet_defaults() -> None:
    """Default TensorFlow's C++ logging to errors only and oneDNN off (its custom ops reorder floating-point sums,
    which the parity tests would see). A value the user already set is kept."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")


@contextlib.contextmanager
def filtered_stderr():
    """Capture file descriptor 2 while the body runs, then replay it without TensorFlow's known start-up noise."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            for line in capture.read().decode(errors="replace").splitlines(keepends=True):
                if not _STARTUP_NOISE.search(line):
                    sys.stderr.write(line)
            sys.stderr.flush()


@functools.cache
def import_framework():
    """Import TensorFlow quietly and give it the logical CPU devices asked for with ``toolkit.use_logical_devices``.

    Returns:
        The ``tensorflow`` module.
    """
    set_quiet_defaults()
    with filtered_stderr():
        import tensorflow as tf
    apply_logical_devices(sys.modules[__name__], "TensorFlow")
    return tf


def _started() -> bool:
    """Whether TensorFlow's runtime has fixed its devices (only possible once tensorflow is imported)."""
    if "tensorflow" not in sys.modules:
        return False
    from tensorflow.python.eager import context  # private, but the only way to ask without starting the runtime

    return bool(context.context()._initialized)


def _configured_count():
    tf = sys.modules["tensorflow"]
    config = tf.config.get_logical_device_configuration(tf.config.list_physical_devices("CPU")[0])
    return len(config) if config else 1


def logical_devices_problem(n: int) -> str | None:
    """Why TensorFlow cannot get ``n`` logical CPU devices now, or None if it can."""
    if _started() and _configured_count() != n:
        return (f"TensorFlow has already started with {_configured_count()} CPU device(s) "
                "(tf.config cannot change virtual devices after initialisation; any TensorFlow op starts it, and "
                "so does building a Keras model: call toolkit.use_logical_devices before using Keras)")
    return None


def configure_logical_devices(n: int) -> None:
    """Split the host CPU into ``n`` logical devices: now if TensorFlow is imported, else the moment it is imported,
    by whatever imports it (Keras does, and building a Keras model starts TensorFlow's runtime, after which its
    devices are fixed: tensorflow#25138)."""
    if "tensorflow" not in sys.modules:
        _OnImport.install(n)
        return
    if _started() and _configured_count() == n:
        return
    tf = sys.modules["tensorflow"]
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * n)


class _OnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when ``tensorflow`` is about to be imported, it lets the other finders find it and makes
    its loader configure the logical devices once the package has run (before anything can start the runtime)."""

    count: int | None = None

    @classmethod
    def install(cls, n: int) -> None:
        cls.count = n
        if not any(isinstance(finder, cls) for finder in sys.meta_path):
            sys.meta_path.insert(0, cls())

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "tensorflow":
            return None
        sys.meta_path.remove(self)  # once: the import that follows, and any later one, is TensorFlow's own
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            if _OnImport.count is not None:
                configure_logical_devices(_OnImport.count)

        spec.loader.exec_module = exec_module  # this import's loader only, so the module keeps its own loader
        return spec
