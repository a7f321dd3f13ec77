"""The Theano family's CPU sums under a JAX whose XLA makes slow reduce-windows of them (backends/theano/
reductions.py), and the set-up that keeps a step's scratch memory (backends/theano/environment.py): the levels give
NumPy's sums, leave XLA no reduce-window, and apply only where they were measured to pay; a step's scratch memory is
not faulted in again at every call. Pure JAX."""

from __future__ import annotations

import math
import os
import re
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from tests.conftest import THEANO, needs_backend  # noqa: E402
from toolkit.backends.theano.reductions import LEVEL, PLAIN_SUMS_FROM, levelled, levelled_sum  # noqa: E402

#: (shape, axes): a batch normalization's sum (leading axes, a multiple of the level), middle and trailing axes, a
#: length that is not a multiple of the level (padded), every axis, axes that are not adjacent (jnp.sum), a sum of
#: at most one level (jnp.sum), an empty array.
CASES = (((64, 8, 8, 3), (0, 1, 2)), ((3, 50, 7, 2), (1, 2)), ((4, 5, 1000), (2,)), ((2, 3, 4, 5), None),
         ((40, 3, 40), (0, 2)), ((5, 32), (1,)), ((0, 70), (1,)))


@pytest.mark.parametrize("shape, axes", CASES)
def test_levelled_sums_give_numpys_sums(shape, axes):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32) + 3
    found = np.asarray(jax.jit(lambda a: levelled_sum(a, axes))(x))
    expected = x.astype(np.float64).sum(axis=axes)
    assert found.shape == expected.shape and found.dtype == np.float32
    # A float32 sum of up to 3,000 entries: each level adds a few units in the last place.
    np.testing.assert_allclose(found, expected, rtol=1e-6, atol=1e-6)


def _reduce_window_operands(hlo: str) -> list[int]:
    """The sizes of the arrays XLA's compiled ``hlo`` reduces with reduce-windows."""
    return [math.prod(int(d) for d in dims.split(",") if d)
            for dims in re.findall(r"reduce-window\(\w+\[([0-9,]*)\]", hlo)]


