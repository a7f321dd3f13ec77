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

from tests.conftest import THEANO, needs_backend

pytestmark = needs_backend(THEANO)


def _module(name: str):
    return importlib.import_module(f"toolkit.backends.{THEANO}.{name}")


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


#: The async-dispatch flag (argv[1]) as JAX alone sets it (from the environment), without the engine; and as the
#: engine (argv[2]) leaves it once imported.
_FLAG_PROGRAM = "import sys, jax; print(jax.config.values.get(sys.argv[1]))"
_ENGINE_FLAG_PROGRAM = ("import sys, toolkit, jax; toolkit.get_backend(sys.argv[2]); "
                        "print(jax.config.values.get(sys.argv[1]))")


def _python(program: str, *args: str, env: dict) -> str:
    done = subprocess.run([sys.executable, "-c", program, *args], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


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
