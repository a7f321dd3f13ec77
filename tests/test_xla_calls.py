"""A Python function on XLA's own buffers as an operation of a compiled step (backends/theano/kernels/xla_calls.py):
under both JAX ABIs (jax 0.4.30's custom calls, jax 0.10's typed FFI) the step reads the inputs and takes
the result at their addresses, among other operations XLA may run beside it; a failure is not a silent number."""

from __future__ import annotations

import ctypes
import itertools
import math

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from toolkit.backends.theano.kernels import xla_calls  # noqa: E402

_NAMES = itertools.count()
pytestmark = pytest.mark.skipif(not xla_calls.available(), reason="a JAX whose typed FFI xla_calls does not speak "
                                "(the caller uses jax.pure_callback there)")


def _floats(address: int, shape) -> np.ndarray:
    return np.frombuffer((ctypes.c_float * math.prod(shape)).from_address(address), np.float32).reshape(shape)


def _host_function(fn, shape, arity):
    return xla_calls.HostFunction(f"multigpu_test_{next(_NAMES)}", fn, shape, arity)


def test_a_host_function_reads_its_inputs_and_writes_its_result_in_a_compiled_step():
    shape = (3, 5)

    def weighted_sum(out, a, b):
        _floats(out, shape)[:] = 2 * _floats(a, shape) + _floats(b, shape)

    host = _host_function(weighted_sum, shape, 2)

    @jax.jit
    def step(x, y):  # independent calls XLA may run at once, and one that needs both
        first, second = host(jax.numpy.sin(x), y), host(x, jax.numpy.cos(y))
        return host(first, second) - 1.0

    x, y = np.random.default_rng(0).standard_normal((2, *shape)).astype(np.float32)
    first, second = 2 * np.sin(x) + y, 2 * x + np.cos(y)
    np.testing.assert_allclose(step(x, y), 2 * first + second - 1.0, rtol=1e-6, atol=1e-6)


def test_a_failing_host_function_fails_the_step():
    def broken(out, a):
        raise RuntimeError("no result")

    host = _host_function(broken, (4,), 1)
    x = np.ones(4, np.float32)
    if hasattr(jax, "ffi"):  # the typed FFI reports the error: the step raises it
        with pytest.raises(Exception, match=r"multigpu_test_\d+: RuntimeError: no result"):
            np.asarray(jax.jit(host)(x))
    else:  # the old ABI's status cannot be set from here: NaN, which the trainer's finiteness rules refuse
        assert np.isnan(np.asarray(jax.jit(host)(x))).all()