def test_levelled_sums_leave_xla_no_reduce_window_over_the_input():
    """What the levels are for: XLA's tree-reduction pass (before jax 0.10) turns a plain sum of more than the level
    into a reduce-window over the whole input, slow on a CPU. The levels' first sum is within the pass's window
    (XLA merges the later, small levels back and may make a reduce-window of those: 1/32 of the input or less)."""
    x = jax.ShapeDtypeStruct((128, 16, 16, 8), np.float32)
    size = math.prod(x.shape)
    levels = _reduce_window_operands(jax.jit(lambda a: levelled_sum(a, (0, 1, 2))).lower(x).compile().as_text())
    assert all(n <= size // LEVEL for n in levels)
    if tuple(jax.__version_info__) < PLAIN_SUMS_FROM:  # the pass is there: the plain sum shows it
        plain = jax.jit(lambda a: a.sum(axis=(0, 1, 2))).lower(x).compile().as_text()
        assert size in _reduce_window_operands(plain)


def test_sums_are_levelled_on_a_cpu_before_the_measured_jax_only():
    assert levelled("cpu", "float32", (0, 4, 30)) and levelled("cpu", np.float64, (0, 4, 30))
    assert not levelled("cpu", "float32", PLAIN_SUMS_FROM)  # XLA's own sums are as fast there
    assert not levelled("gpu", "float32", (0, 4, 30)) and not levelled("cpu", "int32", (0, 4, 30))
    assert not levelled("cpu", "float16", (0, 4, 30))  # jnp.sum accumulates it in float32: left to it


@needs_backend(THEANO)
def test_step_memory_is_kept_unless_the_user_set_mallocs_variables(monkeypatch):
    """glibc's malloc keeps freed memory for the next step, except where the user set one of its variables or its
    tunables (a call returns whether it changed anything; glibc's settings cannot be read back)."""
    import importlib
    import platform

    environment = importlib.import_module(f"toolkit.backends.{THEANO}.environment")
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


#: A one-device JAX computation whose scratch memory (a 128 MiB product) is larger than a glibc thread arena's heap,
#: called 7 times after a first call; prints the median of the calls' minor page faults and the async-dispatch flag
#: after the engine's import.
_SCRATCH_PROGRAM = """
import resource, sys
import toolkit
toolkit.get_backend(sys.argv[1])  # imports the engine: its set-up applies
import jax, jax.numpy as jnp
x = jnp.ones((8192, 64), jnp.float32)
w = jnp.ones((64, 4096), jnp.float32)
step = jax.jit(lambda x, w: jnp.sort(x @ w, axis=0)[0].sum())
step(x, w).block_until_ready()
faults = []
for _ in range(7):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    step(x, w).block_until_ready()
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(sorted(faults)[3], jax.config.values.get("jax_cpu_enable_async_dispatch"))
"""


#: The async-dispatch flag as JAX alone sets it (from the environment), without the engine.
_JAX_FLAG = "import jax; print(jax.config.values.get('jax_cpu_enable_async_dispatch'))"


@needs_backend(THEANO)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc settings: Linux only")
def test_a_one_device_steps_scratch_memory_is_not_faulted_in_again_at_every_call():
    """In a fresh process that imports the engine, a one-device computation runs in the calling thread (where JAX
    has the flag) and its scratch memory is reused: without the engine's set-up, each call faulted in its 128 MiB
    again (about 32,800 pages; checked); where the user set the flag, it stays theirs."""
    import platform
    import subprocess

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc's malloc settings")
    env = {k: v for k, v in os.environ.items() if k not in ("GLIBC_TUNABLES", "JAX_CPU_ENABLE_ASYNC_DISPATCH")
           and not k.startswith("MALLOC_")}
    faults, flag = subprocess.run([sys.executable, "-c", _SCRATCH_PROGRAM, THEANO], env=env, check=True,
                                  capture_output=True, text=True).stdout.split()
    assert int(faults) < 2_000  # the 128 MiB block is 32,768 pages: faulted in again at most now and then
    assert flag in ("False", "None")  # None: a JAX without the flag
    user = {**env, "JAX_CPU_ENABLE_ASYNC_DISPATCH": "1"}
    chosen = subprocess.run([sys.executable, "-c", _SCRATCH_PROGRAM, THEANO], check=True, capture_output=True,
                            text=True, env=user).stdout.split()[1]
    jaxs_own = subprocess.run([sys.executable, "-c", _JAX_FLAG], check=True, capture_output=True, text=True,
                              env=user).stdout.strip()
    assert chosen == jaxs_own  # True under jax 0.10; jax 0.4.30 reads no variable and defaults to False


@needs_backend(THEANO)
def test_a_one_device_calls_large_host_inputs_are_copied_before_it_runs():
    """A one-device call's NumPy inputs larger than XLA's inline copy are put on the CPU device and copied before
    the call (so that XLA runs it in the calling thread, whose heap keeps its scratch memory); smaller ones and
    device arrays are passed as they are."""
    import importlib

    compiling = importlib.import_module(f"toolkit.backends.{THEANO}.compiling")
    device = jax.devices("cpu")[0]
    large = np.ones(compiling.INLINE_COPY_BYTES // 4 + 1, np.float32)
    small, placed = np.ones(3, np.float32), jax.device_put(np.ones(2), device)
    args = compiling._ready_on(device, [small, large, placed, 7])
    assert args[0] is small and args[2] is placed and args[3] == 7
    assert isinstance(args[1], jax.Array) and args[1].devices() == {device} and args[1].is_ready()
    np.testing.assert_array_equal(np.asarray(args[1]), large)
    unchanged = [small, placed]
    assert compiling._ready_on(device, unchanged) is unchanged
