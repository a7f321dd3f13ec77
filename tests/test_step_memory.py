"""The Theano family's set-up that keeps a step's memory between calls (backends/theano/environment.py,
compiling.py): glibc's malloc settings, applied unless the user set its variables; one-device CPU computations run in
the calling thread; a large NumPy input copied to the device before the call. Whether a step then faults its memory
in again is measured (``ru_minflt``), not tested: a subprocess test of it failed once in CI, not reproduced."""

from __future__ import annotations

import importlib
import os
import platform
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import THEANO, needs_backend

pytestmark = needs_backend(THEANO)


def _module(name: str):
    return importlib.import_module(f"toolkit.backends.{THEANO}.{name}")


def _python(program: str, *args: str, env: dict) -> str:
    done = subprocess.run([sys.executable, "-c", program, *args], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_step_memory_is_kept_unless_the_user_set_mallocs_variables(monkeypatch):
    """glibc's malloc keeps freed memory for the next step, except where the user set one of its variables or its
    tunables (a call returns whether it changed anything; glibc's settings cannot be read back)."""
    environment = _module("environment")
    for variable in (*environment.MALLOC_VARIABLES, "GLIBC_TUNABLES"):
        monkeypatch.delenv(variable, raising=False)
    for variable in environment.MALLOC_VARIABLES:
        monkeypatch.setenv(variable, "65536")
        assert not environment.keep_step_memory(), variable
        monkeypatch.delenv(variable)
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=65536")
    assert not environment.keep_step_memory()
    monkeypatch.delenv("GLIBC_TUNABLES")
    assert environment.keep_step_memory() == (platform.libc_ver()[0] == "glibc")


#: The bytes glibc maps afresh for a 64 MiB block malloc'ed after the engine (argv[1]) is imported: 0 where its
#: settings keep large blocks on the heap (glibc's default maps any block over 32 MiB).
_MAPPED_PROGRAM = """
import ctypes, sys, toolkit
class Info(ctypes.Structure):  # glibc's struct mallinfo2 (2.33+)
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                 "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype, libc.malloc.restype = Info, ctypes.c_void_p
toolkit.get_backend(sys.argv[1])
before = libc.mallinfo2().hblkhd
block = libc.malloc(64 << 20)
print(libc.mallinfo2().hblkhd - before)
libc.free(ctypes.c_void_p(block))
"""


def _has_mallinfo2() -> bool:
    import ctypes

    try:
        return hasattr(ctypes.CDLL("libc.so.6"), "mallinfo2")
    except OSError:
        return False


@pytest.mark.skipif(not _has_mallinfo2(), reason="glibc 2.33 or later (mallinfo2) only")
def test_importing_the_engine_keeps_large_blocks_on_the_heap():
    """In a fresh process, importing the engine applies glibc's settings (a 64 MiB block is not mapped afresh), and
    leaves glibc alone where the user set one of its variables (the block is mapped, glibc's default)."""
    environment = _module("environment")
    env = {k: v for k, v in os.environ.items() if k not in (*environment.MALLOC_VARIABLES, "GLIBC_TUNABLES")}
    assert _python(_MAPPED_PROGRAM, THEANO, env=env) == "0"
    user = {**env, environment.MALLOC_VARIABLES[-1]: "131072"}
    assert int(_python(_MAPPED_PROGRAM, THEANO, env=user)) >= 64 << 20


#: The async-dispatch flag (argv[1]) as JAX alone sets it (from the environment), without the engine; and as the
#: engine (argv[2]) leaves it once imported.
_FLAG_PROGRAM = "import sys, jax; print(jax.config.values.get(sys.argv[1]))"
_ENGINE_FLAG_PROGRAM = ("import sys, toolkit, jax; toolkit.get_backend(sys.argv[2]); "
                        "print(jax.config.values.get(sys.argv[1]))")


def test_importing_the_engine_has_jax_run_one_device_computations_in_the_calling_thread():
    """In a fresh process, importing the engine turns JAX's CPU async dispatch off (so that a one-device step's
    scratch memory comes from the calling thread's heap and is kept: measured, a 128 MiB-scratch call faulted
    32,800 pages a call with it on, none with it off; jax 0.4.30 has it off already), unless the user set its
    variable: then the engine leaves it as JAX set it."""
    environment = _module("environment")
    flag, variable = environment.ASYNC_DISPATCH_FLAG, environment.ASYNC_DISPATCH_ENV
    env = {k: v for k, v in os.environ.items() if k != variable}
    assert _python(_ENGINE_FLAG_PROGRAM, flag, THEANO, env=env) in ("False", "None")  # None: a JAX without it
    user = {**env, variable: "1"}
    assert _python(_ENGINE_FLAG_PROGRAM, flag, THEANO, env=user) == _python(_FLAG_PROGRAM, flag, env=user)


def test_a_one_device_calls_large_numpy_inputs_are_copied_before_it_runs():
    """A one-device call's NumPy inputs of XLA's asynchronous copy size or more are put on the CPU device and copied
    before the call (so that XLA runs it in the calling thread, whose heap keeps its scratch memory); smaller ones,
    other values and device arrays are passed as they are."""
    compiling = _module("compiling")
    jax = compiling.jax  # the engine's JAX
    device = jax.devices("cpu")[0]
    large = np.ones(compiling.INLINE_COPY_BYTES // 4, np.float32)  # exactly the size: copied asynchronously
    small, placed = np.ones(compiling.INLINE_COPY_BYTES // 4 - 1, np.float32), jax.device_put(np.ones(2), device)
    args = compiling._ready_on(device, (small, large, placed, 7))
    assert args[0] is small and args[2] is placed and args[3] == 7
    assert isinstance(args[1], jax.Array) and args[1].devices() == {device} and args[1].is_ready()
    np.testing.assert_array_equal(np.asarray(args[1]), large)
    unchanged = (small, placed)
    assert compiling._ready_on(device, unchanged) is unchanged
