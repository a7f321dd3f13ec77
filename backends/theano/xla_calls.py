"""A Python function on raw buffers as an operation of a compiled JAX step on the CPU, under a JAX before
``jax.ffi`` (Aesara's 0.4.30): an XLA custom call whose target is a ctypes function of XLA's custom-call ABI
(``void(void* out, const void** ins, void* status)``), which reads the inputs and writes the result in XLA's own
buffers: no copy, no NumPy array. ``jax.pure_callback`` copies every input and result through Python there: 5 ms
for an 8 MiB convolution pass against 0.25 ms here (the pass itself ~1.5 ms; the bench ResNet's step makes 26 such
calls). Imports JAX.

From ``jax.ffi`` (jax 0.5) XLA logs an error at every call of that ABI on CPU (it is being removed) and wants its
typed FFI; a ctypes handler of the typed FFI worked alone but failed inside larger steps under jax 0.10.2 (oneDNN's
input gradient refused its arguments, or the process crashed, where the same pass through ``jax.pure_callback`` is
right), so callers use ``jax.pure_callback`` there (:func:`available` says which). Only float32 results so far."""

from __future__ import annotations

import ctypes
import functools
import logging
import math

import jax
import numpy as np

_LOG = logging.getLogger(__name__)
#: The custom-call ABI before ``jax.ffi`` (API_VERSION_STATUS_RETURNING): result, inputs, status.
_ABI = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)


def available() -> bool:
    """Whether :class:`HostFunction` runs under this JAX (one before ``jax.ffi``)."""
    return not hasattr(jax, "ffi")


class HostFunction:
    """``fn(result_address, *input_addresses)`` as an operation of a compiled step with a float32 result of
    ``shape``, row-major buffers; registered with XLA once (target ``name``), kept alive by this object. A failure
    cannot be reported through XLA's status (jaxlib does not export its setter): the result is filled with NaN,
    which the step's finiteness rules refuse, and the error is logged.

    Args:
        name: the custom call's target name, unique in the process.
        fn: writes the result at its first argument from the inputs at the others.
        shape: the result's shape.
        arity: the number of inputs.
    """

    def __init__(self, name: str, fn, shape, arity: int) -> None:
        self.name, self.shape = name, tuple(shape)
        size = math.prod(self.shape)

        def handler(out, ins, status):
            try:
                fn(out, *(ins[i] for i in range(arity)))
            except Exception:  # noqa: BLE001 - XLA's thread cannot take a Python exception
                _LOG.exception("%s failed; its result is NaN", name)
                np.frombuffer((ctypes.c_float * size).from_address(out), np.float32)[:] = np.nan

        self._c_function = _ABI(handler)
        from jax.lib import xla_client

        xla_client.register_custom_call_target(name, _capsule(self._c_function), platform="cpu", api_version=0)

    def __call__(self, *arrays):
        """The operation on ``arrays`` (traced or concrete), a float32 array of :attr:`shape`."""
        return _custom_call_primitive().bind(*arrays, target=self.name, shape=self.shape)


def _capsule(c_function):
    """A C function pointer as the capsule XLA's registry takes."""
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.cast(c_function, ctypes.c_void_p), b"xla._CUSTOM_CALL_TARGET", None)


@functools.cache
def _custom_call_primitive():
    """A JAX primitive lowered to an XLA custom call of ``target`` on the CPU with a float32 result of ``shape``
    and row-major buffers."""
    from jax import core
    from jax.interpreters import mlir

    primitive = core.Primitive("multigpu_host_function")
    primitive.def_impl(lambda *arrays, **params: jax.jit(functools.partial(primitive.bind, **params))(*arrays))
    primitive.def_abstract_eval(lambda *arrays, target, shape: core.ShapedArray(shape, np.float32))

    def row_major(rank: int) -> list[int]:
        return list(range(rank - 1, -1, -1))

    def lower(ctx, *operands, target, shape):
        return mlir.custom_call(target, result_types=[mlir.aval_to_ir_type(ctx.avals_out[0])],
                                operands=list(operands), api_version=2,
                                operand_layouts=[row_major(len(a.shape)) for a in ctx.avals_in],
                                result_layouts=[row_major(len(shape))]).results

    mlir.register_lowering(primitive, lower, platform="cpu")
    return primitive
