"""A Python function on raw buffers as an operation of a compiled JAX step on the CPU: an XLA custom call whose
target is a ctypes function that reads the inputs and writes the result in XLA's own buffers: no copy, no NumPy
array. ``jax.pure_callback`` copies every input and result through Python, which under jax 0.4.30 cost several
times the convolution pass it called (the bench ResNet's step makes 26 such calls; docs/guides/benchmarks.md has the
measurement). Imports JAX.

Two ABIs, by JAX version: before ``jax.ffi`` (jax 0.4.30: Aesara's, and PyTensor's ``pytensor-jax04`` extra) the
custom-call ABI ``void(void* out, const void** ins, void* status)``; from ``jax.ffi`` (jax 0.10: the ``pytensor``
extra's), where XLA logs an error at every call of that ABI on the CPU, XLA's typed FFI (``xla/ffi/api/c_api.h``,
which jaxlib ships): a handler of one ``XLA_FFI_CallFrame*`` that answers XLA's metadata query (the FFI version it
speaks), runs only in the execute stage (the one a handler registered alone is called in), and reports a failure as
an ``XLA_FFI_Error``, which the step raises. The typed FFI is used under the JAX whose headers these structures were
checked against (jax 0.10); another JAX with ``jax.ffi`` gets ``jax.pure_callback`` from the caller
(:func:`available`). Only float32 results so far."""

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
    """Whether :class:`HostFunction` runs under this JAX: one before ``jax.ffi`` (the old custom-call ABI), or one
    of :data:`TYPED_FFI_JAX` (the typed FFI structures below were checked against its headers)."""
    return not hasattr(jax, "ffi") or _ffi_version_supported()


class HostFunction:
    """``fn(result_address, *input_addresses)`` as an operation of a compiled step with a float32 result of
    ``shape``, row-major buffers; registered with XLA once (target ``name``), kept alive by this object. A failure
    is logged; under ``jax.ffi`` the step then raises XLA's error with the message, before it the result is NaN
    (jaxlib does not export the old ABI's status setter), which the step's finiteness rules refuse.

    Args:
        name: the custom call's target name, unique in the process.
        fn: writes the result at its first argument from the inputs at the others.
        shape: the result's shape.
        arity: the number of inputs.
    """

    def __init__(self, name: str, fn, shape, arity: int) -> None:
        self.name, self.shape = name, tuple(shape)
        if hasattr(jax, "ffi"):
            self._c_function = _typed_handler(name, fn, arity)
            jax.ffi.register_ffi_target(name, _capsule(self._c_function), platform="cpu")
            self._call = jax.ffi.ffi_call(name, jax.ShapeDtypeStruct(self.shape, np.float32))
            return
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
        self._call = functools.partial(_custom_call_primitive().bind, target=self.name, shape=self.shape)

    def __call__(self, *arrays):
        """The operation on ``arrays`` (traced or concrete), a float32 array of :attr:`shape`."""
        return self._call(*arrays)


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


# XLA's typed FFI, as xla/ffi/api/c_api.h of jaxlib 0.10 lays it out (FFI 0.3): only the fields read.
#: The JAX versions (from, before) whose typed FFI this module speaks.
TYPED_FFI_JAX = ((0, 10), (0, 11))
#: The FFI version the handler declares: that of the headers the structures were read from (a minor version adds
#: fields at the ends of structures, past the ones read here), or the runtime's own where XLA passes its API.
FFI_VERSION = (0, 3)
_EXTENSION_METADATA, _STAGE_EXECUTE, _ERROR_INTERNAL = 1, 3, 13
_Pointer = ctypes.c_void_p


class _Extension(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("type", ctypes.c_int), ("next", _Pointer)]


class _ApiVersion(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _Pointer), ("major", ctypes.c_int),
                ("minor", ctypes.c_int)]


class _Metadata(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("api_version", _ApiVersion), ("traits", ctypes.c_uint32)]


class _MetadataExtension(ctypes.Structure):
    _fields_ = [("extension", _Extension), ("metadata", ctypes.POINTER(_Metadata))]


class _Buffers(ctypes.Structure):  # XLA_FFI_Args and XLA_FFI_Rets
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _Pointer), ("size", ctypes.c_int64),
                ("types", _Pointer), ("items", ctypes.POINTER(_Pointer))]


class _CallFrame(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.POINTER(_Extension)),
                ("api", _Pointer), ("ctx", _Pointer), ("stage", ctypes.c_int), ("args", _Buffers),
                ("rets", _Buffers)]


class _Buffer(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _Pointer), ("dtype", ctypes.c_int),
                ("data", _Pointer)]


class _ErrorCreateArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _Pointer), ("message", ctypes.c_char_p),
                ("code", ctypes.c_int)]


class _Api(ctypes.Structure):  # XLA_FFI_Api up to its first function
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _Pointer), ("api_version", _ApiVersion),
                ("internal_api", _Pointer),
                ("error_create", ctypes.CFUNCTYPE(_Pointer, ctypes.POINTER(_ErrorCreateArgs)))]


_HANDLER = ctypes.CFUNCTYPE(_Pointer, ctypes.POINTER(_CallFrame))


def _ffi_version_supported() -> bool:
    first, stop = TYPED_FFI_JAX
    return first <= tuple(jax.__version_info__)[:2] < stop


def _typed_handler(name: str, fn, arity: int):
    """``fn`` as a handler of XLA's typed FFI (a ctypes function, to be kept alive by the caller)."""

    def handler(frame_address):
        frame = frame_address.contents
        if frame.extension_start and frame.extension_start.contents.type == _EXTENSION_METADATA:
            metadata = ctypes.cast(frame.extension_start, ctypes.POINTER(_MetadataExtension)).contents.metadata
            # Some XLA versions ask without their API (a null pointer): then the headers' version.
            major, minor = FFI_VERSION
            if frame.api:
                minor = ctypes.cast(frame.api, ctypes.POINTER(_Api)).contents.api_version.minor
            metadata.contents.api_version = _ApiVersion(ctypes.sizeof(_ApiVersion), None, major, minor)
            metadata.contents.traits = 0
            return None
        if frame.stage != _STAGE_EXECUTE:
            return None
        try:
            if frame.args.size != arity or frame.rets.size != 1:
                raise ValueError(f"called with {frame.args.size} inputs and {frame.rets.size} results, expected "
                                 f"{arity} and 1")
            data = [ctypes.cast(frame.args.items[i], ctypes.POINTER(_Buffer)).contents.data for i in range(arity)]
            fn(ctypes.cast(frame.rets.items[0], ctypes.POINTER(_Buffer)).contents.data, *data)
            return None
        except Exception as error:  # noqa: BLE001 - XLA's thread cannot take a Python exception: XLA's error
            _LOG.exception("%s failed", name)
            api = ctypes.cast(frame.api, ctypes.POINTER(_Api)).contents
            message = f"{name}: {type(error).__name__}: {error}".encode()
            return api.error_create(ctypes.byref(_ErrorCreateArgs(ctypes.sizeof(_ErrorCreateArgs), None, message,
                                                                  _ERROR_INTERNAL)))

    return _HANDLER(handler)
